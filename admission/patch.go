package admission

import (
	"encoding/json"
	"strconv"
	"strings"
)

// PatchOp is one RFC 6902 JSON patch operation. The webhook only adds and
// replaces, so every operation carries a value.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// pointer joins reference tokens into an RFC 6901 JSON pointer. "~" is
// escaped before "/" (RFC 6901 §3), so an annotation key such as
// "headroom.dev/plan" becomes "headroom.dev~1plan" and a key holding "~1"
// stays distinct from one holding "/".
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// patchBuilder collects operations against one object.
type patchBuilder struct{ ops []PatchOp }

func (p *patchBuilder) add(path string, v any) {
	p.ops = append(p.ops, PatchOp{Op: "add", Path: path, Value: v})
}

func (p *patchBuilder) replace(path string, v any) {
	p.ops = append(p.ops, PatchOp{Op: "replace", Path: path, Value: v})
}

// setAnnotation sets one annotation under metaPath ("/metadata"), creating
// the annotations map when the object has none: "add" on a missing parent
// fails in RFC 6902, so the whole map is added then.
func (p *patchBuilder) setAnnotation(metaPath string, existing map[string]string, key, value string) {
	if existing == nil {
		p.add(metaPath+pointer("annotations"), map[string]string{key: value})
		return
	}
	if old, ok := existing[key]; ok {
		if old != value {
			p.replace(metaPath+pointer("annotations", key), value)
		}
		return
	}
	p.add(metaPath+pointer("annotations", key), value)
}

// appendList appends values to the list at path, creating it when absent.
func appendList[T any](p *patchBuilder, path string, exists bool, values ...T) {
	if len(values) == 0 {
		return
	}
	if !exists {
		p.add(path, values)
		return
	}
	for _, v := range values {
		p.add(path+"/-", v)
	}
}

// index renders a list index as a pointer token.
func index(i int) string { return strconv.Itoa(i) }

// marshal renders the patch, nil when empty.
func (p *patchBuilder) marshal() ([]byte, error) {
	if len(p.ops) == 0 {
		return nil, nil
	}
	return json.Marshal(p.ops)
}
