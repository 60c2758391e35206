package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"unicode"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"headroom.dev/headroom/graceful"
)

// maxBodyBytes bounds an AdmissionReview body. The API server stores
// objects of up to 1.5 MiB (etcd's default request limit); an UPDATE review
// carries the object and the old object plus the envelope, so 4 MiB holds
// the largest real review with room. A larger body gets HTTP 413, and the
// webhook's failurePolicy (Ignore) lets the object through.
const maxBodyBytes = 4 << 20

// maxWarningRunes bounds one warning. The API server truncates each warning
// to 256 runes only once the response's warnings pass 4096 runes
// (k8s.io/apiserver endpoints/filters/warning.go); bounding them here keeps
// a long model name from crowding out the other warnings.
const maxWarningRunes = 1024

// maxWarnings bounds the warnings of one answer; the API server passes on
// 4096 runes of them in all, so more would only be cut.
const maxWarnings = 32

// reviewIn is what the webhook reads of an AdmissionReview: the request's
// user and options are passed over rather than decoded and copied. An
// update's old object is kept (as raw bytes, within maxBodyBytes): an
// image change with the same flags is an upgrade the webhook prices.
type reviewIn struct {
	metav1.TypeMeta `json:",inline"`
	Request         *struct {
		UID         types.UID                   `json:"uid"`
		Kind        metav1.GroupVersionKind     `json:"kind"`
		Resource    metav1.GroupVersionResource `json:"resource"`
		SubResource string                      `json:"subResource,omitempty"`
		Name        string                      `json:"name,omitempty"`
		Namespace   string                      `json:"namespace,omitempty"`
		Operation   admissionv1.Operation       `json:"operation"`
		Object      runtime.RawExtension        `json:"object,omitempty"`
		OldObject   runtime.RawExtension        `json:"oldObject,omitempty"`
	} `json:"request"`
}

// decodeReview reads an admission.k8s.io/v1 AdmissionReview request body,
// the fields of reviewIn. It returns one-line errors for anything else:
// malformed JSON, another apiVersion or kind, a missing request or uid.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var r reviewIn
	if err := decodeObject(body, &r); err != nil {
		return nil, fmt.Errorf("%w: %s", errNotReview, oneLine(err))
	}
	switch {
	case r.APIVersion != admissionv1.SchemeGroupVersion.String() || r.Kind != "AdmissionReview":
		return nil, fmt.Errorf("%w: got apiVersion %q kind %q", errNotReview, clip(r.APIVersion), clip(r.Kind))
	case r.Request == nil:
		return nil, fmt.Errorf("%w: no request", errNotReview)
	case r.Request.UID == "":
		return nil, fmt.Errorf("%w: the request has no uid", errNotReview)
	}
	q := r.Request
	return &admissionv1.AdmissionReview{TypeMeta: r.TypeMeta, Request: &admissionv1.AdmissionRequest{
		UID: q.UID, Kind: q.Kind, Resource: q.Resource, SubResource: q.SubResource,
		Name: q.Name, Namespace: q.Namespace, Operation: q.Operation, Object: q.Object, OldObject: q.OldObject,
	}}, nil
}

// Validate answers the validating webhook: denied with the planner's
// numbers, or allowed with warnings.
func (h *Handler) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp, _, _ := h.respond(ctx, req, false)
	return resp
}

// Mutate answers the mutating webhook: always allowed, with a JSON patch
// when there is something to add.
func (h *Handler) Mutate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp, _, _ := h.respond(ctx, req, true)
	return resp
}

// respond reviews a request and builds the response. A panic in a check is
// recovered here as a last resort: the object is allowed with a warning
// (fail open) and the stack is logged.
func (h *Handler) respond(ctx context.Context, req *admissionv1.AdmissionRequest, mutate bool) (resp *admissionv1.AdmissionResponse, d decision, verdict string) {
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("review panicked; allowed without checks", "uid", req.UID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			resp = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, Warnings: []string{"headroom: internal error, the object was not checked"}}
			verdict = VerdictError
		}
	}()
	resp = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	d, err := h.decide(ctx, req, mutate)
	if err != nil {
		resp.Warnings = []string{"headroom: cannot read the object, it was not checked: " + oneLine(err)}
		return resp, d, VerdictError
	}
	if mutate {
		verdict = VerdictAllowed
		if patch, err := d.patch.marshal(); err != nil {
			h.log.Error("cannot encode patch", "uid", req.UID, "err", err)
			verdict = VerdictError
		} else if len(patch) > 0 {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
			verdict = VerdictPatched
		}
		resp.Warnings = cleanWarnings(d.notes)
		return resp, d, verdict
	}
	warnings := messages(d.Warnings)
	switch {
	case len(d.Denials) > 0 && d.Bypass:
		for _, f := range d.Denials {
			warnings = append(warnings, "bypassed by annotation, would be denied: "+f.Message)
		}
		verdict = VerdictBypassed
	case len(d.Denials) > 0:
		resp.Allowed = false
		resp.Result = &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: "headroom: " + strings.Join(messages(d.Denials), "; ") + fmt.Sprintf(". To deploy anyway, annotate the object %s: \"true\"", AnnotationBypass),
		}
		verdict = VerdictDenied
	case len(warnings) > 0:
		verdict = VerdictWarned
	default:
		verdict = VerdictAllowed
	}
	resp.Warnings = cleanWarnings(warnings)
	return resp, d, verdict
}

// cleanWarnings makes warnings the API server will pass on: it drops a
// warning that is not valid UTF-8 or holds a control character
// (apimachinery's NewWarningHeader), so those become spaces here; and it
// bounds each one's length.
func cleanWarnings(ws []string) []string {
	if len(ws) == 0 {
		return nil
	}
	more := 0
	if len(ws) > maxWarnings {
		ws, more = ws[:maxWarnings], len(ws)-maxWarnings
	}
	out := make([]string, 0, len(ws)+1)
	for _, w := range ws {
		w = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(w, " "))
		if utf8.RuneCountInString(w) > maxWarningRunes {
			w = string([]rune(w)[:maxWarningRunes-3]) + "..."
		}
		out = append(out, "headroom: "+w)
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("headroom: %d more warnings not shown (at most %d)", more, maxWarnings))
	}
	return out
}

// readBody reads a review's body, at most maxBodyBytes. The API server
// sends a Content-Length: a buffer sized from it, with bytes.MinRead to
// spare so that ReadFrom never grows it, takes one allocation of the body's
// size, where io.ReadAll grows from 512 bytes by copying: for a 45 KiB
// review 15 allocations and twice the bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= maxBodyBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	return buf.Bytes(), err
}

// ValidateHandler serves POST /validate.
func (h *Handler) ValidateHandler() http.Handler { return h.endpoint("validate", false) }

// MutateHandler serves POST /mutate.
func (h *Handler) MutateHandler() http.Handler { return h.endpoint("mutate", true) }

func (h *Handler) endpoint(name string, mutate bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := h.now()
		fail := func(code int, msg string) {
			h.metrics.observe(name, "invalid", VerdictInvalid, h.now().Sub(start))
			h.log.Warn("rejected request", "endpoint", name, "status", code, "err", msg, "remote", r.RemoteAddr)
			http.Error(w, msg, code)
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			fail(http.StatusMethodNotAllowed, "use POST with an admission.k8s.io/v1 AdmissionReview")
			return
		}
		// Admitted by its declared size before its body is read: a review
		// waiting for the budget holds its connection, not its body (see
		// DefaultReviewBytes). A body of unknown length counts as the
		// largest allowed; readBody enforces the declared one.
		size := r.ContentLength
		if size < 0 || size > maxBodyBytes {
			size = maxBodyBytes
		}
		release, err := h.gate.Enter(r.Context(), size)
		if err != nil {
			w.Header().Set("Retry-After", "1")
			fail(graceful.Status(err), "headroom webhook: "+err.Error()+"; the object is admitted unchecked when the webhook's failurePolicy is Ignore")
			return
		}
		defer release()
		body, err := readBody(w, r)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBodyBytes))
				return
			}
			fail(http.StatusBadRequest, "cannot read body: "+oneLine(err))
			return
		}
		review, err := decodeReview(body)
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		req := review.Request
		resp, d, verdict := h.respond(r.Context(), req, mutate)
		out, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: resp,
		})
		if err != nil {
			h.log.Error("cannot encode response", "uid", req.UID, "err", err)
			http.Error(w, "cannot encode response", http.StatusInternalServerError)
			h.metrics.observe(name, d.Kind, VerdictError, h.now().Sub(start))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		took := h.now().Sub(start)
		h.metrics.observe(name, d.Kind, verdict, took)
		level := slog.LevelDebug
		if verdict != VerdictAllowed {
			level = slog.LevelInfo
		}
		if !h.log.Enabled(r.Context(), level) {
			// Most reviews are allowed and logged at debug level: the
			// line's attributes would be built only to be dropped.
			return
		}
		attrs := []slog.Attr{
			slog.String("endpoint", name), slog.String("verdict", verdict), slog.String("uid", string(req.UID)),
			slog.String("operation", string(req.Operation)), slog.String("kind", req.Kind.Kind),
			slog.String("namespace", req.Namespace), slog.String("name", req.Name),
			slog.Int("warnings", len(resp.Warnings)), slog.Duration("took", took),
		}
		if resp.Result != nil {
			attrs = append(attrs, slog.String("reason", resp.Result.Message))
		}
		h.log.LogAttrs(r.Context(), level, "admission", attrs...)
	})
}

// messages lists the findings' messages, for the AdmissionReview.
func messages(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Message
	}
	return out
}
