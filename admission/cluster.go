package admission

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// Cluster reads what the checks need from the API server with client-go. It
// implements ConfigMapGetter, HPALister and PodTemplateGetter; unit tests
// give it a fake clientset, the end-to-end test a real one.
type Cluster struct {
	Client kubernetes.Interface
}

// GetConfigMap implements ConfigMapGetter.
func (c Cluster) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return c.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ListHPAs implements HPALister. The API server converts autoscaling/v1
// objects to v2 on read, so v2 covers both.
func (c Cluster) ListHPAs(ctx context.Context, namespace string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	l, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetPodTemplate implements PodTemplateGetter for apps/v1 Deployments and
// StatefulSets.
func (c Cluster) GetPodTemplate(ctx context.Context, namespace, kind, name string) (*corev1.PodTemplateSpec, error) {
	switch kind {
	case "Deployment":
		d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &d.Spec.Template, nil
	case "StatefulSet":
		s, err := c.Client.AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &s.Spec.Template, nil
	}
	return nil, fmt.Errorf("kind %s has no pod template headroom reads", kind)
}
