package kube

import (
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ConfigMapKey is one place a file in a container may come from: a
// ConfigMap and its key.
type ConfigMapKey struct {
	Name, Key string
}

// ConfigMapFile finds where the file at file comes from in container c of
// spec, as the kubelet lays out a ConfigMap volume: the volume mounted at
// the longest prefix of its path, which must be a ConfigMap (or a projected
// volume of ConfigMaps), and the key its items map to that file (the
// file's name where they map none; a subPath mount is the file itself). A
// projected volume without items gives each of its ConfigMaps, to try in
// order. A file on another kind of volume, or in the image, has no
// ConfigMap: the error says where it is instead.
func ConfigMapFile(spec *corev1.PodSpec, c corev1.Container, file string) ([]ConfigMapKey, error) {
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
		return nil, errors.New("no volume is mounted there: the file is in the image, which cannot be read from here")
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
		return []ConfigMapKey{{vol.ConfigMap.Name, key}}, nil
	case vol.Projected != nil:
		var out []ConfigMapKey
		for _, src := range vol.Projected.Sources {
			if src.ConfigMap == nil {
				continue
			}
			if key, ok := itemKey(src.ConfigMap.Items, rel); ok {
				out = append(out, ConfigMapKey{src.ConfigMap.Name, key})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("projected volume %q has no ConfigMap that gives %s", mount.Name, rel)
		}
		return out, nil
	}
	return nil, fmt.Errorf("volume %q is not a ConfigMap, the only volume a --config is read from", mount.Name)
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
