package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestResolveOrder(t *testing.T) {
	llama := testdataFile(t, "configs", "meta-llama--Llama-3.1-8B-Instruct.json")
	qwen := testdataFile(t, "configs", "Qwen--Qwen3-8B.json")
	gemma := testdataFile(t, "configs", "google--gemma-2-9b-it.json")
	fsys := fstest.MapFS{
		"models/llama/config.json": {Data: llama},
		// A local directory shadows the catalog entry of the same name.
		"qwen3-8b/config.json": {Data: llama},
	}
	catalogSpec, err := ParseConfig(qwen)
	if err != nil {
		t.Fatal(err)
	}
	catalog := func(id string) (Spec, bool) {
		if id == "qwen3-8b" || id == "Qwen/Qwen3-8B" || id == "gemma" {
			return catalogSpec, true
		}
		return Spec{}, false
	}
	fh, srv := newFakeHub(t)
	fh.repos["google/gemma-2-9b-it"] = map[string][]byte{"config.json": gemma}
	fh.repos["Qwen/Qwen3-8B"] = map[string][]byte{"config.json": gemma} // must not be asked
	opt := ResolveOptions{FS: fsys, Catalog: catalog, Hub: &Hub{Endpoint: srv.URL, Client: srv.Client()}}

	tests := []struct {
		ref, id, arch string
	}{
		{"models/llama", "models/llama", "LlamaForCausalLM"},
		{"./models/llama/config.json", "./models/llama/config.json", "LlamaForCausalLM"},
		{"qwen3-8b", "qwen3-8b", "LlamaForCausalLM"},           // local beats catalog
		{"Qwen/Qwen3-8B", "Qwen/Qwen3-8B", "Qwen3ForCausalLM"}, // catalog beats Hub
		{"google/gemma-2-9b-it", "google/gemma-2-9b-it", "Gemma2ForCausalLM"},
	}
	for _, tt := range tests {
		s, err := Resolve(context.Background(), tt.ref, opt)
		if err != nil {
			t.Errorf("%s: %v", tt.ref, err)
			continue
		}
		if s.ID != tt.id || s.Architecture != tt.arch {
			t.Errorf("%s: id %q arch %q, want %q %q", tt.ref, s.ID, s.Architecture, tt.id, tt.arch)
		}
	}
	for _, r := range fh.seen() {
		if strings.HasPrefix(r.URL.Path, "/Qwen/") {
			t.Errorf("Hub asked for %s although the catalog has it", r.URL.Path)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	suggest := func(string) []string { return []string{"llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b", "llama-2-7b"} }
	_, srv := newFakeHub(t)
	hub := &Hub{Endpoint: srv.URL, Client: srv.Client()}
	tests := []struct {
		name string
		ref  string
		opt  ResolveOptions
		want string
	}{
		{"empty", " ", ResolveOptions{}, "no model given"},
		{"hub off", "meta-llama/Llama-3-8B", ResolveOptions{FS: fstest.MapFS{}, Suggest: suggest},
			`unknown model "meta-llama/Llama-3-8B": not a local path, not in the catalog (did you mean llama-3.1-8b, llama-3.2-1b or llama-3.2-3b?), and the Hub is off (drop --offline and unset HF_HUB_OFFLINE to fetch it from the Hub)`},
		{"no suggestions", "meta-llama/Llama-3-8B", ResolveOptions{FS: fstest.MapFS{}},
			`unknown model "meta-llama/Llama-3-8B": not a local path, not in the catalog, and the Hub is off`},
		{"not a hub id", "llama3", ResolveOptions{FS: fstest.MapFS{}, Hub: hub, Suggest: func(string) []string { return []string{"llama-3.1-8b"} }},
			`unknown model "llama3": not a local path, not in the catalog (did you mean llama-3.1-8b?), and Hub models are named org/name`},
		{"path", "./nope/config.json", ResolveOptions{FS: fstest.MapFS{}, Hub: hub},
			`model path "./nope/config.json" does not exist`},
		{"hub 404 with suggestions", "meta-llama/Llama-3-8B", ResolveOptions{FS: fstest.MapFS{}, Hub: hub, Suggest: suggest},
			"model meta-llama/Llama-3-8B not found on the Hub (HF_ENDPOINT=" + srv.URL + "); did you mean llama-3.1-8b"},
		{"broken catalog entry", "x", ResolveOptions{FS: fstest.MapFS{}, Catalog: func(string) (Spec, bool) { return Spec{Layers: 1}, true }},
			`catalog entry "x" is broken`},
		{"local dir without config", "d", ResolveOptions{FS: fstest.MapFS{"d/x": {}}},
			"d/config.json does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), tt.ref, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v\nwant one line containing %q", err, tt.want)
			}
		})
	}
}

func TestResolveOSPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), testdataFile(t, "configs", "Qwen--Qwen3-8B.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(context.Background(), dir, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != dir || s.Layers != 36 {
		t.Errorf("id %q layers %d", s.ID, s.Layers)
	}
	if _, err := Resolve(context.Background(), filepath.Join(dir, "missing"), ResolveOptions{}); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Errorf("err = %v", err)
	}
}

// An unreachable Hub (an air-gapped cluster: no name resolves, nothing
// answers) says what --offline says, did you mean and the catalog, and how
// to plan without the Hub; before, it was the bare connection error.
func TestResolveUnreachableHub(t *testing.T) {
	// A port nothing listens on: the connection is refused at once.
	hub := &Hub{Endpoint: "http://127.0.0.1:1"}
	suggest := func(string) []string { return []string{"meta-llama/Llama-3.1-8B-Instruct"} }
	_, err := Resolve(context.Background(), "meta-llama/Llama-3.1-8B-Instruc", ResolveOptions{FS: fstest.MapFS{}, Hub: hub, Suggest: suggest})
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"cannot reach the Hub at http://127.0.0.1:1", "did you mean meta-llama/Llama-3.1-8B-Instruct?", "--offline", "headroom models", "--model ./config.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
}
