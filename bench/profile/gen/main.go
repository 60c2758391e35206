// Command gen writes a synthetic API-gateway request log in key=value form
// for the profile benchmark: one request a line, with a timestamp, ids,
// route, model, status, input_tokens, output_tokens and latency, the shape
// of the lines the seed's awk script reads.
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
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gen: give -o FILE")
		os.Exit(2)
	}
	if err := write(*out, *size, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

var models = []string{"meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"}
var routes = []string{"/v1/chat/completions", "/v1/completions", "/v1/chat/completions", "/v1/chat/completions"}

func write(name string, size int64, seed uint64) error {
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
		line = t.AppendFormat(line[:0], "2006-01-02T15:04:05.000Z")
		line = append(line, " INFO gateway request_id=req-"...)
		line = strconv.AppendUint(line, r.Uint64()>>16, 16)
		line = append(line, " method=POST path="...)
		line = append(line, routes[r.IntN(len(routes))]...)
		line = append(line, " model="...)
		line = append(line, models[r.IntN(len(models))]...)
		line = append(line, " status=200 input_tokens="...)
		line = strconv.AppendInt(line, int64(in), 10)
		line = append(line, " output_tokens="...)
		line = strconv.AppendInt(line, int64(outTok), 10)
		line = append(line, " latency_ms="...)
		line = strconv.AppendInt(line, int64(40+outTok*12+r.IntN(300)), 10)
		line = append(line, '\n')
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
