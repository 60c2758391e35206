package layers

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// outside are the ways a file could point at something beside the
// repository: the directory of shared data the project started from, and
// the design notes that lived there before docs/architecture.md.
var outside = []string{"../" + "shared", "DESIGN" + ".md"}

// TestRepositoryStandsAlone: no file of the repository (code, tests,
// docs, data) refers to a path outside it, so a clone with nothing beside
// it builds, tests and reads the same.
func TestRepositoryStandsAlone(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 8<<20 {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for _, o := range outside {
			if strings.Contains(string(body), o) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s refers to %q, outside the repository: copy what it needs into the repository and name its published source", rel, o)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("read %d files under %s: not the repository", checked, root)
	}
}
