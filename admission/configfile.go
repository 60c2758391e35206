package admission

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/vllm"
)

// configSource is one place a file of a ConfigMap volume may come from:
// the ConfigMap and its key.
type configSource struct {
	name, key string
}

// configSources finds where the file at file comes from in container c of
// spec: the volume mounted at the longest prefix of its path, which must
// be a ConfigMap (or a projected volume of ConfigMaps), and the key its
// items map to that file (the file's name where they map none). Several
// sources come back for a projected volume without items, tried in order.
// A vLLM --config is most often such a file; one on another kind of volume
// or in the image cannot be read from the API server.
func configSources(spec *corev1.PodSpec, c corev1.Container, file string) ([]configSource, error) {
	if !path.IsAbs(file) {
		if c.WorkingDir == "" {
			return nil, errors.New("a relative path, and the container's working directory is its image's: give the file's absolute path")
		}
		file = path.Join(c.WorkingDir, file)
	}
	file = path.Clean(file)
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if (file == mp || strings.HasPrefix(file, strings.TrimSuffix(mp, "/")+"/")) && (mount == nil || len(mp) > len(path.Clean(mount.MountPath))) {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		return nil, errors.New("no volume is mounted there: the file is in the image, which the webhook cannot read")
	}
	mp := path.Clean(mount.MountPath)
	rel := strings.TrimPrefix(strings.TrimPrefix(file, mp), "/")
	if mount.SubPath != "" {
		if file != mp {
			return nil, fmt.Errorf("volume %q is mounted there by its subPath %q, a file, not a directory", mount.Name, mount.SubPath)
		}
		rel = mount.SubPath
	}
	if rel == "" {
		return nil, fmt.Errorf("the path is volume %q's mount point, a directory", mount.Name)
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == mount.Name {
			vol = &spec.Volumes[i]
		}
	}
	switch {
	case vol == nil:
		return nil, fmt.Errorf("the pod has no volume %q", mount.Name)
	case vol.ConfigMap != nil:
		key, ok := itemKey(vol.ConfigMap.Items, rel)
		if !ok {
			return nil, fmt.Errorf("ConfigMap volume %q maps no item to %s", mount.Name, rel)
		}
		return []configSource{{vol.ConfigMap.Name, key}}, nil
	case vol.Projected != nil:
		var out []configSource
		for _, src := range vol.Projected.Sources {
			if src.ConfigMap == nil {
				continue
			}
			if key, ok := itemKey(src.ConfigMap.Items, rel); ok {
				out = append(out, configSource{src.ConfigMap.Name, key})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("projected volume %q has no ConfigMap that gives %s", mount.Name, rel)
		}
		return out, nil
	}
	return nil, fmt.Errorf("volume %q is not a ConfigMap, the only volume the webhook reads a --config from", mount.Name)
}

// itemKey is the ConfigMap key of the file at rel in a volume of items: the
// item whose path it is, or without items the key of that name (a
// ConfigMap key holds no "/").
func itemKey(items []corev1.KeyToPath, rel string) (string, bool) {
	if len(items) == 0 {
		return rel, !strings.Contains(rel, "/")
	}
	for _, it := range items {
		if path.Clean(it.Path) == rel {
			return it.Key, true
		}
	}
	return "", false
}

// configReader reads a container's --config file from the ConfigMap its
// path is mounted from, in the workload's namespace (configSources).
func (h *Handler) configReader(ctx context.Context, namespace string, spec *corev1.PodSpec, c corev1.Container) vllm.ConfigReader {
	return func(file string) ([]byte, error) {
		srcs, err := configSources(spec, c, file)
		if err != nil {
			return nil, err
		}
		var why []string
		for _, src := range srcs {
			cm, err := h.getConfigMap(ctx, namespace, src.name)
			if err != nil {
				why = append(why, fmt.Sprintf("ConfigMap %s/%s: %v", namespace, src.name, err))
				continue
			}
			if data, ok := configMapValue(cm.Data, cm.BinaryData, src.key); ok {
				return data, nil
			}
			why = append(why, fmt.Sprintf("ConfigMap %s/%s has no key %q", namespace, src.name, src.key))
		}
		return nil, errors.New(strings.Join(why, "; "))
	}
}
