package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Where a --config file of a pod comes from, by the ways Kubernetes puts a
// ConfigMap's key at a path.
func TestConfigMapFile(t *testing.T) {
	cm := func(name string, items ...corev1.KeyToPath) corev1.VolumeSource {
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items}}
	}
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "whole", VolumeSource: cm("flags")},
		{Name: "items", VolumeSource: cm("flags", corev1.KeyToPath{Key: "flags.yaml", Path: "conf/serve.yaml"})},
		{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}},
		}}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "models"}}},
	}}
	c := corev1.Container{WorkingDir: "/srv", VolumeMounts: []corev1.VolumeMount{
		{Name: "whole", MountPath: "/etc/vllm"},
		{Name: "items", MountPath: "/etc/vllm/more/"},
		{Name: "whole", MountPath: "/config.yaml", SubPath: "serve.yaml"},
		{Name: "projected", MountPath: "/srv/p"},
		{Name: "data", MountPath: "/data"},
	}}
	for _, tc := range []struct {
		file string
		want []ConfigMapKey
		says string
	}{
		{file: "/etc/vllm/config.yaml", want: []ConfigMapKey{{"flags", "config.yaml"}}},
		// The longest mount wins, and its items map the path to a key.
		{file: "/etc/vllm/more/conf/serve.yaml", want: []ConfigMapKey{{"flags", "flags.yaml"}}},
		{file: "/etc/vllm/more/other.yaml", says: `maps no item to other.yaml`},
		{file: "/config.yaml", want: []ConfigMapKey{{"flags", "serve.yaml"}}},
		// Relative to the container's working directory; a projected
		// volume's ConfigMaps are tried in order.
		{file: "p/x.yaml", want: []ConfigMapKey{{"a", "x.yaml"}, {"b", "x.yaml"}}},
		{file: "/etc/vllm/sub/x.yaml", says: "maps no item"},
		{file: "/data/config.yaml", says: `volume "data" is not a ConfigMap`},
		{file: "/opt/config.yaml", says: "in the image"},
		{file: "/etc/vllm", says: "mount point"},
	} {
		got, err := ConfigMapFile(spec, c, tc.file)
		if tc.says != "" {
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v %v, want an error saying %q", tc.file, got, err, tc.says)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.file, got, err, tc.want)
		}
	}
	c.WorkingDir = ""
	if _, err := ConfigMapFile(spec, c, "config.yaml"); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("a relative path without a working directory: %v", err)
	}
}
