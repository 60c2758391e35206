package layers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The floors of docs/architecture.md's layering, bottom first. A package
// imports packages of its own floor or below.
const (
	facts     = iota // what headroom knows, and leaf helpers that import nothing of it
	core             // the one budget calculator
	libraries        // the libraries on the calculator
	services         // what combines the libraries
	reports          // the one builder of every report
	faces            // the command line and the page
	top              // main, benchmarks, test parts and test-only packages: nothing imports them
)

// floorOf places every package of the module, one row a package, by its
// import path below the module. A package missing here fails the test: a
// new package takes its floor by a new row, here and in the table of
// docs/architecture.md (TestArchitectureDocAgrees).
var floorOf = map[string]int{
	"model":         facts, // the model Spec and its loaders
	"model/catalog": facts, // the embedded model catalog
	"gpu":           facts, // devices, SKUs, MIG
	"vllm":          facts, // vLLM's flags and version rules
	"names":         facts, // did-you-mean distance for gpu and model
	"kube":          facts, // Kubernetes facts admission, audit and doctor read
	"slo":           facts, // the --slo grammar
	"chart":         facts, // plot panels
	"graceful":      facts, // serve until the context ends; telemetry and the faces use it
	"progress":      facts, // the live progress line of long commands
	"startup":       facts, // the one start-up-time model: check, capacity and probe

	"memory": core, // the budget calculator

	"traffic":   libraries, // request logs, histograms, profiles
	"workload":  libraries, // the one traffic language: arrivals, lengths, logs, bounds
	"telemetry": libraries, // GPU readings, /metrics, the exporter
	"admission": libraries, // AdmissionReview in and out, verdicts, patches
	"sim":       libraries, // the simulated vLLM engine
	"host":      libraries, // the pod's host memory and /dev/shm, from the GPU plan

	"doctor":     services, // findings and remedies
	"probe":      services, // launches on a real GPU
	"audit":      services, // every workload of a cluster, ranked
	"loadtest":   services, // traffic to a live server
	"sim/serve":  services, // the simulated engine behind an OpenAI API
	"monitoring": services, // the chart's alert rules and dashboard, from telemetry's and vLLM's metric names
	"capacity":   services, // a fleet sized for a traffic: SLO capacity, replicas per window, the autoscaler replayed

	"internal/report": reports, // the reports the CLI prints and the API returns

	"internal/cli": faces, // the commands
	"web":          faces, // the page and its API

	"cmd/headroom":             top, // main
	"bench/webhook":            top, // the webhook's load benchmark
	"bench/profile/gen":        top, // a request-log generator for the profile benchmark
	"admission/e2e":            top, // tests only: the webhook against a real kube-apiserver
	"charts":                   top, // tests only: the Helm chart
	"internal/hostile":         top, // tests only: the servers as processes under hostile clients
	"internal/layers":          top, // tests only: this test
	"internal/kubetest":        top, // test part: envtest with stand-in CRDs
	"internal/fakeopenai":      top, // test part: an OpenAI stand-in with faults
	"internal/testkit":         top, // test part: fixtures several packages' tests share
	"internal/standin":         top, // test part: the vLLM start-up stand-in
	"probe/internal/enginesim": top, // test part: a vLLM engine stand-in for probe
}

// pkg is what the test reads of `go list -deps -json`.
type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// TestNoImportUpwards reads the module's import graph (non-test imports:
// a test may drive its package through a higher one, as the page's tests
// drive the CLI's commands) and fails on any import of a package standing
// above the importer, and on any package without a floor.
func TestNoImportUpwards(t *testing.T) {
	pkgs, module := listModule(t)
	if len(pkgs) < len(floorOf)/2 {
		t.Fatalf("go list found %d packages of %s", len(pkgs), module)
	}
	for _, p := range violations(pkgs, module, floorOf) {
		t.Error(p)
	}
	// Rows for packages that are gone are stale.
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[strings.TrimPrefix(p.ImportPath, module+"/")] = true
	}
	for name := range floorOf {
		if !seen[name] {
			t.Errorf("%s has a floor but no longer exists: remove its row", name)
		}
	}
}

// TestViolationsCatchUpwardImport: the check finds the arrow it was
// written for, telemetry (a library) importing the web server's shutdown
// helper when it sat among the faces, and a package without a floor.
func TestViolationsCatchUpwardImport(t *testing.T) {
	const m = "example.com/h"
	floors := map[string]int{"internal/httpserve": faces}
	for name, f := range floorOf {
		floors[name] = f
	}
	pkgs := []pkg{
		{ImportPath: m + "/telemetry", Imports: []string{"context", m + "/memory", m + "/internal/httpserve"}},
		{ImportPath: m + "/internal/httpserve", Imports: []string{"net/http"}},
		{ImportPath: m + "/memory", Imports: []string{m + "/vllm"}},
		{ImportPath: m + "/vllm"},
		{ImportPath: m + "/newpkg", Imports: []string{m + "/memory"}},
	}
	got := violations(pkgs, m, floors)
	want := []string{
		"newpkg has no floor: add a row to floorOf",
		"telemetry (floor 2) imports internal/httpserve (floor 5), which stands above it",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// violations lists, sorted, every import of a module package by a module
// package on a lower floor, and every module package without a floor.
func violations(pkgs []pkg, module string, floorOf map[string]int) []string {
	var out []string
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	for _, p := range pkgs {
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		from, placed := floorOf[name]
		if !placed {
			out = append(out, fmt.Sprintf("%s has no floor: add a row to floorOf", name))
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := rel(imp)
			if !ok {
				continue
			}
			if to, placed := floorOf[dep]; placed && to > from {
				out = append(out, fmt.Sprintf("%s (floor %d) imports %s (floor %d), which stands above it", name, from, dep, to))
			}
		}
	}
	sort.Strings(out)
	return out
}

// listModule runs `go list -deps -json ./...` at the module's root and
// keeps the module's own packages.
func listModule(t *testing.T) ([]pkg, string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering test reads go list: %v", err)
	}
	root := filepath.Join("..", "..")
	modOut, err := exec.Command(goBin, "list", "-m", "-f", "{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(modOut))
	cmd := exec.Command(goBin, "list", "-deps", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list: %v", err)
		}
		if p.Module != nil && p.Module.Path == module {
			pkgs = append(pkgs, p)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	return pkgs, module
}
