package catalog

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// FuzzLookup feeds arbitrary names to Lookup and Suggest: they must not
// panic and may only answer with catalog ids.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{
		"meta-llama/Llama-3.1-8B-Instruct", "lama-3.1-8b", "llama3.1:8b", "Qwen3-8B",
		"https://huggingface.co/google/gemma-3-27b-it/", "/", "", "ünïcödé-7b", "a/b/c",
	} {
		f.Add(s, 3)
	}
	ids := IDs()
	f.Fuzz(func(t *testing.T, name string, n int) {
		n = n % 20
		if s, ok := Lookup(name); ok {
			if _, found := slices.BinarySearch(ids, s.ID); !found {
				t.Fatalf("Lookup(%q) = %q, not a catalog id", name, s.ID)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("Lookup(%q) returned an invalid spec: %v", name, err)
			}
		}
		got := Suggest(name, n)
		if len(got) > max(n, 0) {
			t.Fatalf("Suggest(%q, %d) returned %d ids", name, n, len(got))
		}
		seen := map[string]bool{}
		for _, id := range got {
			if _, found := slices.BinarySearch(ids, id); !found || seen[id] {
				t.Fatalf("Suggest(%q, %d) = %v: unknown or repeated id %q", name, n, got, id)
			}
			seen[id] = true
		}
	})
}

// FuzzIndex feeds arbitrary catalog.json contents to the index builder and
// checker: they must not panic, and what they keep must be consistent.
func FuzzIndex(f *testing.F) {
	for _, s := range []string{
		`{"models":[{"id":"a/b","config":"a.json","config_source":"x","aliases":["c"]}]}`,
		`{"models":[{"id":"a/b","config":"a.json","config_source":"x"},{"id":"A/B","config":"a.json","config_source":"x"}]}`,
		`{"models":[{"id":"a/b","config":"../a.json","config_source":"x","checkpoint_bytes":-1}]}`,
		`{"models":null}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ix := newIndex(fstest.MapFS{
			indexFile:             {Data: data},
			configDir + "/a.json": {Data: []byte(goodConfig)},
		})
		_ = check(ix)
		seen := map[string]bool{}
		for i, e := range ix.entries {
			key := strings.ToLower(e.ID)
			if seen[key] {
				t.Fatalf("index kept %q twice", e.ID)
			}
			seen[key] = true
			if j, ok := ix.find(e.ID); !ok || j != i {
				t.Fatalf("find(%q) = %d, %v; want %d", e.ID, j, ok, i)
			}
			if e.CheckpointBytes < 0 {
				t.Fatalf("index kept negative checkpoint_bytes for %q", e.ID)
			}
		}
	})
}
