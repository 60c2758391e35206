package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/kube"
	"headroom.dev/headroom/vllm"
)

// configUnread warns that a launch's --config file was not read, and why:
// the check then uses the command line alone.
func (e *Evaluation) configUnread(label string, l launch) {
	if l.configUnread != "" {
		e.warn(CodeConfigFile, "%s: the flags of its --config file are not read (%s); the check uses the command line alone", label, l.configUnread)
	}
}

// configReader reads a container's --config file from the ConfigMap its
// path is mounted from, in the workload's namespace (kube.ConfigMapFile).
func (h *Handler) configReader(ctx context.Context, namespace string, spec *corev1.PodSpec, c corev1.Container) vllm.ConfigReader {
	return func(file string) ([]byte, error) {
		srcs, err := kube.ConfigMapFile(spec, c, file)
		if err != nil {
			return nil, err
		}
		var why []string
		for _, src := range srcs {
			cm, err := h.getConfigMap(ctx, namespace, src.Name)
			if err != nil {
				why = append(why, fmt.Sprintf("ConfigMap %s/%s: %v", namespace, src.Name, err))
				continue
			}
			if data, ok := configMapValue(cm.Data, cm.BinaryData, src.Key); ok {
				return data, nil
			}
			why = append(why, fmt.Sprintf("ConfigMap %s/%s has no key %q", namespace, src.Name, src.Key))
		}
		return nil, errors.New(strings.Join(why, "; "))
	}
}
