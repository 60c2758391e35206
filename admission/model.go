package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/model/catalog"
)

// Keys of the ConfigMap named by headroom.dev/model-config.
const (
	keyConfig = "config.json"
	// keyIndex optionally holds model.safetensors.index.json, whose
	// metadata.total_size gives the checkpoint's exact weight bytes.
	keyIndex = "model.safetensors.index.json"
)

// errNoCluster is returned by lookups when the webhook runs without access
// to the API server.
var errNoCluster = errors.New("the webhook runs without access to the API server (started with --no-cluster, or outside a cluster with no kubeconfig)")

// resolveModel finds the Spec of the served model: from the ConfigMap named
// by headroom.dev/model-config when the object has that annotation, else
// from the embedded catalog. It never reaches the Hub (see the package
// documentation).
func (h *Handler) resolveModel(ctx context.Context, namespace string, ann map[string]string, ref string) (model.Spec, error) {
	if name, ok := ann[AnnotationModelConfig]; ok {
		return h.modelFromConfigMap(ctx, namespace, name, ref)
	}
	if strings.TrimSpace(ref) == "" {
		return model.Spec{}, fmt.Errorf("no model is named (give --model or the positional model argument), and there is no %s annotation", AnnotationModelConfig)
	}
	return h.catalog.lookup(ref)
}

// maxCachedRefs bounds the catalog cache; model names come from outside.
const maxCachedRefs = 4096

// catalogCache remembers what the embedded catalog says about a model
// name. The catalog cannot change while the process runs, and looking a
// name up parses its config.json (and a miss ranks every name for
// suggestions): a few hundred microseconds a review. The Specs it hands
// out share their slices; the planner only reads them.
type catalogCache struct {
	mu      sync.Mutex
	entries map[string]catalogEntry
}

type catalogEntry struct {
	spec model.Spec
	err  error
}

func (c *catalogCache) lookup(ref string) (model.Spec, error) {
	c.mu.Lock()
	e, ok := c.entries[ref]
	c.mu.Unlock()
	if ok {
		return e.spec, e.err
	}
	e = catalogEntryFor(ref)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]catalogEntry{}
	}
	if len(c.entries) < maxCachedRefs {
		c.entries[ref] = e
	}
	c.mu.Unlock()
	return e.spec, e.err
}

func catalogEntryFor(ref string) catalogEntry {
	s, ok := catalog.Lookup(ref)
	if !ok {
		hint := ""
		if names := catalog.Suggest(ref, 3); len(names) > 0 {
			hint = " (did you mean " + strings.Join(names, ", ") + "?)"
		}
		return catalogEntry{err: fmt.Errorf("model %q is not in headroom's catalog%s: put its config.json in a ConfigMap and name it with the annotation %s", clip(ref), hint, AnnotationModelConfig)}
	}
	if err := s.Validate(); err != nil {
		return catalogEntry{err: fmt.Errorf("catalog entry %q is broken (%v)", ref, err)}
	}
	return catalogEntry{spec: s}
}

func (h *Handler) modelFromConfigMap(ctx context.Context, namespace, name, ref string) (model.Spec, error) {
	where := fmt.Sprintf("ConfigMap %s/%s (annotation %s)", namespace, name, AnnotationModelConfig)
	cm, err := h.getConfigMap(ctx, namespace, name)
	if err != nil {
		return model.Spec{}, fmt.Errorf("%s: %v", where, err)
	}
	data, ok := configMapValue(cm.Data, cm.BinaryData, keyConfig)
	if !ok {
		return model.Spec{}, fmt.Errorf("%s has no %s key: put the model's Hugging Face config.json there", where, keyConfig)
	}
	s, err := model.ParseConfig(data)
	if err != nil {
		return model.Spec{}, fmt.Errorf("%s: %s: %v", where, keyConfig, err)
	}
	s.ID = ref
	if s.ID == "" {
		s.ID = "configmap " + name
	}
	if raw, ok := configMapValue(cm.Data, cm.BinaryData, keyIndex); ok {
		ix, err := model.ParseSafetensorsIndex(raw)
		if err != nil {
			return model.Spec{}, fmt.Errorf("%s: %s: %v", where, keyIndex, err)
		}
		if ix.TotalSize > 0 {
			s.CheckpointBytes = ix.TotalSize
			s.CheckpointSource = where + " " + keyIndex + " metadata.total_size"
		}
	}
	return s, nil
}

// getConfigMap reads a ConfigMap within the lookup timeout.
func (h *Handler) getConfigMap(ctx context.Context, namespace, name string) (cmData, error) {
	if h.configMaps == nil {
		return cmData{}, errNoCluster
	}
	ctx, cancel := context.WithTimeout(ctx, h.lookupTimeout)
	defer cancel()
	cm, err := h.configMaps.GetConfigMap(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return cmData{}, errors.New("not found")
	case err != nil:
		return cmData{}, fmt.Errorf("cannot read it: %v", err)
	case cm == nil:
		return cmData{}, errors.New("not found")
	}
	return cmData{Data: cm.Data, BinaryData: cm.BinaryData}, nil
}

// cmData is the content of a ConfigMap.
type cmData struct {
	Data       map[string]string
	BinaryData map[string][]byte
}

func configMapValue(data map[string]string, binary map[string][]byte, key string) ([]byte, bool) {
	if v, ok := data[key]; ok {
		return []byte(v), true
	}
	v, ok := binary[key]
	return v, ok
}

// clip shortens outside text quoted in a message.
func clip(s string) string {
	const limit = 120
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
