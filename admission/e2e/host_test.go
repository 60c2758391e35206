package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"headroom.dev/headroom/admission"
)

// TestHostE2E: the pod of host.TestDoneWhenPod (Llama-3.1-70B at TP 4 on
// L40S, --kv-offloading-size 64) with a 32Gi memory limit and no /dev/shm
// volume is refused by the API server for both, and the patch the checks
// propose, applied to the same object, is stored; so is the object as it
// was with headroom.dev/autofix, the mutating webhook applying the fixes.
func TestHostE2E(t *testing.T) {
	_, cs, _, _ := startWebhook(t)
	ctx := context.Background()

	body, err := os.ReadFile(filepath.Join("..", "testdata", "reviews", "deployment-host.json"))
	if err != nil {
		t.Fatal(err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		t.Fatal(err)
	}
	raw := review.Request.Object.Raw
	var d appsv1.Deployment
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	d.Namespace = optedIn
	deployments := cs.AppsV1().Deployments(optedIn)
	_, err = deployments.Create(ctx, &d, metav1.CreateOptions{})
	if err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("created (%v), want a 403", err)
	}
	for _, sub := range []string{
		`admission webhook "workloads.validate.headroom.dev" denied the request`,
		`its memory limit 32Gi is below the 78.83 GiB vLLM holds in host memory`,
		`to 104Gi`,
		`no /dev/shm volume, so it has the container's own 64 MiB, and vLLM writes 64.68 GiB there`,
		`sizeLimit 65Gi`,
	} {
		if !strings.Contains(err.Error(), sub) {
			t.Errorf("denial %q\nlacks %q", err, sub)
		}
	}

	// The patch `headroom check -o json` proposes (pod_patch), from the
	// webhook's own evaluation of the same object.
	c := admission.NewHandler(admission.Deps{}).Check(context.Background(), &admissionv1.AdmissionRequest{
		UID: "check", Operation: admissionv1.Create, Kind: review.Request.Kind, Namespace: optedIn, Name: d.Name,
		Object: runtime.RawExtension{Raw: raw}})
	ops, err := json.Marshal(admission.Patch(c.Evaluation.PodFixes, "/spec/template/spec"))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	fixedRaw, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("patch %s: %v", ops, err)
	}
	var fixed appsv1.Deployment
	if err := json.Unmarshal(fixedRaw, &fixed); err != nil {
		t.Fatal(err)
	}
	fixed.Namespace = optedIn
	if _, err := deployments.Create(ctx, &fixed, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the patched Deployment is refused: %v (patch %s)", err, ops)
	}
	got, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := got.Spec.Template.Spec
	if len(ps.Volumes) != 1 || ps.Volumes[0].EmptyDir == nil || ps.Volumes[0].EmptyDir.Medium != corev1.StorageMediumMemory || ps.Containers[0].VolumeMounts[0].MountPath != "/dev/shm" {
		t.Errorf("stored volumes %+v, mounts %+v", ps.Volumes, ps.Containers[0].VolumeMounts)
	}
	if m := ps.Containers[0].Resources.Limits[corev1.ResourceMemory]; m.String() != "104Gi" {
		t.Errorf("stored memory limit %s", m.String())
	}

	// The same object with headroom.dev/autofix: the mutating webhook
	// applies those fixes itself, and the validating one admits it.
	var auto appsv1.Deployment
	if err := json.Unmarshal(raw, &auto); err != nil {
		t.Fatal(err)
	}
	auto.Namespace, auto.Name = optedIn, d.Name+"-autofix"
	if auto.Annotations == nil {
		auto.Annotations = map[string]string{}
	}
	auto.Annotations[admission.AnnotationAutofix] = "true"
	stored, err := deployments.Create(ctx, &auto, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the Deployment with autofix is refused: %v", err)
	}
	ps = stored.Spec.Template.Spec
	if len(ps.Volumes) != 1 || ps.Volumes[0].EmptyDir == nil || ps.Containers[0].VolumeMounts[0].MountPath != "/dev/shm" {
		t.Errorf("autofix: stored volumes %+v, mounts %+v", ps.Volumes, ps.Containers[0].VolumeMounts)
	}
	if m := ps.Containers[0].Resources.Limits[corev1.ResourceMemory]; m.String() != "104Gi" {
		t.Errorf("autofix: stored memory limit %s", m.String())
	}
}
