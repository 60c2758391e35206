package admission

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
)

// Checked is the validating webhook's answer to one object, with the
// evaluation behind it: what `headroom check` prints for a manifest before
// it is applied. It is the webhook's own decision (respond), so the two
// cannot disagree.
type Checked struct {
	Response   *admissionv1.AdmissionResponse
	Evaluation Evaluation
	// Verdict is one of the Verdict constants (denied, warned, ...).
	Verdict string
}

// Check runs the validating webhook on one request, as the API server
// would send it.
func (h *Handler) Check(ctx context.Context, req *admissionv1.AdmissionRequest) Checked {
	resp, d, verdict := h.respond(ctx, req, false)
	return Checked{Response: resp, Evaluation: d.Evaluation, Verdict: verdict}
}
