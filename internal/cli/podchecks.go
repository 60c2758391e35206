package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"headroom.dev/headroom/admission"
)

// addPodChecksFlag adds --pod-checks, which check and the webhook share:
// what the checks of the pod itself (memory limit, /dev/shm, probes,
// tokens in plain env values) deny.
func addPodChecksFlag(fl *pflag.FlagSet, to *string) {
	fl.StringVar(to, "pod-checks", string(admission.PodPolicyDefault), "what the pod checks deny: default (a memory limit below the host plan, no /dev/shm where vLLM writes there), strict (also probes shorter than the load and Hugging Face tokens in plain env values), warn (none)")
}

// writePodFixes prints the pod checks' fixes of one object, and the JSON
// patch that applies them all.
func writePodFixes(w io.Writer, r CheckResult) {
	if len(r.PodFixes) == 0 {
		return
	}
	for _, f := range r.PodFixes {
		fmt.Fprintf(w, "  fix      %s\n", f.Message)
	}
	ops, err := json.Marshal(r.PodPatch)
	if err != nil {
		return
	}
	// kubectl applies it to the file offline: kubectl patch --local -f
	// FILE --type json -p PATCH -o yaml.
	fmt.Fprintf(w, "  patch    kubectl patch --local -f %s --type json -o yaml -p '%s'\n", r.File, ops)
}
