package traffic

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
)

// benchLog builds n lines of the gateway format bench/profile/gen writes.
func benchLog(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "2025-06-20T12:%02d:%02d.%03dZ INFO gateway request_id=req-%08x method=POST path=/v1/chat/completions model=meta-llama/Llama-3.1-8B-Instruct status=200 input_tokens=%d output_tokens=%d latency_ms=%d\n",
			i/60%60, i%60, i%1000, i, 100+i*7919%9000, 1+i*104729%1000, 50+i%5000)
	}
	return b.Bytes()
}

// benchShortLog builds n lines of bench/profile/gen's short shape: an
// application's structured log line with millisecond ISO-8601 times.
func benchShortLog(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "2026-11-20T10:%02d:%02d.%03dZ level=info msg=done model=llama req_id=r%d input_tokens=%d output_tokens=%d status=200\n",
			i/60000%60, i/1000%60, i%1000, i+1, 100+i*7919%9000, 1+i*104729%1000)
	}
	return b.Bytes()
}

// shapes are the benchmarked line shapes.
var shapes = []struct {
	name string
	gen  func(int) []byte
}{{"gateway", benchLog}, {"short", benchShortLog}}

func BenchmarkParseLine(b *testing.B) {
	line := benchLog(1)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		ParseLine(line)
	}
}

// BenchmarkCountLines is the floor: finding the newlines alone.
func BenchmarkCountLines(b *testing.B) {
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			data := sh.gen(20000)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				bytes.Count(data, []byte{'\n'})
			}
		})
	}
}

func BenchmarkParseBlock(b *testing.B) {
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			data := sh.gen(20000)
			p, _ := NewProfile(Options{Window: DefaultWindow})
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				parseBlock(data, p)
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	data := benchLog(200000)
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p, _ := NewProfile(Options{Window: DefaultWindow})
				if err := Read(context.Background(), bytes.NewReader(data), p, ReadOptions{Workers: w}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadFile reads a mapped file of the gateway format on one and
// two workers: the path `headroom profile FILE` takes.
func BenchmarkReadFile(b *testing.B) {
	data := benchLog(200000)
	name := b.TempDir() + "/requests.log"
	if err := os.WriteFile(name, data, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p, _ := NewProfile(Options{Window: DefaultWindow})
				if err := ReadFile(context.Background(), name, p, ReadOptions{Workers: w}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
