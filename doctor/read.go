package doctor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"headroom.dev/headroom/traffic"
)

// Limits on what is read. Documents parsed whole (manifests) are capped;
// text is streamed line by line, each line capped, so a log of any size
// reads in bounded memory.
const (
	sniffBytes     = 64 << 10
	maxDocBytes    = 64 << 20
	maxTextLine    = 256 << 10
	requestLogHead = 200 // lines sniffed to call a file a request log
)

// Read reads one source (a file's contents, or stdin) named name and adds
// what it recognises. The kind is decided by content: gzip is opened; a
// Kubernetes manifest (YAML or JSON with apiVersion and kind) is parsed
// whole; a file whose lines are request records is streamed into the
// traffic profile; anything else is read line by line, where vLLM log
// lines, OOM messages, nvidia-smi output, Prometheus text, kubectl
// describe output, request records and pasted vllm commands are recognised
// wherever they sit. A file that is not text is skipped with a note on its
// Input, so Empty tells when nothing readable was given.
func (e *Evidence) Read(ctx context.Context, name string, r io.Reader) error {
	in := &Input{Source: name}
	e.Inputs = append(e.Inputs, in)
	return e.read(ctx, in, traffic.ContextReader(ctx, r), 0)
}

func (e *Evidence) read(ctx context.Context, in *Input, r io.Reader, depth int) error {
	br := bufio.NewReaderSize(r, sniffBytes)
	head, err := br.Peek(sniffBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("%s: %v", in.Source, err)
	}
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		if depth > 2 {
			return fmt.Errorf("%s: gzip inside gzip inside gzip: unpack it first", in.Source)
		}
		// Within the bound every reader of logs shares (a decompression
		// bomb is refused), and an interrupt ends the reading.
		zr, err := traffic.Gunzip(br)
		if err != nil {
			return fmt.Errorf("%s: %v", in.Source, err)
		}
		return e.read(ctx, in, traffic.ContextReader(ctx, zr), depth+1)
	}
	if traffic.LooksBinary(head) {
		// One core dump in an incident directory must not hide the logs
		// beside it: it is skipped with a note, and only inputs with
		// nothing recognised at all are bad input (the caller's check).
		in.Notes = append(in.Notes, "a binary file, not text: skipped (give logs, nvidia-smi output, /metrics text, manifests or request logs)")
		return nil
	}
	switch {
	case looksManifest(head):
		doc, err := io.ReadAll(io.LimitReader(br, maxDocBytes+1))
		if err != nil {
			return fmt.Errorf("%s: %v", in.Source, err)
		}
		if len(doc) > maxDocBytes {
			return fmt.Errorf("%s: a manifest over %d MiB: give the objects that run vLLM", in.Source, maxDocBytes>>20)
		}
		if e.readManifests(in, doc) {
			in.addKind(KindManifest)
			return nil
		}
		return e.readText(ctx, in, bytes.NewReader(doc))
	case looksRequestLog(head):
		in.addKind(KindRequestLog)
		e.TrafficSources = append(e.TrafficSources, in.Source)
		before := e.Traffic.Requests() + e.Traffic.Skipped()
		err := traffic.Read(ctx, br, e.Traffic, traffic.ReadOptions{Workers: 2})
		in.Lines = int(e.Traffic.Requests() + e.Traffic.Skipped() - before)
		if err != nil {
			return fmt.Errorf("%s: %v", in.Source, err)
		}
		return nil
	}
	return e.readText(ctx, in, br)
}

// looksManifest reports a YAML document with top-level apiVersion and kind
// lines, or a JSON object with both keys near its start.
func looksManifest(head []byte) bool {
	s := string(head)
	trim := strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(trim, "{") {
		i := strings.Index(s, `"apiVersion"`)
		j := strings.Index(s, `"kind"`)
		return i >= 0 && j >= 0 && i < 4096 && j < 4096
	}
	api, kind := false, false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, "\r")
		api = api || strings.HasPrefix(l, "apiVersion:") || strings.HasPrefix(l, "- apiVersion:")
		kind = kind || strings.HasPrefix(l, "kind:") || strings.HasPrefix(l, "- kind:")
		if api && kind {
			return true
		}
	}
	return false
}

// looksRequestLog reports a file whose first lines are nearly all request
// records (90% of the non-blank ones, at least 3): such a file is read by
// the fast request-log reader, which recognises nothing else.
func looksRequestLog(head []byte) bool {
	lines, records := 0, 0
	for len(head) > 0 && lines < requestLogHead {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			break // the last, cut line is not judged
		}
		line := bytes.TrimSpace(head[:i])
		head = head[i+1:]
		if len(line) == 0 {
			continue
		}
		lines++
		if _, ok := traffic.ParseLine(line); ok && !bytes.Contains(line, []byte("Received request")) {
			records++
		}
	}
	return records >= 3 && records*10 >= lines*9
}

// readText streams text line by line through the recognisers.
func (e *Evidence) readText(ctx context.Context, in *Input, r io.Reader) error {
	s := newTextScanner(e, in)
	br := bufio.NewReaderSize(r, sniffBytes)
	var cur []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(cur)+len(chunk) <= maxTextLine {
			cur = append(cur, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(cur) > 0 {
			if in.Lines%4096 == 0 {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
			}
			s.line(strings.TrimRight(string(cur), "\r\n"))
			cur = cur[:0]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %v", in.Source, err)
		}
	}
	s.finish()
	return nil
}
