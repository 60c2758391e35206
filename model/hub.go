package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultHubEndpoint is the Hugging Face Hub; HF_ENDPOINT replaces it
// (mirrors, air-gapped proxies).
const DefaultHubEndpoint = "https://huggingface.co"

// Hub reads model descriptions from a Hugging Face Hub over HTTP: the
// config.json, and the checkpoint size from model.safetensors.index.json or
// from the safetensors header alone (HTTP Range requests), never the
// weights.
type Hub struct {
	// Endpoint is the Hub's base URL, e.g. https://huggingface.co.
	Endpoint string
	// Token is sent as "Authorization: Bearer" when set; gated and private
	// models need it.
	Token string
	// Client makes the requests; nil means a client with a one-minute
	// timeout.
	Client *http.Client
	// Revision is the branch, tag or commit to read; "" means main.
	Revision string
}

// NewHubFromEnv configures a Hub the way the huggingface_hub library does:
// HF_ENDPOINT (default https://huggingface.co) and HF_TOKEN, or the older
// HUGGING_FACE_HUB_TOKEN.
func NewHubFromEnv(getenv func(string) string, client *http.Client) Hub {
	h := Hub{
		Endpoint: strings.TrimRight(strings.TrimSpace(getenv("HF_ENDPOINT")), "/"),
		Token:    strings.TrimSpace(getenv("HF_TOKEN")),
		Client:   client,
	}
	if h.Endpoint == "" {
		h.Endpoint = DefaultHubEndpoint
	}
	if h.Token == "" {
		h.Token = strings.TrimSpace(getenv("HUGGING_FACE_HUB_TOKEN"))
	}
	return h
}

// HubError is a failed Hub request; its message is the one line to show.
type HubError struct {
	ID     string // model id
	File   string // file requested
	Status int    // HTTP status; 0 when the Hub could not be reached
	msg    string
	// unreachable is set when no answer came at all (DNS, connection,
	// timeout): the Hub is not there, not the model.
	unreachable bool
}

// Error is the message, worded for the user.
func (e *HubError) Error() string { return e.msg }

// NotFound reports whether the Hub said the model (or file) does not exist.
func (e *HubError) NotFound() bool { return e.Status == http.StatusNotFound }

// Unreachable reports whether the Hub gave no answer at all (a name that
// does not resolve, a refused connection, a timeout): an air-gapped
// cluster's case.
func (e *HubError) Unreachable() bool { return e.unreachable }

// ValidHubID reports whether id has the shape of a Hub model id: "name" or
// "org/name", each part letters, digits, '.', '_' or '-', not starting
// with '.' or '-', at most 96 characters.
func ValidHubID(id string) bool {
	parts := strings.Split(id, "/")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 96 || p[0] == '.' || p[0] == '-' || strings.Contains(p, "..") {
			return false
		}
		for _, r := range p {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
			if !ok {
				return false
			}
		}
	}
	return true
}

// Load reads model id's config.json and sizes its checkpoint.
func (h Hub) Load(ctx context.Context, id string) (Spec, error) {
	if !ValidHubID(id) {
		return Spec{}, fmt.Errorf("%q is not a Hugging Face model id (org/name)", id)
	}
	if _, err := h.base(); err != nil {
		return Spec{}, err
	}
	data, err := h.fetch(ctx, id, configFile, maxConfigBytes)
	if err != nil {
		return Spec{}, err
	}
	s, err := ParseConfig(data)
	if err != nil {
		return Spec{}, fmt.Errorf("model %s on the Hub: %v", id, err)
	}
	s.ID = id
	if s.CheckpointBytes, s.CheckpointSource, err = h.checkpoint(ctx, id); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// checkpoint sizes the weights: the safetensors index's total_size, else
// the headers of its shards, else the single model.safetensors header, else
// pytorch_model.bin.index.json's total_size, else unknown (0, "").
func (h Hub) checkpoint(ctx context.Context, id string) (int64, string, error) {
	data, err := h.fetch(ctx, id, indexFile, maxIndexBytes)
	if err == nil {
		ix, err := ParseSafetensorsIndex(data)
		if err != nil {
			return 0, "", fmt.Errorf("model %s: %s on the Hub: %v", id, indexFile, err)
		}
		if ix.TotalSize > 0 {
			return ix.TotalSize, sourceIndex, nil
		}
		var total int64
		shards := ix.Shards()
		for _, f := range shards {
			n, err := h.headerBytes(ctx, id, f)
			if err != nil {
				return 0, "", err
			}
			total += n
		}
		return total, sourceHeaders(len(shards)), nil
	}
	if !notFound(err) {
		return 0, "", err
	}
	n, err := h.headerBytes(ctx, id, singleFile)
	if err == nil {
		return n, sourceHeaders(1), nil
	}
	if !notFound(err) {
		return 0, "", err
	}
	data, err = h.fetch(ctx, id, torchIndexFile, maxIndexBytes)
	if err == nil {
		ix, err := ParseSafetensorsIndex(data)
		if err != nil || ix.TotalSize == 0 {
			return 0, "", nil // an odd .bin index only loses the exact size
		}
		return ix.TotalSize, sourceTorchIdx, nil
	}
	if notFound(err) {
		return 0, "", nil
	}
	return 0, "", err
}

func notFound(err error) bool {
	var he *HubError
	return errors.As(err, &he) && he.NotFound()
}

func unreachable(err error) bool {
	var he *HubError
	return errors.As(err, &he) && he.Unreachable()
}

// headerBytes reads one safetensors file's header with Range requests: the
// 8-byte length, then exactly the header. A server that ignores Range
// answers 200 with the whole file; then only the header's bytes are read
// from the body before it is closed.
func (h Hub) headerBytes(ctx context.Context, id, file string) (int64, error) {
	resp, err := h.get(ctx, id, file, "bytes=0-7")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	fail := func(err error) (int64, error) {
		return 0, &HubError{ID: id, File: file, Status: resp.StatusCode, msg: fmt.Sprintf("model %s: %s on the Hub: %v", id, file, err)}
	}
	if resp.StatusCode == http.StatusOK {
		hdr, err := ReadSafetensorsHeader(resp.Body)
		if err != nil {
			return fail(err)
		}
		return hdr.TensorBytes(), nil
	}
	var prefix [8]byte
	got, err := io.ReadFull(resp.Body, prefix[:])
	n := binary.LittleEndian.Uint64(prefix[:])
	if err != nil || n == 0 || n > MaxSafetensorsHeader {
		// ReadSafetensorsHeader words the error (short file, bad length).
		_, err := ReadSafetensorsHeader(bytes.NewReader(prefix[:got]))
		return fail(err)
	}
	resp2, err := h.get(ctx, id, file, fmt.Sprintf("bytes=8-%d", 8+n-1))
	if err != nil {
		return 0, err
	}
	defer resp2.Body.Close()
	var r io.Reader = resp2.Body
	if resp2.StatusCode == http.StatusPartialContent {
		r = io.MultiReader(bytes.NewReader(prefix[:]), io.LimitReader(resp2.Body, int64(n)))
	}
	hdr, err := ReadSafetensorsHeader(r)
	if err != nil {
		return fail(err)
	}
	return hdr.TensorBytes(), nil
}

// fetch GETs a whole (small) file, refusing one larger than limit.
func (h Hub) fetch(ctx context.Context, id, file string, limit int64) ([]byte, error) {
	resp, err := h.get(ctx, id, file, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &HubError{ID: id, File: file, msg: fmt.Sprintf("model %s: reading %s from the Hub: %v", id, file, err)}
	}
	if int64(len(data)) > limit {
		return nil, &HubError{ID: id, File: file, Status: resp.StatusCode,
			msg: fmt.Sprintf("model %s: %s on the Hub is larger than %d MiB: not a model file headroom can read", id, file, limit>>20)}
	}
	return data, nil
}

// base parses the endpoint.
func (h Hub) base() (*url.URL, error) {
	u, err := url.Parse(h.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("HF_ENDPOINT %q is not an http(s) URL: set it like https://huggingface.co", h.Endpoint)
	}
	return u, nil
}

// get requests {endpoint}/{id}/resolve/{revision}/{file}. It returns the
// response only for 200 and 206; every other status becomes a HubError
// worded for the user.
func (h Hub) get(ctx context.Context, id, file, rng string) (*http.Response, error) {
	u, err := h.base()
	if err != nil {
		return nil, err
	}
	rev := h.Revision
	if rev == "" {
		rev = "main"
	}
	// Each segment is escaped on its own: a revision such as refs/pr/1
	// travels as the one segment refs%2Fpr%2F1, as the Hub expects.
	segs := append(strings.Split(id, "/"), "resolve", rev)
	segs = append(segs, strings.Split(file, "/")...)
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	u.RawQuery, u.Fragment = "", ""
	target := strings.TrimRight(u.String(), "/") + "/" + strings.Join(segs, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("model %s: building the Hub request: %v", id, err)
	}
	req.Header.Set("User-Agent", "headroom")
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	// The client follows the Hub's redirects (renamed repos, LFS files sent
	// to its CDN). Go keeps the Range header on them and drops
	// Authorization when the redirect leaves the Hub's host; the CDN's URLs
	// are signed and need none.
	client := h.Client
	if client == nil {
		client = &http.Client{Timeout: time.Minute}
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &HubError{ID: id, File: file, unreachable: true, msg: fmt.Sprintf("cannot reach the Hub at %s for model %s: %v", h.Endpoint, id, oneLine(err))}
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent {
		return resp, nil
	}
	// Drain a little so the connection can be reused, then close.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return nil, &HubError{ID: id, File: file, Status: resp.StatusCode, msg: h.statusMessage(id, file, rev, resp)}
}

// statusMessage words a failed response. The Hub names the cause in its
// X-Error-Code header (RepoNotFound, GatedRepo, EntryNotFound,
// RevisionNotFound); unauthenticated requests for private or missing repos
// get 401.
func (h Hub) statusMessage(id, file, rev string, resp *http.Response) string {
	code := resp.Header.Get("X-Error-Code")
	switch {
	case resp.StatusCode == http.StatusUnauthorized && h.Token != "":
		return fmt.Sprintf("model %s: the Hub rejected the token in HF_TOKEN (401): check that it is valid", id)
	case resp.StatusCode == http.StatusUnauthorized || (resp.StatusCode == http.StatusForbidden && h.Token == ""):
		return fmt.Sprintf("model %s is gated or private on the Hub (or does not exist): set HF_TOKEN to a token with access", id)
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Sprintf("model %s is gated on the Hub and the token in HF_TOKEN has no access: accept its terms on the model page or use another token", id)
	case resp.StatusCode == http.StatusNotFound && code == "EntryNotFound":
		return fmt.Sprintf("model %s has no %s at revision %s on the Hub", id, file, rev)
	case resp.StatusCode == http.StatusNotFound && code == "RevisionNotFound":
		return fmt.Sprintf("model %s has no revision %q on the Hub", id, rev)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Sprintf("model %s not found on the Hub (HF_ENDPOINT=%s)", id, h.Endpoint)
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Sprintf("the Hub is rate-limiting requests (429) for model %s: wait and retry, or set HF_TOKEN", id)
	}
	return fmt.Sprintf("the Hub answered %s for %s of model %s (HF_ENDPOINT=%s)", resp.Status, file, id, h.Endpoint)
}

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
