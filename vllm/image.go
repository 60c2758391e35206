package vllm

import (
	"fmt"
	"regexp"
	"strings"
)

// ImageRelease is what a container image's reference says of the vLLM
// release it runs.
type ImageRelease struct {
	// Version is the release the tag names; zero when it names none.
	Version Version `json:"version"`
	// VLLM is true when the image is a vLLM image at all: vLLM's official
	// image, or a vendor's image whose name says vLLM.
	VLLM bool `json:"vllm"`
	// Official is true for vLLM's own image (any registry or mirror).
	Official bool `json:"official"`
	// Note says how the release was read, or that it was not and the
	// newest rules apply; "" for an image that is not vLLM's.
	Note string `json:"note,omitempty"`
}

// vendorTagVersion finds vLLM's release inside a vendor's tag: AMD's
// rocm/vllm tags read "rocm6.3.1_vllm_0.8.5_20250521", others put the
// release first ("0.10.2-xpu", "v0.9.1-cuda12"). Three numbers are
// required, so a date or a container release ("25.09-py3", NGC's) is
// not taken for one.
var (
	vendorTagVLLM  = regexp.MustCompile(`(?i)vllm[_-]?v?(\d+\.\d+\.\d+)`)
	vendorTagFirst = regexp.MustCompile(`^v?(\d+\.\d+\.\d+)(?:$|[^0-9.])`)
)

// ReadImage reads the vLLM release from an image reference: vLLM's
// official image (vllm/vllm-openai from any registry or mirror, tags such
// as "v0.10.1.1" or "0.8.5-cu128") and vendors' vLLM images (a repository
// whose last part names vLLM: rocm/vllm, a registry's .../vllm). A tag
// that names no release ("latest", "nightly", a digest, NGC's "25.09-py3")
// is said so in Note, and the newest rules apply. An image whose name
// does not say vLLM gives VLLM false: its tag is some other program's.
func ReadImage(image string) ImageRelease {
	ref := strings.TrimSpace(image)
	if at := strings.IndexByte(ref, '@'); at >= 0 {
		ref = ref[:at]
	}
	repo, tag := ref, ""
	if colon := strings.LastIndexByte(ref, ':'); colon > strings.LastIndexByte(ref, '/') {
		repo, tag = ref[:colon], ref[colon+1:]
	}
	last := strings.ToLower(repo[strings.LastIndexByte(repo, '/')+1:])
	official := repo == officialImageRepo || strings.HasSuffix(repo, "/"+officialImageRepo)
	if !official && !strings.Contains(last, "vllm") {
		return ImageRelease{}
	}
	r := ImageRelease{VLLM: true, Official: official}
	text := tag
	if official {
		if cut := strings.IndexAny(text, "-_"); cut >= 0 {
			text = text[:cut]
		}
		if v, err := ParseRelease(text); err == nil {
			r.Version = v
			r.Note = withPast(fmt.Sprintf("vLLM %s read from the image tag of %s", v, image), v)
			return r
		}
	} else {
		m := vendorTagVLLM.FindStringSubmatch(tag)
		if m == nil {
			m = vendorTagFirst.FindStringSubmatch(tag)
		}
		if m != nil {
			if v, err := ParseRelease(m[1]); err == nil {
				r.Version = v
				r.Note = withPast(fmt.Sprintf("vLLM %s read from the tag of the vendor image %s (taken to follow vLLM %s's rules)", v, image, v), v)
				return r
			}
		}
	}
	shown := tag
	if shown == "" {
		shown = "none"
	}
	r.Note = fmt.Sprintf("the tag of %s (%s) names no vLLM release: the newest rules known (%s) are used; set the image's release tag to plan for it", image, shown, Newest())
	return r
}

// withPast adds PastRules' words to a note about v.
func withPast(note string, v Version) string {
	if past := PastRules(v); past != "" {
		return note + "; " + past
	}
	return note
}
