// Package standin builds the vLLM engine stand-in (probe/testdata/fakevllm)
// that tests launch where a real `vllm serve` would need a GPU. Test
// binaries call Bin for the built program and Main from TestMain.
package standin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// pkg is the stand-in's import path; `go build` finds it from any
// directory inside the module, which is where tests run.
const pkg = "headroom.dev/headroom/probe/testdata/fakevllm"

var (
	once sync.Once
	bin  string
	err  error
)

// path builds the stand-in once per test binary, as an executable named
// vllm, and returns its path.
func path() (string, error) {
	once.Do(func() {
		dir, e := os.MkdirTemp("", "fakevllm")
		if e != nil {
			err = e
			return
		}
		bin = filepath.Join(dir, "vllm")
		if out, e := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); e != nil {
			err = fmt.Errorf("building the engine stand-in: %v\n%s", e, out)
		}
	})
	return bin, err
}

// remove deletes what path built.
func remove() {
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
}

// Bin is path for a test: a failed build fails the test.
func Bin(t testing.TB) string {
	t.Helper()
	b, err := path()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Main runs a test binary's tests and removes the stand-in: call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	remove()
	os.Exit(code)
}
