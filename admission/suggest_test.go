package admission

import (
	"context"
	"regexp"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"headroom.dev/headroom/memory"
)

// orLessRe reads the value a denial tells the user to set.
var orLessRe = regexp.MustCompile(`set (--[a-z-]+) (\d+) or less`)

// withArgs is the request with flags appended to the args of the
// container named name (the pod template's, or the pod's): vLLM takes the
// last value of a flag given twice.
func withArgs(t *testing.T, req *admissionv1.AdmissionRequest, name string, flags []string) *admissionv1.AdmissionRequest {
	t.Helper()
	return editPodSpec(t, req, func(spec map[string]any) {
		cs, _ := spec["containers"].([]any)
		found := false
		for _, c := range cs {
			c := c.(map[string]any)
			if c["name"] != name {
				continue
			}
			args, _ := c["args"].([]any)
			for _, f := range flags {
				args = append(args, f)
			}
			c["args"], found = args, true
		}
		if !found {
			t.Fatalf("no container %q", name)
		}
	})
}

// TestSuggestionsPass is the property every fix the webhook names must
// have: applied to the object, the webhook itself admits it. Over every
// denied review fixture of a pod spec: each flag-only alternative the
// denial quotes, and each "set --flag N or less". The same objects with
// --max-model-len 1000000 added (past every model's maximum) check the
// "or less" value of the max_model_len_too_long denial, which named the
// model's maximum even where that maximum's KV cache does not fit either.
func TestSuggestionsPass(t *testing.T) {
	ctx := context.Background()
	h := newTestHandler(t)
	checked := 0
	for _, name := range fixtureNames(t) {
		base := fixture(t, name).Request
		if base.Kind.Kind != "Deployment" && base.Kind.Kind != "StatefulSet" && base.Kind.Kind != "Pod" {
			continue
		}
		variants := map[string]*admissionv1.AdmissionRequest{name: base}
		if c := h.Check(ctx, base); len(c.Evaluation.Engines) > 0 && c.Evaluation.Engines[0].Budget != nil {
			variants[name+" at 1000000 tokens"] = withArgs(t, base, c.Evaluation.Engines[0].Container, []string{"--max-model-len", "1000000"})
		}
		for label, req := range variants {
			c := h.Check(ctx, req)
			if c.Verdict != VerdictDenied && c.Verdict != VerdictBypassed {
				continue
			}
			for _, e := range c.Evaluation.Engines {
				if e.l.script != nil {
					continue // flags inside a shell script: appending args does not reach them
				}
				// An alternative is a whole fix: the webhook must admit it.
				for _, a := range e.Alternatives {
					if a.GPU != "" || len(a.Args) == 0 {
						continue
					}
					checked++
					after := withPodFixes(t, h, withArgs(t, req, e.Container, a.Args))
					if len(after.Evaluation.Denials) > 0 {
						t.Errorf("%s: the webhook suggests %v, and denies it: %v", label, a.Args, after.Evaluation.Denials)
					}
				}
				// A value to set "or less" answers its own problem: the
				// length it names must be one the webhook does not deny
				// for its length (other problems may remain, each with its
				// own fix).
				for _, d := range c.Evaluation.Denials {
					for _, m := range orLessRe.FindAllStringSubmatch(d.Message, -1) {
						checked++
						after := h.Check(ctx, withArgs(t, req, e.Container, []string{m[1], m[2]}))
						for _, x := range after.Evaluation.Denials {
							if x.Code == memory.CodeMaxLenTooLong || x.Code == memory.CodeRequestDoesntFit {
								t.Errorf("%s: the webhook says set %s %s or less, and denies it: %s", label, m[1], m[2], x.Message)
							}
						}
					}
				}
			}
		}
	}
	if checked < 3 {
		t.Fatalf("only %d suggestions checked: the fixtures lost their denials", checked)
	}
}
