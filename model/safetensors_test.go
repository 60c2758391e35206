package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// safetensorsFile lays out a .safetensors file as the format defines it:
// 8-byte little-endian header length, the JSON header, then dataLen bytes.
func safetensorsFile(header string, dataLen int) []byte {
	var b bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	b.Write(n[:])
	b.WriteString(header)
	b.Write(make([]byte, dataLen))
	return b.Bytes()
}

// twoTensors is a header for an F32 [2, 3] (2·3·4 = 24 bytes) and a BF16
// [4] (4·2 = 8 bytes) tensor: 32 bytes of data.
const twoTensors = `{"__metadata__": {"format": "pt"},
	"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
	"b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]}}`

func TestReadSafetensorsHeader(t *testing.T) {
	file := safetensorsFile(twoTensors, 32)
	r := &countingReader{r: bytes.NewReader(file)}
	h, err := ReadSafetensorsHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	want := SafetensorsHeader{
		Tensors: []TensorInfo{
			{Name: "b", Dtype: "BF16", Shape: []int64{4}, Begin: 24, End: 32},
			{Name: "w", Dtype: "F32", Shape: []int64{2, 3}, Begin: 0, End: 24},
		},
		Metadata:    map[string]string{"format": "pt"},
		HeaderBytes: int64(len(twoTensors)),
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("header = %+v, want %+v", h, want)
	}
	if h.TensorBytes() != 32 {
		t.Errorf("TensorBytes = %d, want 32", h.TensorBytes())
	}
	// Only the length prefix and the header are read, never the data.
	if r.n != int64(8+len(twoTensors)) {
		t.Errorf("read %d bytes, want %d", r.n, 8+len(twoTensors))
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestSafetensorsDtypes(t *testing.T) {
	tests := []struct {
		dtype string
		shape string
		bytes int
		ok    bool
	}{
		{"F64", "[3]", 24, true},
		{"I64", "[2]", 16, true},
		{"F16", "[5]", 10, true},
		{"I8", "[7]", 7, true},
		{"BOOL", "[7]", 7, true},
		{"F8_E4M3", "[128, 128]", 16384, true},
		{"F8_E5M2", "[4]", 4, true},
		{"F8_E8M0", "[4]", 4, true},
		{"F4", "[4]", 2, true},      // 4 × 4 bits = 2 bytes
		{"F4", "[3]", 2, false},     // 12 bits is not whole bytes
		{"F6_E2M3", "[4]", 3, true}, // 4 × 6 bits = 3 bytes
		{"F32", "[]", 4, true},      // a scalar holds one element
		{"F32", "[0, 9]", 0, true},  // an empty tensor
		{"F32", "[2]", 4, false},    // 8 bytes needed
		{"X_NEW", "[2]", 5, true},   // unknown dtype: size not checked
	}
	for _, tt := range tests {
		hdr := `{"t": {"dtype": "` + tt.dtype + `", "shape": ` + tt.shape + `, "data_offsets": [0, ` + strconv.Itoa(tt.bytes) + `]}}`
		h, err := ReadSafetensorsHeader(bytes.NewReader(safetensorsFile(hdr, tt.bytes)))
		if (err == nil) != tt.ok {
			t.Errorf("%s %s in %d bytes: err = %v, want ok=%v", tt.dtype, tt.shape, tt.bytes, err, tt.ok)
		}
		if err == nil && h.TensorBytes() != int64(tt.bytes) {
			t.Errorf("%s: TensorBytes = %d, want %d", tt.dtype, h.TensorBytes(), tt.bytes)
		}
	}
}

func TestReadSafetensorsHeaderErrors(t *testing.T) {
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, 200<<20)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than its 8-byte header length"},
		{"zero length", make([]byte, 8), "outside 1 to"},
		{"over 100 MiB", huge, "(100 MiB)"},
		{"truncated", safetensorsFile(twoTensors, 0)[:20], "truncated"},
		{"not JSON", safetensorsFile("nope", 0), "not a JSON object"},
		{"bad offsets", safetensorsFile(`{"t": {"dtype": "F32", "shape": [1], "data_offsets": [4]}}`, 0), "want 2"},
		{"backwards", safetensorsFile(`{"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}`, 0), "increasing"},
		{"negative", safetensorsFile(`{"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}`, 0), "increasing"},
		{"size mismatch", safetensorsFile(`{"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}`, 0), "needs 96 bits"},
		{"overlap", safetensorsFile(`{"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}`, 0), "overlap"},
		{"negative dim", safetensorsFile(`{"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}`, 0), "negative dimension"},
		{"huge shape", safetensorsFile(`{"t": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}`, 0), "too large"},
		{"no dtype", safetensorsFile(`{"t": {"shape": [1], "data_offsets": [0, 1]}}`, 0), "no dtype"},
		{"metadata not strings", safetensorsFile(`{"__metadata__": {"a": 1}}`, 0), "__metadata__"},
		{"implausible data", safetensorsFile(`{"t": {"dtype": "U8", "shape": [2251799813685248], "data_offsets": [0, 2251799813685248]}}`, 0), "implausibly large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSafetensorsHeader(bytes.NewReader(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line containing %q", err, tt.want)
			}
		})
	}
}

func TestParseSafetensorsIndex(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "index", "Llama-3.1-8B-Instruct.model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := ParseSafetensorsIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	// 8,030,261,248 parameters × 2 bytes (bf16), see the file's README.
	if ix.TotalSize != 16_060_522_496 {
		t.Errorf("TotalSize = %d", ix.TotalSize)
	}
	want := []string{"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
		"model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"}
	if got := ix.Shards(); !reflect.DeepEqual(got, want) {
		t.Errorf("Shards = %v, want %v", got, want)
	}

	for _, tt := range []struct {
		js   string
		size int64
	}{
		{`{"metadata": {"total_size": 1.5e10}, "weight_map": {"a": "x.safetensors"}}`, 15_000_000_000},
		{`{"metadata": {"total_size": "1234"}, "weight_map": {"a": "x.safetensors"}}`, 1234},
		{`{"weight_map": {"a": "sub/x.safetensors"}}`, 0},
		{`{"metadata": {"total_size": null}, "weight_map": {"a": "x.safetensors"}}`, 0},
	} {
		ix, err := ParseSafetensorsIndex([]byte(tt.js))
		if err != nil || ix.TotalSize != tt.size {
			t.Errorf("%s: size %d, err %v; want %d", tt.js, ix.TotalSize, err, tt.size)
		}
	}
	for _, js := range []string{
		`nope`,
		`{}`,
		`{"metadata": {"total_size": -5}, "weight_map": {"a": "x"}}`,
		`{"metadata": {"total_size": 1.5}, "weight_map": {"a": "x"}}`,
		`{"metadata": {"total_size": "many"}, "weight_map": {"a": "x"}}`,
		`{"weight_map": {"a": "../../etc/passwd"}}`,
		`{"weight_map": {"a": "/abs.safetensors"}}`,
		`{"weight_map": {"a": 3}}`,
	} {
		if _, err := ParseSafetensorsIndex([]byte(js)); err == nil {
			t.Errorf("%s: no error", js)
		}
	}
}

func FuzzReadSafetensorsHeader(f *testing.F) {
	f.Add(safetensorsFile(twoTensors, 32))
	f.Add(safetensorsFile(`{"t": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}}`, 2))
	f.Add(safetensorsFile(`{"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}}`, 12))
	f.Add(safetensorsFile(`{}`, 0))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadSafetensorsHeader(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if h.HeaderBytes <= 0 || h.HeaderBytes > MaxSafetensorsHeader || 8+h.HeaderBytes > int64(len(data)) {
			t.Errorf("HeaderBytes %d for a %d-byte input", h.HeaderBytes, len(data))
		}
		var sum int64
		for _, tt := range h.Tensors {
			if tt.Begin < 0 || tt.End < tt.Begin {
				t.Errorf("bad offsets %+v", tt)
			}
			sum += tt.Bytes()
		}
		if sum != h.TensorBytes() || sum < 0 || sum > maxTensorBytes {
			t.Errorf("TensorBytes %d, sum %d", h.TensorBytes(), sum)
		}
	})
}

func FuzzParseSafetensorsIndex(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "index", "Llama-3.1-8B-Instruct.model.safetensors.index.json")); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"metadata": {"total_size": 1.5e10}, "weight_map": {"a": "x.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"a": "../x"}}`))
	f.Add([]byte(`{"metadata": {"total_size": "12"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParseSafetensorsIndex(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if ix.TotalSize < 0 {
			t.Errorf("negative total %d", ix.TotalSize)
		}
		for _, s := range ix.Shards() {
			if strings.HasPrefix(s, "/") || strings.Contains("/"+s+"/", "/../") {
				t.Errorf("unsafe shard name %q", s)
			}
		}
	})
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestReadSafetensorsHeaderReadError(t *testing.T) {
	_, err := ReadSafetensorsHeader(errReader{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("err = %v", err)
	}
}
