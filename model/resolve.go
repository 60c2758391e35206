package model

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// ResolveOptions says where Resolve may look for a model.
type ResolveOptions struct {
	// FS, when set, is the file system local paths are looked up in (tests
	// pass an fstest.MapFS); nil means the operating system's.
	FS fs.FS
	// Catalog returns the embedded catalog's Spec for a name, if it has
	// one. It is a function so that this package need not import the
	// catalog, which imports it.
	Catalog func(id string) (Spec, bool)
	// Suggest returns catalog names close to a name that matched nothing,
	// best first.
	Suggest func(id string) []string
	// Hub is used for "org/name" references; nil means offline.
	Hub *Hub
}

// Resolve turns a model reference into a Spec, trying in order: an
// existing local path (a model directory or a config.json), the catalog,
// then the Hub when ref looks like "org/name" and a Hub is configured.
func Resolve(ctx context.Context, ref string, opt ResolveOptions) (Spec, error) {
	if strings.TrimSpace(ref) == "" {
		return Spec{}, errors.New("no model given: name a Hugging Face id (org/name), a catalog name or a local path")
	}
	if s, found, err := resolveLocal(ref, opt.FS); found || err != nil {
		return s, err
	}
	if opt.Catalog != nil {
		if s, ok := opt.Catalog(ref); ok {
			if s.ID == "" {
				s.ID = ref
			} else if s.ID != ref {
				s.Alias = ref
			}
			if err := s.Validate(); err != nil {
				return Spec{}, fmt.Errorf("catalog entry %q is broken (%v): report it", ref, err)
			}
			return s, nil
		}
	}
	hubID := strings.Contains(ref, "/") && ValidHubID(ref)
	if hubID && opt.Hub != nil {
		s, err := opt.Hub.Load(ctx, ref)
		switch {
		case err != nil && notFound(err):
			if hint := suggestion(ref, opt.Suggest); hint != "" {
				return Spec{}, fmt.Errorf("%w; %s", err, hint)
			}
		case err != nil && unreachable(err):
			// An air-gapped cluster: say what --offline would have said,
			// and how to plan without the Hub.
			tried := "it is not in the catalog"
			if hint := suggestion(ref, opt.Suggest); hint != "" {
				tried += " (" + hint + ")"
			}
			return Spec{}, fmt.Errorf("%w; %s: without the Hub, plan a catalog model with --offline (or HF_HUB_OFFLINE=1; `headroom models` lists them), or give the checkpoint's config.json as the model (--model ./config.json, with model.safetensors.index.json beside it for exact weights)", err, tried)
		}
		return s, err
	}
	if looksLikePath(ref) {
		return Spec{}, fmt.Errorf("model path %q does not exist", ref)
	}
	tried := "not a local path, not in the catalog"
	if hint := suggestion(ref, opt.Suggest); hint != "" {
		tried += " (" + hint + ")"
	}
	if !hubID {
		return Spec{}, fmt.Errorf("unknown model %q: %s, and Hub models are named org/name", ref, tried)
	}
	return Spec{}, fmt.Errorf("unknown model %q: %s, and the Hub is off (drop --offline and unset HF_HUB_OFFLINE to fetch it from the Hub)", ref, tried)
}

// resolveLocal loads ref when it names an existing file or directory.
// found is false when nothing is there, so the next source is tried.
func resolveLocal(ref string, fsys fs.FS) (s Spec, found bool, err error) {
	if fsys != nil {
		name := strings.TrimPrefix(ref, "./")
		if !fs.ValidPath(name) {
			return Spec{}, false, nil
		}
		if _, err := fs.Stat(fsys, name); err != nil {
			return Spec{}, false, nil
		}
		s, err := LoadLocal(fsys, name)
		if err == nil {
			s.ID = ref
		}
		return s, true, err
	}
	if _, err := os.Stat(ref); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Spec{}, false, nil
		}
		return Spec{}, true, fmt.Errorf("cannot read model path %q: %v", ref, pathErr(err))
	}
	s, err = LoadPath(ref)
	return s, true, err
}

// looksLikePath reports whether ref was meant as a file path rather than
// a name.
func looksLikePath(ref string) bool {
	return strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") ||
		strings.HasPrefix(ref, "~") || strings.HasSuffix(ref, ".json") || strings.Contains(ref, `\`) ||
		strings.Count(ref, "/") > 1
}

// suggestion words up to three near names: "did you mean A, B or C?".
func suggestion(ref string, suggest func(string) []string) string {
	if suggest == nil {
		return ""
	}
	names := suggest(ref)
	if len(names) > 3 {
		names = names[:3]
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "did you mean " + names[0] + "?"
	}
	return "did you mean " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + "?"
}
