package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"headroom.dev/headroom/admission"
	"headroom.dev/headroom/internal/kubetest"
)

var (
	lwsResource  = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
	isvcResource = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}
)

// groupObject reads admission/testdata/groups/NAME.yaml, the objects the
// unit tests work their numbers on.
func groupObject(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	return kubetest.ReadObject(t, filepath.Join("..", "testdata", "groups", name+".yaml"))
}

func leaderCommand(o *unstructured.Unstructured) []any {
	leader := o.Object["spec"].(map[string]any)["leaderWorkerTemplate"].(map[string]any)["leaderTemplate"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	return leader["command"].([]any)
}

// startWebhook starts the API server with CRDs, the deployed webhook
// configurations pointed at a local webhook, and that webhook.
func startWebhook(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) (*envtest.Environment, *kubernetes.Clientset, dynamic.Interface, *warnings) {
	t.Helper()
	ln, _, mut, val := localWebhook(t)
	port := ln.Addr().(*net.TCPAddr).Port
	env := &envtest.Environment{
		CRDs: crds,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			LocalServingHost: "127.0.0.1", LocalServingPort: port,
			MutatingWebhooks: mut, ValidatingWebhooks: val,
		},
	}
	cfg := kubetest.Start(t, env, "./admission/e2e/")
	seen := &warnings{}
	wcfg := *cfg
	wcfg.WarningHandler = seen
	cluster := admission.Cluster{Client: dynamic.NewForConfigOrDie(cfg)}
	serveWebhook(t, ln, env.WebhookInstallOptions.LocalServingCertDir, admission.Deps{ConfigMaps: cluster, HPAs: cluster, PodTemplates: cluster})
	cs := kubernetes.NewForConfigOrDie(&wcfg)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optedIn, Labels: map[string]string{"headroom.dev/webhook": "enabled"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env, cs, dynamic.NewForConfigOrDie(&wcfg), seen
}

// LeaderWorkerSets and InferenceServices through a real API server with
// the projects' own CRDs (LWS v0.7.0, KServe v0.15.0): the webhook
// configurations of deploy/headroom.yaml route them to the webhook, and
// the stored objects pass the CRDs' schemas. Each number is worked in the
// unit tests (admission: TestLeaderWorkerSet, TestInferenceService; memory:
// TestAlternativesMultiNode): Llama-3.1-405B-Instruct's weights are 94.53
// GiB a GPU at tp 8, Llama-3.1-70B-Instruct's 131.45 GiB on one GPU.
func TestGroupsE2E(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs a kube-apiserver and etcd: run KUBEBUILDER_ASSETS=$(bash hack/e2e-assets.sh) go test ./admission/e2e/")
	}
	_, _, dyn, seen := startWebhook(t, kubetest.LeaderWorkerSetCRD(t), kubetest.InferenceServiceCRD(t))
	ctx := context.Background()
	lws := dyn.Resource(lwsResource).Namespace(optedIn)
	isvcs := dyn.Resource(isvcResource).Namespace(optedIn)
	denied := func(t *testing.T, err error, subs ...string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("error %v, want a denial", err)
		}
		for _, s := range subs {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("denial %q\nlacks %q", err, s)
			}
		}
	}

	t.Run("405B at tp 8 × pp 2 on 2 pods × 8 H100", func(t *testing.T) {
		if _, err := lws.Create(ctx, groupObject(t, "lws-405b"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ws := seen.take(); len(ws) != 0 {
			t.Errorf("warnings %q", ws)
		}
	})

	t.Run("405B at tp 8 in one 8-GPU pod", func(t *testing.T) {
		o := groupObject(t, "lws-405b")
		o.SetName("one-pod")
		if err := unstructured.SetNestedField(o.Object, int64(1), "spec", "leaderWorkerTemplate", "size"); err != nil {
			t.Fatal(err)
		}
		cmd := leaderCommand(o)
		cmd[2] = strings.Replace(cmd[2].(string), "--pipeline_parallel_size 2", "", 1)
		_, err := lws.Create(ctx, o, metav1.CreateOptions{})
		denied(t, err, `admission webhook "workloads.validate.headroom.dev" denied the request`, "on 8 × H100-80GB", "weights take 94.53 GiB per GPU",
			"size: 2 (16 × H100-80GB) and --pipeline-parallel-size 2 in the leader's vllm command")
	})

	t.Run("tp × pp against the group's GPUs", func(t *testing.T) {
		o := groupObject(t, "lws-405b")
		o.SetName("short")
		if err := unstructured.SetNestedField(o.Object, int64(1), "spec", "leaderWorkerTemplate", "size"); err != nil {
			t.Fatal(err)
		}
		_, err := lws.Create(ctx, o, metav1.CreateOptions{})
		denied(t, err, "the group has 8 GPUs (1 pod × 8 × H100-80GB) but --tensor-parallel-size 8 × --pipeline-parallel-size 2 = 16", "To fix: size: 2")
	})

	t.Run("autofix writes into the leader's script", func(t *testing.T) {
		o := groupObject(t, "lws-405b")
		o.SetName("autofix")
		o.SetAnnotations(map[string]string{admission.AnnotationAutofix: "true"})
		cmd := leaderCommand(o)
		cmd[2] = strings.Replace(cmd[2].(string), " --max-model-len 32768", "", 1)
		if _, err := lws.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := lws.Get(ctx, "autofix", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		script := leaderCommand(got)[2].(string)
		if !strings.Contains(script, "--pipeline_parallel_size 2 --max-model-len=") || !strings.Contains(script, " --gpu-memory-utilization=") {
			t.Errorf("stored leader script %q", script)
		}
		if plan := got.GetAnnotations()[admission.AnnotationPlan]; !strings.Contains(plan, "on 16 × H100-80GB, TP 8 PP 2") {
			t.Errorf("plan %q", plan)
		}
		seen.take()
	})

	t.Run("70B InferenceService on one A100-80GB", func(t *testing.T) {
		_, err := isvcs.Create(ctx, groupObject(t, "isvc-70b"), metav1.CreateOptions{})
		denied(t, err, "predictor: meta-llama/Llama-3.1-70B-Instruct on 1 × A100-80GB", "weights take 131.45 GiB per GPU",
			"nvidia.com/gpu: 4 in the predictor's resources")

		o := groupObject(t, "isvc-70b")
		if err := unstructured.SetNestedField(o.Object, "4", "spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedStringSlice(o.Object, []string{"--model_name=llama3", "--model_id=meta-llama/Llama-3.1-70B-Instruct", "--max_model_len=32768"}, "spec", "predictor", "model", "args"); err != nil {
			t.Fatal(err)
		}
		if _, err := isvcs.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
