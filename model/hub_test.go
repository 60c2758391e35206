package model

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub serves the Hub's URL layout over real HTTP:
//
//	/{org}/{name}/resolve/{revision}/{file}
//
// Small files are answered directly; *.safetensors files redirect (302) to
// a CDN path, as the real Hub sends LFS files to its CDN, and the CDN
// honours Range requests unless the repo is marked to ignore them. Errors
// carry the X-Error-Code header the real Hub sends.
type fakeHub struct {
	repos     map[string]map[string][]byte // id → file → content
	gated     map[string]bool              // ids that need the good token
	noRange   map[string]bool              // ids whose CDN ignores Range
	hugeFiles map[string]int64             // id/file → size of a zero-filled body
	token     string

	mu       sync.Mutex
	requests []*http.Request
	written  chan int64 // bytes the CDN wrote for a huge file
}

func newFakeHub(t *testing.T) (*fakeHub, *httptest.Server) {
	h := &fakeHub{
		repos:     map[string]map[string][]byte{},
		gated:     map[string]bool{},
		noRange:   map[string]bool{},
		hugeFiles: map[string]int64{},
		token:     "hf_good",
		written:   make(chan int64, 1),
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *fakeHub) seen() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.requests...)
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.Clone(context.Background()))
	h.mu.Unlock()

	if rest, ok := strings.CutPrefix(r.URL.Path, "/cdn/"); ok {
		h.serveCDN(w, r, rest)
		return
	}
	parts := strings.SplitN(r.URL.EscapedPath(), "/", 6) // "", org, name, resolve, rev, file
	if len(parts) != 6 || parts[3] != "resolve" {
		http.NotFound(w, r)
		return
	}
	id, rev, file := parts[1]+"/"+parts[2], parts[4], parts[5]
	files, ok := h.repos[id]
	if !ok {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
		return
	}
	if h.gated[id] {
		switch r.Header.Get("Authorization") {
		case "Bearer " + h.token:
		case "":
			w.Header().Set("X-Error-Code", "GatedRepo")
			http.Error(w, "Access to model is restricted", http.StatusUnauthorized)
			return
		default:
			w.Header().Set("X-Error-Code", "GatedRepo")
			http.Error(w, "Access to model is restricted", http.StatusForbidden)
			return
		}
	}
	if rev != "main" && rev != "refs%2Fpr%2F1" {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id", http.StatusNotFound)
		return
	}
	if _, huge := h.hugeFiles[id+"/"+file]; !huge {
		if _, ok := files[file]; !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "Entry not found", http.StatusNotFound)
			return
		}
	}
	if strings.HasSuffix(file, ".safetensors") {
		http.Redirect(w, r, "/cdn/"+id+"/"+file, http.StatusFound)
		return
	}
	_, _ = w.Write(files[file])
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request, rest string) {
	i := strings.LastIndex(rest, "/")
	id, file := rest[:i], rest[i+1:]
	if size, ok := h.hugeFiles[id+"/"+file]; ok {
		// A server that ignores Range and streams a huge file.
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.WriteHeader(http.StatusOK)
		prefix := safetensorsFile(twoTensors, 0)
		n, _ := io.Copy(w, io.MultiReader(bytes.NewReader(prefix), io.LimitReader(zeros{}, size-int64(len(prefix)))))
		h.written <- n
		return
	}
	data := h.repos[id][file]
	if h.noRange[id] {
		_, _ = w.Write(data)
		return
	}
	http.ServeContent(w, r, file, time.Time{}, bytes.NewReader(data))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestHubLoad(t *testing.T) {
	fh, srv := newFakeHub(t)
	llama := testdataFile(t, "configs", "meta-llama--Llama-3.1-8B-Instruct.json")
	qwen := testdataFile(t, "configs", "Qwen--Qwen3-8B.json")
	fh.repos["meta-llama/Llama-3.1-8B-Instruct"] = map[string][]byte{
		"config.json":                  llama,
		"model.safetensors.index.json": testdataFile(t, "index", "Llama-3.1-8B-Instruct.model.safetensors.index.json"),
	}
	fh.gated["meta-llama/Llama-3.1-8B-Instruct"] = true
	fh.repos["Qwen/single"] = map[string][]byte{"config.json": qwen, "model.safetensors": safetensorsFile(twoTensors, 32)}
	fh.repos["Qwen/norange"] = map[string][]byte{"config.json": qwen, "model.safetensors": safetensorsFile(twoTensors, 32)}
	fh.noRange["Qwen/norange"] = true
	fh.repos["Qwen/sharded"] = map[string][]byte{
		"config.json":                  qwen,
		"model.safetensors.index.json": []byte(`{"weight_map": {"a": "a.safetensors", "b": "b.safetensors"}}`),
		"a.safetensors":                safetensorsFile(twoTensors, 32),
		"b.safetensors":                safetensorsFile(`{"x": {"dtype": "F8_E4M3", "shape": [10], "data_offsets": [0, 10]}}`, 10),
	}
	fh.repos["Qwen/binonly"] = map[string][]byte{"config.json": qwen, "pytorch_model.bin.index.json": []byte(`{"metadata": {"total_size": 777}, "weight_map": {}}`)}
	fh.repos["Qwen/configonly"] = map[string][]byte{"config.json": qwen}

	hub := Hub{Endpoint: srv.URL, Token: "hf_good", Client: srv.Client()}
	tests := []struct {
		id     string
		bytes  int64
		source string
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", 16_060_522_496, "model.safetensors.index.json total_size"},
		{"Qwen/single", 32, "safetensors header (1 file)"},
		{"Qwen/norange", 32, "safetensors header (1 file)"},
		{"Qwen/sharded", 42, "safetensors headers (2 files)"}, // 32 + 10 × 1 byte
		{"Qwen/binonly", 777, "pytorch_model.bin.index.json total_size"},
		{"Qwen/configonly", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			s, err := hub.Load(context.Background(), tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if s.ID != tt.id || s.CheckpointBytes != tt.bytes || s.CheckpointSource != tt.source {
				t.Errorf("id %q bytes %d source %q; want %d %q", s.ID, s.CheckpointBytes, s.CheckpointSource, tt.bytes, tt.source)
			}
		})
	}

	// Every request carried the token and our User-Agent; safetensors
	// headers were read with Range requests that followed the redirect.
	var ranges []string
	for _, r := range fh.seen() {
		if r.Header.Get("Authorization") != "Bearer hf_good" || r.Header.Get("User-Agent") != "headroom" {
			t.Errorf("%s: headers %v", r.URL, r.Header)
		}
		if strings.HasPrefix(r.URL.Path, "/cdn/Qwen/single/") {
			ranges = append(ranges, r.Header.Get("Range"))
		}
	}
	// The header of twoTensors is len(twoTensors) bytes after the 8-byte prefix.
	want := []string{"bytes=0-7", fmt.Sprintf("bytes=8-%d", 8+len(twoTensors)-1)}
	if fmt.Sprint(ranges) != fmt.Sprint(want) {
		t.Errorf("CDN ranges = %v, want %v", ranges, want)
	}
}

func TestHubIgnoresRangeWithoutDownloading(t *testing.T) {
	fh, srv := newFakeHub(t)
	fh.repos["big/model"] = map[string][]byte{"config.json": testdataFile(t, "configs", "Qwen--Qwen3-8B.json")}
	const size = 4 << 30 // a 4 GiB file the server would stream in full
	fh.hugeFiles["big/model/model.safetensors"] = size
	hub := Hub{Endpoint: srv.URL, Client: srv.Client()}
	s, err := hub.Load(context.Background(), "big/model")
	if err != nil {
		t.Fatal(err)
	}
	if s.CheckpointBytes != 32 {
		t.Errorf("CheckpointBytes = %d, want 32", s.CheckpointBytes)
	}
	select {
	case n := <-fh.written:
		// The client closed the connection after the header; what the server
		// got out before noticing is socket buffers, far below the file.
		if n >= 256<<20 {
			t.Errorf("server wrote %d bytes of a %d-byte file", n, int64(size))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server still streaming 10 s after the client finished")
	}
}

func TestHubErrors(t *testing.T) {
	fh, srv := newFakeHub(t)
	fh.repos["org/gated"] = map[string][]byte{"config.json": testdataFile(t, "configs", "Qwen--Qwen3-8B.json")}
	fh.gated["org/gated"] = true
	fh.repos["org/empty"] = map[string][]byte{}
	fh.repos["org/notlm"] = map[string][]byte{"config.json": []byte(`{"model_type": "bert"}`)}
	fh.repos["org/bigconfig"] = map[string][]byte{"config.json": bytes.Repeat([]byte(" "), maxConfigBytes+1)}
	fh.repos["org/badshard"] = map[string][]byte{"config.json": testdataFile(t, "configs", "Qwen--Qwen3-8B.json"), "model.safetensors": []byte("tiny")}

	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name string
		hub  Hub
		id   string
		want string
	}{
		{"gated without token", Hub{Endpoint: srv.URL}, "org/gated",
			"model org/gated is gated or private on the Hub (or does not exist): set HF_TOKEN to a token with access"},
		{"gated with a token lacking access", Hub{Endpoint: srv.URL, Token: "hf_other"}, "org/gated",
			"model org/gated is gated on the Hub and the token in HF_TOKEN has no access"},
		{"missing repo", Hub{Endpoint: srv.URL}, "org/missing",
			"model org/missing not found on the Hub (HF_ENDPOINT=" + srv.URL + ")"},
		{"missing config", Hub{Endpoint: srv.URL}, "org/empty",
			"model org/empty has no config.json at revision main on the Hub"},
		{"missing revision", Hub{Endpoint: srv.URL, Revision: "v9"}, "org/empty",
			`model org/empty has no revision "v9" on the Hub`},
		{"not an LM", Hub{Endpoint: srv.URL}, "org/notlm",
			"model org/notlm on the Hub: config.json has no num_hidden_layers"},
		{"config too big", Hub{Endpoint: srv.URL}, "org/bigconfig",
			"config.json on the Hub is larger than 16 MiB"},
		{"corrupt shard", Hub{Endpoint: srv.URL}, "org/badshard",
			"model org/badshard: model.safetensors on the Hub: safetensors"},
		{"bad id", Hub{Endpoint: srv.URL}, "../../etc/passwd",
			`"../../etc/passwd" is not a Hugging Face model id`},
		{"bad endpoint", Hub{Endpoint: "ftp://example"}, "org/x",
			`HF_ENDPOINT "ftp://example" is not an http(s) URL`},
		{"unreachable", Hub{Endpoint: closedURL}, "org/x",
			"cannot reach the Hub at " + closedURL + " for model org/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.hub.Load(context.Background(), tt.id)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v\nwant one line containing %q", err, tt.want)
			}
		})
	}
}

func TestHubRevisionIsOneSegment(t *testing.T) {
	fh, srv := newFakeHub(t)
	fh.repos["org/m"] = map[string][]byte{"config.json": testdataFile(t, "configs", "Qwen--Qwen3-8B.json")}
	hub := Hub{Endpoint: srv.URL + "/", Revision: "refs/pr/1"}
	if _, err := hub.Load(context.Background(), "org/m"); err != nil {
		t.Fatal(err)
	}
	if got := fh.seen()[0].RequestURI; got != "/org/m/resolve/refs%2Fpr%2F1/config.json" {
		t.Errorf("request URI %q", got)
	}
}

func TestHubCancelled(t *testing.T) {
	_, srv := newFakeHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Hub{Endpoint: srv.URL}.Load(ctx, "org/m")
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("err = %v", err)
	}
}

func TestNewHubFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	client := &http.Client{}
	tests := []struct {
		env             map[string]string
		endpoint, token string
	}{
		{map[string]string{}, "https://huggingface.co", ""},
		{map[string]string{"HF_ENDPOINT": "https://hf-mirror.example/ ", "HF_TOKEN": "a"}, "https://hf-mirror.example", "a"},
		{map[string]string{"HUGGING_FACE_HUB_TOKEN": "old"}, "https://huggingface.co", "old"},
		{map[string]string{"HF_TOKEN": "new", "HUGGING_FACE_HUB_TOKEN": "old"}, "https://huggingface.co", "new"},
	}
	for _, tt := range tests {
		h := NewHubFromEnv(env(tt.env), client)
		if h.Endpoint != tt.endpoint || h.Token != tt.token || h.Client != client || h.Revision != "" {
			t.Errorf("%v: got %+v", tt.env, h)
		}
	}
}

func TestValidHubID(t *testing.T) {
	for id, want := range map[string]bool{
		"meta-llama/Llama-3.1-8B-Instruct": true,
		"gpt2":                             true,
		"Qwen/Qwen2.5-7B-Instruct":         true,
		"a/b/c":                            false,
		"/abs":                             false,
		"org/":                             false,
		"org/..":                           false,
		"org/.hidden":                      false,
		"org/na me":                        false,
		"org/name?x=1":                     false,
		"":                                 false,
	} {
		if got := ValidHubID(id); got != want {
			t.Errorf("ValidHubID(%q) = %v, want %v", id, got, want)
		}
	}
}
