package workload

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// shareGPTBlob is the synthetic ShareGPT file repeated to about 25 MB.
func shareGPTBlob(b *testing.B) []byte {
	b.Helper()
	one, err := os.ReadFile(shareGPTFile)
	if err != nil {
		b.Fatal(err)
	}
	inner := bytes.TrimSuffix(bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(one), []byte("["))), []byte("]"))
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := 0; buf.Len() < 25<<20; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(inner)
	}
	buf.WriteByte(']')
	return buf.Bytes()
}

// BenchmarkShareGPTRead reads a ShareGPT file as a stream, keeping two
// lengths per conversation; BenchmarkShareGPTUnmarshal is the baseline, a
// file decoded whole with encoding/json (what Python's json.load does),
// which holds every text. Compare their MB/s and B/op.
func BenchmarkShareGPTRead(b *testing.B) {
	blob := shareGPTBlob(b)
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readDataset(bytes.NewReader(blob), Dataset{Name: DatasetShareGPT}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShareGPTUnmarshal(b *testing.B) {
	blob := shareGPTBlob(b)
	b.SetBytes(int64(len(blob)))
	b.ReportAllocs()
	for b.Loop() {
		var v []struct {
			Conversations []struct {
				Value string `json:"value"`
			} `json:"conversations"`
		}
		if err := json.Unmarshal(blob, &v); err != nil {
			b.Fatal(err)
		}
	}
}
