package report

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileInputs: a directory gives its files sorted, hidden files and
// directories skipped; "-" is stdin; a missing path is named.
func TestFileInputs(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.log", "a/z.txt", "a/y.txt", ".hidden", ".git/config", "a/.swp"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ins, err := FileInputs([]string{"-", dir}, strings.NewReader("from stdin"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ins {
		r, err := in.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		got = append(got, strings.TrimPrefix(in.Name, dir+"/")+"="+string(b))
	}
	want := "stdin=from stdin a/y.txt=a/y.txt a/z.txt=a/z.txt b.log=b.log"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if _, err := FileInputs([]string{filepath.Join(dir, "nope")}, nil); err == nil || err.Error() != filepath.Join(dir, "nope")+": no such file or directory" {
		t.Errorf("missing: %v", err)
	}
}
