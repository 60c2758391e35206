package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"sort"
	"strconv"
)

// MaxSafetensorsHeader bounds the JSON header headroom reads from a
// .safetensors file: 100 MiB, the limit the safetensors library itself
// enforces (MAX_HEADER_SIZE). Real headers are kilobytes to a few MiB.
const MaxSafetensorsHeader = 100 << 20

// TensorInfo is one tensor's entry in a safetensors header.
type TensorInfo struct {
	Name  string  `json:"name"`
	Dtype string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	// Begin and End are byte offsets into the data section that follows
	// the header.
	Begin int64 `json:"begin"`
	End   int64 `json:"end"`
}

// Bytes is the size of the tensor's data.
func (t TensorInfo) Bytes() int64 { return t.End - t.Begin }

// SafetensorsHeader is the parsed header of one .safetensors file.
type SafetensorsHeader struct {
	// Tensors are sorted by name.
	Tensors []TensorInfo `json:"tensors"`
	// Metadata is the optional __metadata__ string map.
	Metadata map[string]string `json:"metadata,omitempty"`
	// HeaderBytes is the JSON header's length (the file's first 8 bytes).
	HeaderBytes int64 `json:"header_bytes"`
}

// TensorBytes is the size of all tensor data in the file.
func (h SafetensorsHeader) TensorBytes() int64 {
	var n int64
	for _, t := range h.Tensors {
		n += t.Bytes()
	}
	return n
}

// DtypeBits is the storage size in bits of one element of a safetensors
// dtype (safetensors Dtype::bitsize); false for a dtype it does not know.
// F4 (e2m1) and the F6 types are packed below a byte.
func DtypeBits(dtype string) (int, bool) {
	switch dtype {
	case "F64", "I64", "U64":
		return 64, true
	case "F32", "I32", "U32":
		return 32, true
	case "F16", "BF16", "I16", "U16":
		return 16, true
	case "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0":
		return 8, true
	case "F6_E2M3", "F6_E3M2":
		return 6, true
	case "F4":
		return 4, true
	}
	return 0, false
}

// maxTensorBytes bounds one file's data section (1 PiB) so sums of many
// files stay inside int64.
const maxTensorBytes = 1 << 50

// ReadSafetensorsHeader reads the 8-byte little-endian header length and
// the JSON header from the start of a .safetensors file, and nothing more.
// It checks every tensor's offsets (end ≥ begin, no overlaps) and, for
// known dtypes, that the data size equals elements × element size.
func ReadSafetensorsHeader(r io.Reader) (SafetensorsHeader, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return SafetensorsHeader{}, fmt.Errorf("safetensors file is shorter than its 8-byte header length (%v): is it a .safetensors file?", err)
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n == 0 || n > MaxSafetensorsHeader {
		return SafetensorsHeader{}, fmt.Errorf("safetensors header claims %d bytes, outside 1 to %d (100 MiB): the file is corrupt or not safetensors", n, MaxSafetensorsHeader)
	}
	// Read through a LimitReader so a short file costs what it holds, not
	// the length it claims.
	buf, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil {
		return SafetensorsHeader{}, fmt.Errorf("reading safetensors header: %v", err)
	}
	if uint64(len(buf)) != n {
		return SafetensorsHeader{}, fmt.Errorf("safetensors header is truncated: %d of %d bytes: the file is incomplete", len(buf), n)
	}
	h, err := parseSafetensorsHeader(buf)
	if err != nil {
		return SafetensorsHeader{}, err
	}
	h.HeaderBytes = int64(n)
	return h, nil
}

func parseSafetensorsHeader(buf []byte) (SafetensorsHeader, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf, &raw); err != nil {
		return SafetensorsHeader{}, fmt.Errorf("safetensors header is not a JSON object (%v): the file is corrupt", err)
	}
	var h SafetensorsHeader
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return SafetensorsHeader{}, errors.New("safetensors __metadata__ is not a map of strings: the file is corrupt")
			}
			continue
		}
		var e struct {
			Dtype       string  `json:"dtype"`
			Shape       []int64 `json:"shape"`
			DataOffsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return SafetensorsHeader{}, fmt.Errorf("safetensors tensor %q: %v", clip(name), err)
		}
		t, err := checkTensor(name, e.Dtype, e.Shape, e.DataOffsets)
		if err != nil {
			return SafetensorsHeader{}, err
		}
		h.Tensors = append(h.Tensors, t)
	}
	// Overlapping ranges mean a corrupt header; sorting by offset finds them.
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	for i := 1; i < len(h.Tensors); i++ {
		if prev, t := h.Tensors[i-1], h.Tensors[i]; t.Begin < prev.End {
			return SafetensorsHeader{}, fmt.Errorf("safetensors tensors %q and %q overlap: the file is corrupt", clip(prev.Name), clip(t.Name))
		}
	}
	if n := len(h.Tensors); n > 0 && h.Tensors[n-1].End > maxTensorBytes {
		return SafetensorsHeader{}, fmt.Errorf("safetensors data section of %d bytes is implausibly large: the file is corrupt", h.Tensors[n-1].End)
	}
	sort.Slice(h.Tensors, func(i, j int) bool { return h.Tensors[i].Name < h.Tensors[j].Name })
	return h, nil
}

// checkTensor validates one header entry.
func checkTensor(name, dtype string, shape, offsets []int64) (TensorInfo, error) {
	bad := func(format string, a ...any) (TensorInfo, error) {
		return TensorInfo{}, fmt.Errorf("safetensors tensor %q: %s: the file is corrupt", clip(name), fmt.Sprintf(format, a...))
	}
	if dtype == "" {
		return bad("no dtype")
	}
	if len(offsets) != 2 {
		return bad("data_offsets has %d entries, want 2", len(offsets))
	}
	begin, end := offsets[0], offsets[1]
	if begin < 0 || end < begin {
		return bad("data_offsets [%d, %d] are not an increasing pair", begin, end)
	}
	elems := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return bad("negative dimension %d", d)
		}
		hi, lo := bits.Mul64(elems, uint64(d))
		if hi != 0 || lo > math.MaxInt64/64 {
			return bad("shape %v is too large", shape)
		}
		elems = lo
	}
	if b, ok := DtypeBits(dtype); ok {
		total := elems * uint64(b)
		if total%8 != 0 || total/8 != uint64(end-begin) {
			return bad("%s shape %v needs %d bits but data_offsets hold %d bytes", dtype, shape, total, end-begin)
		}
	}
	return TensorInfo{Name: name, Dtype: dtype, Shape: shape, Begin: begin, End: end}, nil
}

// clip shortens a name from a file for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// SafetensorsIndex is a model.safetensors.index.json: which shard file
// holds each tensor, and the total tensor size.
type SafetensorsIndex struct {
	// TotalSize is metadata.total_size: the bytes of all tensors (not of
	// the files, which add their headers). 0 when the index omits it.
	TotalSize int64 `json:"total_size"`
	// WeightMap maps tensor names to shard file names.
	WeightMap map[string]string `json:"weight_map"`
}

// Shards lists the distinct shard files, sorted.
func (ix SafetensorsIndex) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range ix.WeightMap {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// ParseSafetensorsIndex reads a model.safetensors.index.json (the same
// layout as pytorch_model.bin.index.json). Shard names must be plain
// relative paths: they are joined to directories and URLs.
func ParseSafetensorsIndex(data []byte) (SafetensorsIndex, error) {
	var raw struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap map[string]string          `json:"weight_map"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return SafetensorsIndex{}, fmt.Errorf("safetensors index is not valid JSON of the expected shape (%v): pass model.safetensors.index.json", err)
	}
	ix := SafetensorsIndex{WeightMap: raw.WeightMap}
	if msg, ok := raw.Metadata["total_size"]; ok && string(msg) != "null" {
		n, err := parseSize(msg)
		if err != nil {
			return SafetensorsIndex{}, err
		}
		ix.TotalSize = n
	}
	if len(ix.WeightMap) == 0 && ix.TotalSize == 0 {
		return SafetensorsIndex{}, errors.New("safetensors index has neither metadata.total_size nor a weight_map: is it model.safetensors.index.json?")
	}
	for name, f := range ix.WeightMap {
		if !fs.ValidPath(f) || f == "." {
			return SafetensorsIndex{}, fmt.Errorf("safetensors index maps %q to %q, which is not a relative file name: the index is corrupt", clip(name), clip(f))
		}
	}
	return ix, nil
}

// parseSize reads total_size, a JSON integer (some exporters write it as a
// float such as 1.5e10, or as a string).
func parseSize(msg json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(msg))
	if len(s) > 1 && s[0] == '"' {
		if err := json.Unmarshal(msg, &s); err != nil {
			return 0, errors.New("safetensors index metadata.total_size is not a number")
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxTensorBytes {
			return 0, fmt.Errorf("safetensors index metadata.total_size %d is out of range: the index is corrupt", n)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > maxTensorBytes {
		return 0, fmt.Errorf("safetensors index metadata.total_size %s is not a byte count: the index is corrupt", clip(s))
	}
	return int64(f), nil
}
