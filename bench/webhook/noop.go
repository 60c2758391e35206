package main

import (
	"encoding/json"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
)

// noop is the baseline the webhook is measured against: an admission
// handler that does what any webhook must and nothing else. It reads the
// body, decodes the AdmissionReview for its uid and answers allowed, served
// by the same admission.NewServer (TLS, HTTP/1.1, timeouts, mux). Decoding
// with encoding/json into the k8s.io/api types is what a Go webhook written
// the plain way does; the request's object stays raw.
type noop struct{}

func (noop) ValidateHandler() http.Handler { return http.HandlerFunc(allow) }
func (noop) MutateHandler() http.Handler   { return http.HandlerFunc(allow) }

// maxNoopBody bounds a body, as the webhook does (admission's maxBodyBytes).
const maxNoopBody = 4 << 20

func allow(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxNoopBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: in.TypeMeta,
		Response: &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true},
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
