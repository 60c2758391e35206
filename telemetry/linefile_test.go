package telemetry

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// appendRounds is one appender of the concurrency tests: rounds times it
// opens path, writes perRound lines of size bytes starting with its id,
// and closes it, as `headroom probe` does per calibration record. Opening
// while another appender is inside a write is the case that matters: the
// file's size can then end inside that line.
func appendRounds(path string, id byte, rounds, perRound, size int) error {
	line := append([]byte{id}, bytes.Repeat([]byte("x"), size-1)...)
	for r := 0; r < rounds; r++ {
		l, err := OpenLineFile(path, LineFileOptions{})
		if err != nil {
			return err
		}
		for i := 0; i < perRound; i++ {
			if err := l.WriteLine(line); err != nil {
				l.Close()
				return err
			}
		}
		if err := l.Close(); err != nil {
			return err
		}
	}
	return nil
}

// checkAppended asserts that path holds, for each id, want whole lines of
// size bytes, and nothing else.
func checkAppended(t *testing.T, path string, ids string, want, size int) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSuffix([]byte(read(t, path)), []byte("\n")), []byte("\n"))
	count := map[byte]int{}
	for i, l := range lines {
		if len(l) != size {
			t.Fatalf("line %d of %d is torn: %d bytes, want %d", i+1, len(lines), len(l), size)
		}
		count[l[0]]++
	}
	for _, id := range []byte(ids) {
		if count[id] != want {
			t.Errorf("writer %c has %d whole lines, want %d", id, count[id], want)
		}
	}
	if len(lines) != want*len(ids) {
		t.Errorf("%d lines, want %d", len(lines), want*len(ids))
	}
}

// Line sizes of the concurrency tests: 3001 bytes can straddle a page of
// the page cache, 9001 always does, so a reader's view of the size can
// stop inside the line while the writer copies it.
const (
	shortLine = 3001
	longLine  = 9001
)

func TestLineFileConcurrentAppenders(t *testing.T) {
	// Two appenders in one process, each on its own open file, reopening
	// every 20 lines: every line comes out whole and none is added.
	path := filepath.Join(t.TempDir(), "shared.jsonl")
	var wg sync.WaitGroup
	for _, id := range []byte("ab") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := appendRounds(path, id, 10, 20, shortLine); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	checkAppended(t, path, "ab", 200, shortLine)
}

// appenderEnv makes the test binary an appender process (see TestMain):
// its value is "path id".
const appenderEnv = "LINEFILE_TEST_APPENDER"

func TestMain(m *testing.M) {
	if v := os.Getenv(appenderEnv); v != "" {
		path, id, _ := strings.Cut(v, " ")
		// Wait on stdin so that the appenders start together.
		io.Copy(io.Discard, os.Stdin)
		if err := appendRounds(path, id[0], 10, 20, longLine); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLineFileConcurrentProcesses(t *testing.T) {
	// Three headroom processes appending to one calibration file, each
	// reopening it every 20 lines as `probe` does per record.
	path := filepath.Join(t.TempDir(), "calibration.jsonl")
	var cmds []*exec.Cmd
	var starts []io.Closer
	for _, id := range "abc" {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), appenderEnv+"="+path+" "+string(id))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, starts = append(cmds, cmd), append(starts, in)
	}
	for _, in := range starts {
		in.Close()
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	checkAppended(t, path, "abc", 200, longLine)
}
