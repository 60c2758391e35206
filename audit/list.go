package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// What the audit reads of an API server is bounded: a list is read in
// pages, up to a number of items, and every answer up to a number of
// bytes. An API server (or a proxy in front of it) whose list never ends
// took the audit to 1.6 GiB in 5 s and "fatal error: out of memory".
const (
	// listPage is the items asked for in one page: 100 pods are 1-2 MB
	// of JSON.
	listPage = 100
	// MaxListItems bounds the items of one kind read across the audited
	// namespaces: a cluster page (serve --cluster, 256 MiB) holds 20,000
	// decoded pods in about 100 MiB. Past it the list is cut and a
	// cluster finding says so.
	MaxListItems = 20_000
	// MaxResponseBytes bounds one answer of the API server (and of a
	// pod's /metrics through its proxy): a page of 100 pods of the
	// largest annotations Kubernetes stores (256 KiB each) is 25 MiB.
	MaxResponseBytes = 32 << 20
)

// errResponseTooLarge ends the body of an answer past MaxResponseBytes.
var errResponseTooLarge = errors.New("the API server's answer was cut at 32 MiB, the most one read takes (a page of 100 pods is 1-2 MB)")

// LimitResponses bounds every answer read through rt to MaxResponseBytes
// (rest.Config.WrapTransport: Config sets it).
func LimitResponses(rt http.RoundTripper) http.RoundTripper { return limitedTransport{rt} }

type limitedTransport struct{ rt http.RoundTripper }

// WrappedRoundTripper lets client-go reach the transport underneath (to
// cancel a request that timed out).
func (t limitedTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxResponseBytes}
	return resp, nil
}

// limitedBody reads at most left bytes, then fails with
// errResponseTooLarge rather than end as if the answer were whole.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly the bound from a
		// longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errResponseTooLarge
		}
		return b.rc.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// pages reads a list page by page and hands each page to each, up to
// MaxListItems; cut reports a list that had more.
func pages(ctx context.Context, ri dynamic.ResourceInterface, selector string, each func([]unstructured.Unstructured)) (cut bool, err error) {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	read := 0
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return false, err
		}
		items := l.Items
		if len(items) > MaxListItems-read {
			items, cut = items[:MaxListItems-read], true
		}
		read += len(items)
		each(items)
		if l.GetContinue() == "" || cut {
			return cut, nil
		}
		if read >= MaxListItems {
			return true, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// listPages reads a list of r in the audited namespaces (pages). A
// failure is a cluster finding (listFailed) and ends the list; a cut list
// is one too. notFound reports a kind the cluster does not serve (its CRD
// not installed), which is no finding.
func (a *auditor) listPages(ctx context.Context, r schema.GroupVersionResource, selector string, each func([]unstructured.Unstructured)) (notFound bool) {
	read := 0
	cut, err := pages(ctx, a.client.Resource(r).Namespace(a.ns), selector, func(page []unstructured.Unstructured) {
		read += len(page)
		each(page)
	})
	switch {
	case err != nil && read == 0 && apierrors.IsNotFound(err):
		return true
	case err != nil:
		a.listFailed(r, err)
	case cut:
		a.cut(r.Resource, a.where())
	}
	return false
}

// cut says a list was cut at MaxListItems.
func (a *auditor) cut(resource, where string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.report.Cluster = append(a.report.Cluster, Finding{Level: LevelNotChecked, Code: CodeListCut,
		Message: fmt.Sprintf("the list of %s in %s was cut at %d items, the most one audit reads: the rest are not audited; audit fewer namespaces (-n)", resource, where, MaxListItems)})
}

// listItems is listPages gathered into one slice.
func (a *auditor) listItems(ctx context.Context, r schema.GroupVersionResource, selector string) ([]unstructured.Unstructured, bool) {
	var out []unstructured.Unstructured
	notFound := a.listPages(ctx, r, selector, func(page []unstructured.Unstructured) { out = append(out, page...) })
	return out, notFound
}

// CodeListCut is the cluster finding of a list cut at MaxListItems.
const CodeListCut = "list_cut"
