package admission

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ConfigMapGetter reads one ConfigMap: the model config named by
// headroom.dev/model-config, or a KAITO Workspace's inference config.
type ConfigMapGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// HPALister lists the HorizontalPodAutoscalers of a namespace, to find one
// that scales a vLLM workload on CPU alone.
type HPALister interface {
	ListHPAs(ctx context.Context, namespace string) ([]autoscalingv2.HorizontalPodAutoscaler, error)
}

// PodTemplateGetter reads the pod template of a Deployment or StatefulSet,
// the target of an HPA being admitted.
type PodTemplateGetter interface {
	GetPodTemplate(ctx context.Context, namespace, kind, name string) (*corev1.PodTemplateSpec, error)
}

// Cluster reads what the checks need from the API server with client-go's
// dynamic client, decoding into the typed objects. It implements
// ConfigMapGetter, HPALister and PodTemplateGetter; unit tests give it
// client-go's fake dynamic client, the end-to-end test a real one.
//
// Not the typed clientset: linking it registers every API group of
// Kubernetes when the program starts, which measured (GODEBUG=inittrace=1)
// 7 ms of the 15 ms that every headroom command, webhook or not, spent
// starting, for the four reads here.
type Cluster struct {
	Client dynamic.Interface
}

// NewCluster is a Cluster reading through cfg, with client-go's client-side
// rate limit off. That limit (5 requests a second, bursts of 10, unless
// set) would queue the webhook's own reads: every Deployment or
// StatefulSet review lists the HPAs of its namespace, and a model from a
// ConfigMap reads it, so a burst of reviews (a rollout of many objects)
// waited in the client until its look-ups timed out and were allowed
// unchecked: in the end-to-end test of 1,000 reviews at once (admission/e2e
// TestWebhookFaults), all 16 whose model came from a ConfigMap were, with
// the default limit, and none without it. The reads are one or two per review the API
// server itself sends, and the API server's own priority and fairness
// bounds what it serves.
func NewCluster(cfg *rest.Config) (Cluster, error) {
	c := rest.CopyConfig(cfg)
	c.QPS = -1 // rest: a negative QPS makes no rate limiter
	client, err := dynamic.NewForConfig(c)
	if err != nil {
		return Cluster{}, err
	}
	return Cluster{Client: client}, nil
}

// RESTConfig finds the API server the webhook reads from: kubeconfig when
// given, else the in-cluster service account, else $KUBECONFIG (read once,
// at start, through getenv). With none of them it returns nil: the webhook
// then serves without the cluster, so that it starts on a laptop.
// ~/.kube/config is not read unasked: a webhook started by hand would
// otherwise read ConfigMaps from whichever cluster kubectl last pointed at.
func RESTConfig(kubeconfig string, getenv func(string) string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	case getenv("KUBERNETES_SERVICE_HOST") != "":
		// The kubelet sets it in every pod; InClusterConfig reads it and
		// the service account's token.
		cfg, err = rest.InClusterConfig()
	case getenv("KUBECONFIG") != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", getenv("KUBECONFIG"))
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %v", err)
	}
	// Reads happen inside a 10 s admission call; the lookup timeout bounds
	// each one, this bounds anything else.
	cfg.Timeout = 10 * time.Second
	cfg.UserAgent = "headroom-webhook"
	return cfg, nil
}

// The resources Cluster reads.
var (
	configMapsResource   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	hpasResource         = schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}
	deploymentsResource  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	statefulSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

// get reads one namespaced object into out.
func (c Cluster) get(ctx context.Context, r schema.GroupVersionResource, namespace, name string, out any) error {
	u, err := c.Client.Resource(r).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return decode(u, out)
}

func decode(u *unstructured.Unstructured, out any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return fmt.Errorf("decode %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// GetConfigMap implements ConfigMapGetter.
func (c Cluster) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	if err := c.get(ctx, configMapsResource, namespace, name, &cm); err != nil {
		return nil, err
	}
	return &cm, nil
}

// ListHPAs implements HPALister. The API server converts autoscaling/v1
// objects to v2 on read, so v2 covers both.
func (c Cluster) ListHPAs(ctx context.Context, namespace string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	l, err := c.Client.Resource(hpasResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]autoscalingv2.HorizontalPodAutoscaler, len(l.Items))
	for i := range l.Items {
		if err := decode(&l.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetPodTemplate implements PodTemplateGetter for apps/v1 Deployments and
// StatefulSets.
func (c Cluster) GetPodTemplate(ctx context.Context, namespace, kind, name string) (*corev1.PodTemplateSpec, error) {
	switch kind {
	case "Deployment":
		var d appsv1.Deployment
		if err := c.get(ctx, deploymentsResource, namespace, name, &d); err != nil {
			return nil, err
		}
		return &d.Spec.Template, nil
	case "StatefulSet":
		var s appsv1.StatefulSet
		if err := c.get(ctx, statefulSetsResource, namespace, name, &s); err != nil {
			return nil, err
		}
		return &s.Spec.Template, nil
	}
	return nil, fmt.Errorf("kind %s has no pod template headroom reads", kind)
}
