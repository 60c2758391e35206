package admission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlanCacheSameAnswers: every fixture, reviewed twice by a handler
// that remembers plans, gets exactly the answer of a handler that plans
// every time.
func TestPlanCacheSameAnswers(t *testing.T) {
	cached, fresh := newTestHandler(t), newTestHandler(t)
	fresh.plans.off = true
	answer := func(h *Handler, name string, mutate bool) string {
		resp, _, _ := h.respond(context.Background(), fixture(t, name).Request, mutate)
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, name := range fixtureNames(t) {
		for _, mutate := range []bool{false, true} {
			want := answer(fresh, name, mutate)
			for i := range 2 {
				if got := answer(cached, name, mutate); got != want {
					t.Errorf("%s (mutate %v), review %d through the cache:\n got %s\nwant %s", name, mutate, i+1, got, want)
				}
			}
		}
	}
	if len(cached.plans.entries) == 0 {
		t.Error("the cache remembered no plan")
	}
	if len(fresh.plans.entries) != 0 {
		t.Errorf("a cache that is off remembered %d plans", len(fresh.plans.entries))
	}
}

// configMaps serves one ConfigMap whose data a test can change.
type configMaps struct{ data map[string]string }

func (c *configMaps) GetConfigMap(_ context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: c.data}, nil
}

// TestPlanCacheSkipsConfigMapModels: a model read from a ConfigMap can
// change under the same name, so its plans are not remembered.
func TestPlanCacheSkipsConfigMapModels(t *testing.T) {
	mixtral, err := os.ReadFile(filepath.Join("testdata", "mixtral-8x7b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The same config cut to 2 of its 32 layers: 2 × 8 experts × 3 ×
	// 4096 × 14336 = 2.82e9 expert parameters, 2 × 4096 × (4096 + 2 ×
	// 1024 + 4096) = 0.08e9 of attention and 2 × 32000 × 4096 = 0.26e9 of
	// embeddings: 3.17e9 × 2 bytes = 5.9 GiB, which fits an L4.
	var cut map[string]any
	if err := json.Unmarshal(mixtral, &cut); err != nil {
		t.Fatal(err)
	}
	cut["num_hidden_layers"] = 2
	small, err := json.Marshal(cut)
	if err != nil {
		t.Fatal(err)
	}
	cms := &configMaps{data: map[string]string{keyConfig: string(mixtral)}}
	h := NewHandler(Deps{ConfigMaps: cms})
	req := fixture(t, "deployment-model-config").Request
	if resp := h.Validate(context.Background(), req); resp.Allowed || !strings.Contains(resp.Result.Message, "weights take") {
		t.Fatalf("Mixtral on an L4: allowed %v, %v; want denied on its weights", resp.Allowed, resp.Result)
	}
	cms.data = map[string]string{keyConfig: string(small)}
	if resp := h.Validate(context.Background(), req); !resp.Allowed {
		t.Errorf("the 2-layer model on an L4 after the ConfigMap changed: denied %q", resp.Result.Message)
	}
	if len(h.plans.entries) != 0 {
		t.Errorf("%d plans of a ConfigMap model remembered", len(h.plans.entries))
	}
}
