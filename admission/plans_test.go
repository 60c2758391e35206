package admission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"headroom.dev/headroom/memory"
	"headroom.dev/headroom/model"
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

// planKey tells apart inputs that differ in any field of their device or
// settings, and keeps equal inputs, maps included, equal.
func TestPlanKeyFields(t *testing.T) {
	base := memory.Input{Model: model.Spec{ID: "m"}, Count: 1}
	key := planKey(base)
	differs := func(what string, in memory.Input) {
		t.Helper()
		if planKey(in) == key {
			t.Errorf("changing %s leaves the key alike", what)
		}
	}
	for _, part := range []struct {
		name  string
		field func(in *memory.Input) reflect.Value
	}{
		{"Device", func(in *memory.Input) reflect.Value { return reflect.ValueOf(&in.Device).Elem() }},
		{"Settings", func(in *memory.Input) reflect.Value { return reflect.ValueOf(&in.Settings).Elem() }},
	} {
		typ := part.field(&base).Type()
		for i := range typ.NumField() {
			in := base
			f := part.field(&in).Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Int, reflect.Int64:
				f.SetInt(7)
			case reflect.Float64:
				f.SetFloat(0.5)
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Slice:
				f.Set(reflect.ValueOf([]string{"--x"}))
			case reflect.Map:
				f.Set(reflect.MakeMap(f.Type()))
				f.SetMapIndex(reflect.ValueOf("k"), reflect.New(f.Type().Elem()).Elem())
			case reflect.Struct:
				f.Field(0).SetInt(1)
			case reflect.Pointer:
				f.Set(reflect.New(f.Type().Elem())) // a zero object against nil
			default:
				t.Fatalf("%s.%s of kind %s: teach this test", part.name, typ.Field(i).Name, f.Kind())
			}
			differs(part.name+"."+typ.Field(i).Name, in)
		}
	}
	a, b := base, base
	a.Env = map[string]string{"A": "1", "B": "2", "C": "3"}
	b.Env = map[string]string{"C": "3", "B": "2", "A": "1"}
	if planKey(a) != planKey(b) {
		t.Error("equal maps give different keys")
	}
	a.Env = map[string]string{"A": "12"}
	b.Env = map[string]string{"A1": "2"}
	if planKey(a) == planKey(b) {
		t.Error("keys run strings together")
	}
	differs("the node size", memory.Input{Model: model.Spec{ID: "m"}, Count: 1, GPUsPerNode: 4})
}
