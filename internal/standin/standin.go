// Package standin builds the vLLM engine stand-in (probe/testdata/fakevllm)
// that tests launch where a real `vllm serve` would need a GPU. Test
// binaries call Path for the built program and Remove from TestMain.
package standin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// pkg is the stand-in's import path; `go build` finds it from any
// directory inside the module, which is where tests run.
const pkg = "headroom.dev/headroom/probe/testdata/fakevllm"

var (
	once sync.Once
	bin  string
	err  error
)

// Path builds the stand-in once per test binary, as an executable named
// vllm, and returns its path.
func Path() (string, error) {
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

// Remove deletes what Path built.
func Remove() {
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
}
