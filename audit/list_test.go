package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// A list is read in pages of listPage, following the continue token, and
// an answer past MaxResponseBytes fails with the bound named instead of
// being read whole.
func TestPagesAndAnswerBound(t *testing.T) {
	var limits []string
	endless := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if endless {
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[`)
			pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"llm"}},`
			chunk := strings.Repeat(pod, 10_000)
			for range (MaxResponseBytes / len(chunk)) + 2 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			return
		}
		limits = append(limits, r.URL.Query().Get("limit"))
		page := len(limits)
		next := ""
		if page < 3 {
			next = fmt.Sprintf("page-%d", page+1)
		}
		if got := r.URL.Query().Get("continue"); page > 1 && got != fmt.Sprintf("page-%d", page) {
			t.Errorf("page %d asked with continue %q", page, got)
		}
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"continue":%q},"items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p%d","namespace":"llm"}}]}`, next, page)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(LimitResponses)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	cut, err := pages(context.Background(), client.Resource(podsResource).Namespace("llm"), "", func(page []unstructured.Unstructured) {
		for _, u := range page {
			names = append(names, u.GetName())
		}
	})
	if err != nil || cut || strings.Join(names, ",") != "p1,p2,p3" || strings.Join(limits, ",") != "100,100,100" {
		t.Errorf("pages: %v, cut %t, %q, limits %q", err, cut, names, limits)
	}
	endless = true
	_, err = pages(context.Background(), client.Resource(podsResource).Namespace("llm"), "", func([]unstructured.Unstructured) {})
	if !errors.Is(err, errResponseTooLarge) && (err == nil || !strings.Contains(err.Error(), "cut at 32 MiB")) {
		t.Errorf("an answer past the bound: %v", err)
	}
}
