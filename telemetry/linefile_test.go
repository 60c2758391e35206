package telemetry

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLineFileHeaderAndAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.csv")
	l, err := OpenLineFile(path, LineFileOptions{Header: []byte("time,used")})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteLine([]byte("t1,1")); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteLine([]byte("t2,2\n")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Reopened, the header is not written again.
	l, err = OpenLineFile(path, LineFileOptions{Header: []byte("time,used")})
	if err != nil {
		t.Fatal(err)
	}
	l.WriteLine([]byte("t3,3"))
	l.Close()
	if got, want := read(t, path), "time,used\nt1,1\nt2,2\nt3,3\n"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
	if err := l.WriteLine([]byte("a\nb")); err == nil {
		t.Error("a two-line record was accepted")
	}
}

func TestLineFileRepairsTornEnd(t *testing.T) {
	// A previous run was cut in the middle of a line.
	path := filepath.Join(t.TempDir(), "gpu.jsonl")
	if err := os.WriteFile(path, []byte("{\"a\":1}\n{\"a\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLineFile(path, LineFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.WriteLine([]byte(`{"a":3}`))
	l.Close()
	if got, want := read(t, path), "{\"a\":1}\n{\"a\":\n{\"a\":3}\n"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
}

func TestLineFileRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.csv")
	// Header "h\n" is 2 bytes, each line "lineN\n" 6: the header and three
	// lines make 20 bytes, and a fourth would pass 21.
	l, err := OpenLineFile(path, LineFileOptions{MaxBytes: 21, Keep: 2, Header: []byte("h")})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		if err := l.WriteLine([]byte(fmt.Sprintf("line%d", i%10))); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	// Lines 1-3 went to the oldest file, which rotation dropped (Keep 2);
	// 4-6 are in s.csv.2, 7-9 in s.csv.1, line 10 ("line0") alone in s.csv.
	want := map[string]string{
		"s.csv":   "h\nline0\n",
		"s.csv.1": "h\nline7\nline8\nline9\n",
		"s.csv.2": "h\nline4\nline5\nline6\n",
	}
	for name, w := range want {
		if got := read(t, filepath.Join(dir, name)); got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s.csv.3")); !os.IsNotExist(err) {
		t.Errorf("s.csv.3 exists: %v", err)
	}
}

func TestLineFileRotationKeepNone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.log")
	l, err := OpenLineFile(path, LineFileOptions{MaxBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	// A line longer than the limit still goes out whole, alone in its file.
	for _, s := range []string{"aaaa", "bbbb", "cccccccccccccccc", "dd"} {
		l.WriteLine([]byte(s))
	}
	l.Close()
	if got := read(t, path); got != "dd\n" {
		t.Errorf("file %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files, want 1", len(entries))
	}
}

func TestLineFileConcurrentAppenders(t *testing.T) {
	// Two writers on the same file, as two headroom processes would be:
	// every line comes out whole.
	path := filepath.Join(t.TempDir(), "shared.jsonl")
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		l, err := OpenLineFile(path, LineFileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w int, l *LineFile) {
			defer wg.Done()
			defer l.Close()
			line := []byte(fmt.Sprintf("%d%s", w, strings.Repeat("x", 3000)))
			for i := 0; i < 200; i++ {
				if err := l.WriteLine(line); err != nil {
					t.Error(err)
					return
				}
			}
		}(w, l)
	}
	wg.Wait()
	lines := bytes.Split(bytes.TrimSuffix([]byte(read(t, path)), []byte("\n")), []byte("\n"))
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for i, l := range lines {
		if len(l) != 3001 {
			t.Fatalf("line %d is torn: %d bytes", i, len(l))
		}
	}
}
