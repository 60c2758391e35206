package model

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Size limits for the JSON files headroom reads: a config.json is a few KB
// (multimodal ones tens of KB); the largest index files (DeepSeek-V3's
// ~90k tensors) are around 10 MB.
const (
	maxConfigBytes = 16 << 20
	maxIndexBytes  = 64 << 20
)

// Names of the files a Hugging Face model directory holds.
const (
	configFile     = "config.json"
	indexFile      = "model.safetensors.index.json"
	singleFile     = "model.safetensors"
	torchIndexFile = "pytorch_model.bin.index.json"
	safetensorsExt = ".safetensors"
	sourceIndex    = indexFile + " total_size"
	sourceTorchIdx = torchIndexFile + " total_size"
)

// LoadPath loads a model from the operating system's file system: path is
// a model directory (config.json plus safetensors files) or a config.json
// file, whose directory is then searched for the weights.
func LoadPath(p string) (Spec, error) {
	st, err := os.Stat(p)
	if err != nil {
		return Spec{}, fmt.Errorf("cannot read model path %q: %v", p, pathErr(err))
	}
	dir, name := p, "."
	if !st.IsDir() {
		dir, name = filepath.Dir(p), filepath.Base(p)
	}
	show := func(fp string) string { return filepath.Join(dir, filepath.FromSlash(fp)) }
	s, err := loadLocal(os.DirFS(dir), name, show)
	if err != nil {
		return Spec{}, err
	}
	s.ID = p
	return s, nil
}

// LoadLocal loads a model from fsys: name is a directory holding
// config.json, or a config file whose directory holds the weights.
// CheckpointBytes comes from model.safetensors.index.json's total_size,
// else from the headers of the *.safetensors files (only headers are read).
func LoadLocal(fsys fs.FS, name string) (Spec, error) {
	s, err := loadLocal(fsys, name, func(p string) string { return p })
	if err != nil {
		return Spec{}, err
	}
	s.ID = name
	return s, nil
}

// loadLocal does LoadLocal's work; show turns an fsys path into the path
// the user knows, for error messages.
func loadLocal(fsys fs.FS, name string, show func(string) string) (Spec, error) {
	st, err := fs.Stat(fsys, name)
	if err != nil {
		return Spec{}, fmt.Errorf("cannot read model path %q: %v", show(name), pathErr(err))
	}
	dir, cfg := name, path.Join(name, configFile)
	if !st.IsDir() {
		dir, cfg = path.Dir(name), name
	}
	data, err := readFileLimit(fsys, cfg, maxConfigBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Spec{}, fmt.Errorf("%s does not exist: a model directory needs the config.json of a Hugging Face checkpoint", show(cfg))
		}
		return Spec{}, fmt.Errorf("%s: %v", show(cfg), err)
	}
	s, err := ParseConfig(data)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %v", show(cfg), err)
	}
	if s.CheckpointBytes, s.CheckpointSource, err = localCheckpoint(fsys, dir, show); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// localCheckpoint sizes the weights in dir: the index's total_size, else
// the sum of the safetensors headers (those the index names, or every
// *.safetensors file), else 0 with no source.
func localCheckpoint(fsys fs.FS, dir string, show func(string) string) (int64, string, error) {
	var files []string
	ixPath := path.Join(dir, indexFile)
	data, err := readFileLimit(fsys, ixPath, maxIndexBytes)
	switch {
	case err == nil:
		ix, err := ParseSafetensorsIndex(data)
		if err != nil {
			return 0, "", fmt.Errorf("%s: %v", show(ixPath), err)
		}
		if ix.TotalSize > 0 {
			return ix.TotalSize, sourceIndex, nil
		}
		files = ix.Shards()
	case errors.Is(err, fs.ErrNotExist):
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return 0, "", fmt.Errorf("cannot list %s: %v", show(dir), err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), safetensorsExt) {
				files = append(files, e.Name())
			}
		}
		sort.Strings(files)
	default:
		return 0, "", fmt.Errorf("%s: %v", show(ixPath), err)
	}
	if len(files) == 0 {
		return 0, "", nil
	}
	var total int64
	for _, f := range files {
		p := path.Join(dir, f)
		n, err := headerBytes(fsys, p)
		if err != nil {
			return 0, "", fmt.Errorf("%s: %v", show(p), err)
		}
		total += n
	}
	return total, sourceHeaders(len(files)), nil
}

// headerBytes reads one safetensors header and returns its tensor bytes.
func headerBytes(fsys fs.FS, p string) (int64, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h, err := ReadSafetensorsHeader(f)
	if err != nil {
		return 0, err
	}
	return h.TensorBytes(), nil
}

// readFileLimit reads a whole file, refusing one larger than limit.
func readFileLimit(fsys fs.FS, p string, limit int64) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file is larger than %d MiB, too large for a %s", limit>>20, path.Base(p))
	}
	return data, nil
}

// pathErr drops the operation and path from an *fs.PathError, which the
// caller's message already names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sourceHeaders names a CheckpointBytes summed from n safetensors headers.
func sourceHeaders(n int) string {
	if n == 1 {
		return "safetensors header (1 file)"
	}
	return fmt.Sprintf("safetensors headers (%d files)", n)
}
