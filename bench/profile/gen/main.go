// Command gen writes a synthetic request log in key=value form for the
// profile benchmark, one request a line, in one of two shapes (-shape):
//
//	gateway: an API gateway's line, with a timestamp, ids, route, model,
//	  status, input_tokens, output_tokens and latency (~190 bytes), the
//	  shape of the lines the seed's awk script reads;
//	short: an application's structured log line, ~119 bytes:
//	  2026-11-20T10:00:00.000Z level=info msg=done model=llama req_id=r1 input_tokens=2332 output_tokens=242 status=200
//
// Token counts follow a mixture: most requests are chat turns of a few
// hundred to two thousand prompt tokens, a tenth are long-context (RAG,
// documents) requests of 4k to 30k, and outputs run from 1 to 2048 tokens.
// The generator is deterministic for a given -seed.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

func main() {
	out := flag.String("o", "", "output file (required)")
	size := flag.Int64("size", 1<<30, "stop after this many bytes")
	seed := flag.Uint64("seed", 1, "random seed")
	shape := flag.String("shape", "gateway", "line shape: gateway or short")
	flag.Parse()
	format, ok := shapes[*shape]
	if !ok {
		fmt.Fprintf(os.Stderr, "gen: unknown -shape %q: use gateway or short\n", *shape)
		os.Exit(2)
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gen: give -o FILE")
		os.Exit(2)
	}
	if err := write(*out, *size, *seed, format); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

var models = []string{"meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"}
var routes = []string{"/v1/chat/completions", "/v1/completions", "/v1/chat/completions", "/v1/chat/completions"}
var shortModels = []string{"llama", "qwen", "mistral"}

// request is one generated request.
type request struct {
	t       time.Time
	n       int64
	in, out int
	r       *rand.Rand
}

// shapes append one line of a request, newline included.
var shapes = map[string]func(line []byte, q request) []byte{
	"gateway": func(line []byte, q request) []byte {
		r := q.r
		line = q.t.AppendFormat(line, "2006-01-02T15:04:05.000Z")
		line = append(line, " INFO gateway request_id=req-"...)
		line = strconv.AppendUint(line, r.Uint64()>>16, 16)
		line = append(line, " method=POST path="...)
		line = append(line, routes[r.IntN(len(routes))]...)
		line = append(line, " model="...)
		line = append(line, models[r.IntN(len(models))]...)
		line = append(line, " status=200 input_tokens="...)
		line = strconv.AppendInt(line, int64(q.in), 10)
		line = append(line, " output_tokens="...)
		line = strconv.AppendInt(line, int64(q.out), 10)
		line = append(line, " latency_ms="...)
		line = strconv.AppendInt(line, int64(40+q.out*12+r.IntN(300)), 10)
		return append(line, '\n')
	},
	"short": func(line []byte, q request) []byte {
		line = q.t.AppendFormat(line, "2006-01-02T15:04:05.000Z")
		line = append(line, " level=info msg=done model="...)
		line = append(line, shortModels[q.r.IntN(len(shortModels))]...)
		line = append(line, " req_id=r"...)
		line = strconv.AppendInt(line, q.n, 10)
		line = append(line, " input_tokens="...)
		line = strconv.AppendInt(line, int64(q.in), 10)
		line = append(line, " output_tokens="...)
		line = strconv.AppendInt(line, int64(q.out), 10)
		line = append(line, " status=200"...)
		return append(line, '\n')
	},
}

func write(name string, size int64, seed uint64, format func([]byte, request) []byte) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t := time.Date(2025, 6, 20, 0, 0, 0, 0, time.UTC)
	var line []byte
	var written int64
	for n := int64(0); written < size; n++ {
		t = t.Add(time.Duration(r.IntN(20)) * time.Millisecond)
		in := 64 + r.IntN(1900)
		if r.IntN(10) == 0 {
			in = 4096 + r.IntN(26000)
		}
		outTok := 1 + r.IntN(2048)
		line = format(line[:0], request{t: t, n: n + 1, in: in, out: outTok, r: r})
		if _, err := w.Write(line); err != nil {
			f.Close()
			return err
		}
		written += int64(len(line))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
