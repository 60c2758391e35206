package loadtest

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseBaseURL: --url as people type it gives an http or https URL
// with a host and no trailing slash, which reads back as itself, or one
// line of error.
func FuzzParseBaseURL(f *testing.F) {
	for _, s := range []string{"localhost:8000", "http://host:8000/v1", "https://h/v1/chat/completions/", "ftp://x", "", " ", "://", "http://", "[::1]:8000", "h\nx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseBaseURL(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: error not one line: %v", s, err)
			}
			return
		}
		p, perr := url.Parse(u)
		if perr != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || strings.HasSuffix(u, "/") {
			t.Fatalf("%q: %q", s, u)
		}
		if again, err := ParseBaseURL(u); err != nil || again != u {
			t.Fatalf("%q: %q reads back as %q, %v", s, u, again, err)
		}
	})
}

// TestParseBaseURL: what people type, and what is refused. A query or
// fragment is refused: the endpoints are appended to the path, and
// "http://h:8000/?x=1" would have sent every request to the server's root
// (found by FuzzParseBaseURL, through "\xf4#/ ", whose "#" it kept).
func TestParseBaseURL(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"localhost:8000", "http://localhost:8000", ""},
		{" http://host:8000/v1 ", "http://host:8000/v1", ""},
		{"https://h/v1/chat/completions/", "https://h/v1", ""},
		{"my_service:8000", "http://my_service:8000", ""},
		{"http://h:8000/metrics", "http://h:8000", ""},
		{"[::1]:8000", "http://[::1]:8000", ""},
		{"", "", "no --url"},
		{"ftp://x", "", "the scheme must be http or https"},
		{"http://h:8000/?x=1", "", "without ? or #"},
		{"http://h:8000/v1#top", "", "without ? or #"},
		{"\xf4:8000", "", "is not a host name or address"},
	} {
		got, err := ParseBaseURL(c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %q, %v; want %q, %q", c.in, got, err, c.want, c.err)
		}
	}
}

// An error about --url names it without the user and password it holds.
func TestParseBaseURLHidesCredentials(t *testing.T) {
	for _, in := range []string{"ftp://ops:s3cret@h:8000", "http://ops:s3cret@h:8000/?x=1"} {
		_, err := ParseBaseURL(in)
		if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "ops") {
			t.Errorf("%q: %v", in, err)
		}
	}
	base, user := SplitUser("http://ops:s3cret@h:8000/v1")
	if pw, _ := user.Password(); base != "http://h:8000/v1" || user.Username() != "ops" || pw != "s3cret" {
		t.Errorf("SplitUser: %q, %v", base, user)
	}
}
