package workload

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

const shareGPTFile = "testdata/sharegpt/sharegpt_synthetic.json"

// sizes are the (prompt, output) tokens of a stream's requests.
func sizes(t *testing.T, s Spec) ([][2]int, string) {
	t.Helper()
	st, _, err := s.Open(osOpen)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int
	for _, r := range take(t, st, 1000) {
		out = append(out, [2]int{r.Prompt, r.Output})
	}
	return out, LogNote(st)
}

func pairs(s string) [][2]int {
	var out [][2]int
	for _, f := range strings.Split(s, ";") {
		var p [2]int
		if _, err := fmt.Sscanf(f, "%d %d", &p[0], &p[1]); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func sameSizes(t *testing.T, what string, got, want [][2]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// The synthetic ShareGPT file (testdata/sharegpt/README.md) sampled as
// vllm bench serve samples it. The expected orders are what
// testdata/sharegpt/reference.py (bench's load_data, sample and
// maybe_oversample_requests with CPython's random) printed under CPython
// 3.11.7; entries are told apart by their sizes.
func TestShareGPTSample(t *testing.T) {
	spec := Spec{Rate: math.Inf(1), NumRequests: 10, Dataset: Dataset{Name: DatasetShareGPT, Path: shareGPTFile}}

	// python3 reference.py sharegpt_synthetic.json 10 0: the first ten of
	// the shuffle that pass the filters.
	got, note := sizes(t, spec)
	sameSizes(t, "seed 0, 10 requests", got, pairs("10 50;114 348;88 274;49 163;30 108;91 284;59 191;13 59;130 397;98 304"))
	for _, want := range []string{"10 requests from the 35 entries", "--seed 0", "estimated at 4 bytes of text per token", "a sample of the same file"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}

	// python3 reference.py sharegpt_synthetic.json 40 42: of the 35
	// conversations of two turns or more, 4 fail the filters (a 3-token
	// prompt, a 1-token reply, a 1050-token prompt, 750 + 1364 tokens);
	// the 31 that pass come first, then 9 random.choice repeats after
	// random.seed(42).
	spec.NumRequests, spec.Dataset.Seed = 40, 42
	got, note = sizes(t, spec)
	sameSizes(t, "seed 42, 40 requests", got, pairs("43 143;30 108;88 274;127 388;121 369;72 228;111 339;101 311;62 200;49 163;52 173;"+
		"114 348;39 133;82 256;124 378;33 117;104 321;10 50;134 404;59 191;78 247;17 69;130 397;25 359;91 284;20 78;98 304;23 89;137 413;"+
		"69 217;13 59;78 247;127 388;43 143;25 359;62 200;101 311;101 311;121 369;25 359"))
	if !strings.Contains(note, "4 dropped by its length filter, 9 repeated") {
		t.Errorf("note: %s", note)
	}

	// python3 reference.py sharegpt_synthetic.json 40 0 100: a fixed
	// output length skips the reply's minimum and lets 750 + 100 pass; 33
	// pass, 7 repeats.
	spec.Dataset.Seed, spec.Dataset.OutputLen = 0, 100
	got, _ = sizes(t, spec)
	want := pairs("10 100;114 100;88 100;49 100;30 100;91 100;59 100;13 100;130 100;750 100;98 100;137 100;62 100;39 100;20 100;82 100;" +
		"134 100;23 100;121 100;33 100;78 100;52 100;25 100;43 100;104 100;56 100;69 100;127 100;124 100;72 100;17 100;111 100;101 100;" +
		"104 100;69 100;88 100;134 100;101 100;111 100;56 100")
	sameSizes(t, "seed 0, output 100, 40 requests", got, want)

	// --no-oversample stops at the 31 that pass; --disable-shuffle takes
	// the file's order (synthetic-00, -01, ...: prompts 10, 13, 17 ...).
	spec.Dataset = Dataset{Name: DatasetShareGPT, Path: shareGPTFile, Seed: 42, NoOversample: true}
	if got, _ = sizes(t, spec); len(got) != 31 {
		t.Errorf("no oversampling: %d requests, want 31", len(got))
	}
	spec.Dataset = Dataset{Name: DatasetShareGPT, Path: shareGPTFile, NoShuffle: true}
	spec.NumRequests = 3
	got, _ = sizes(t, spec)
	sameSizes(t, "file order", got, pairs("10 50;13 59;17 69"))
}

// vllm bench serve's custom dataset: JSON lines shuffled with the seed
// (CPython 3.11.7: l = list(range(5)); random.seed(0); random.shuffle(l)
// gives [2, 1, 0, 4, 3]); a line without output_tokens takes 256. The
// prompts' estimates: 94 bytes → 24 tokens, 39 → 10, 48 → 12, 58 → 15,
// 20 → 5.
func TestCustomDataset(t *testing.T) {
	got, _ := sizes(t, Spec{Concurrency: 2, NumRequests: 5, Dataset: Dataset{Name: DatasetCustom, Path: "testdata/sharegpt/custom.jsonl"}})
	sameSizes(t, "custom", got, pairs("24 300;10 256;12 40;15 60;5 8"))
	got, _ = sizes(t, Spec{Concurrency: 2, NumRequests: 2, Dataset: Dataset{Name: DatasetCustom, Path: "testdata/sharegpt/custom.jsonl", OutputLen: 99, NoShuffle: true}})
	sameSizes(t, "custom in order, --custom-output-len 99", got, pairs("12 40;10 99"))
}

// The flags and a pasted bench command name the same dataset replay; the
// dataset's seed is bench's (0 unless given), not the arrivals'.
func TestDatasetFlags(t *testing.T) {
	s, _, err := flags(t, "--dataset-name", "sharegpt", "--dataset-path", shareGPTFile, "--rate", "inf", "--num-requests", "10")
	if err != nil || s.Dataset != (Dataset{Name: DatasetShareGPT, Path: shareGPTFile}) || s.Seed != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	s, _, err = flags(t, "--dataset-name", "sharegpt", "--dataset-path", shareGPTFile, "--concurrency", "4", "--seed", "42", "--sharegpt-output-len", "2k")
	if err != nil || s.Dataset.Seed != 42 || s.Dataset.OutputLen != 2000 {
		t.Fatalf("%+v %v", s, err)
	}
	s, rd, err := flags(t, "--bench", "vllm bench serve --model m --dataset-name sharegpt --dataset-path "+shareGPTFile+" --num-prompts 40 --seed 42 --request-rate 5")
	if err != nil || rd.Bench == nil || s.Dataset.Seed != 42 || s.NumRequests != 40 || s.Rate != 5 {
		t.Fatalf("%+v %v", s, err)
	}
	got, _ := sizes(t, s)
	if len(got) != 40 || got[0] != [2]int{43, 143} {
		t.Errorf("bench replay: %v", got[:3])
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset-name", "custom", "--rate", "1"}, "--dataset-name custom needs --dataset-path FILE"},
		{[]string{"--dataset-name", "sonnet", "--dataset-path", "x", "--rate", "1"}, `--dataset-name "sonnet": headroom replays random, sharegpt or custom`},
		{[]string{"--dataset-name", "sharegpt", "--dataset-path", shareGPTFile, "--rate", "1", "--prompt-tokens", "5"}, "--prompt-tokens and --dataset-name sharegpt both give"},
		{[]string{"--dataset-path", shareGPTFile, "--rate", "1"}, "--dataset-path reads a dataset: give --dataset-name"},
		{[]string{"--dataset-name", "sharegpt", "--dataset-path", shareGPTFile, "--rate", "1", "--sharegpt-output-len", "0"}, "--sharegpt-output-len"},
	} {
		if _, _, err := flags(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// Files that are missing, of another layout, or past a bound: one line
// naming the file, never a panic.
func TestDatasetErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{DatasetShareGPT, dir + "/missing.json", "--dataset-path " + dir + "/missing.json: no such file"},
		{DatasetShareGPT, write("obj.json", `{"conversations": []}`), "not a ShareGPT file"},
		{DatasetShareGPT, write("cut.json", `[{"conversations": [{"value": "abc`), "not a ShareGPT file"},
		{DatasetShareGPT, write("deep.json", strings.Repeat("[", 100)), "nested deeper than 64"},
		{DatasetShareGPT, write("none.json", `[{"conversations": [{"value": "Hi"}, {"value": "Hello"}]}]`), "no entry of its 1 passes"},
		{DatasetShareGPT, write("trail.json", `[] x`), "text after the list"},
		{DatasetCustom, write("noprompt.jsonl", "{\"prompt\": \"a b c d e f g h\"}\n{\"output_tokens\": 3}\n"), "line 2: no \"prompt\""},
		{DatasetCustom, write("badout.jsonl", `{"prompt": "abcdefgh", "output_tokens": -1}`), "output_tokens -1"},
	} {
		_, _, err := Spec{Rate: 1, Dataset: Dataset{Name: c.name, Path: c.path}}.Open(osOpen)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
}

// A file past the byte bound or the entry bound stops with a message;
// gzip is read (and the bound counts its decompressed text).
func TestDatasetBounds(t *testing.T) {
	text := `[` + strings.Repeat(`{"conversations": [{"value": "What is a sourdough starter?"}, {"value": "A living culture of flour and water."}]},`, 99) +
		`{"conversations": [{"value": "What is a sourdough starter?"}, {"value": "A living culture of flour and water."}]}]`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	entries, err := readDataset(bytes.NewReader(gz.Bytes()), Dataset{Name: DatasetShareGPT})
	if err != nil || len(entries) != 100 || entries[0] != (pair{7, 9}) {
		t.Fatalf("gzip: %d entries %v, %v", len(entries), entries[:1], err)
	}
	s := &jsonScan{r: bufioOf(text), limit: 1000, maxEntries: 1000}
	if _, err := s.shareGPT(); err == nil || !strings.Contains(err.Error(), "more than headroom reads") {
		t.Errorf("byte bound: %v", err)
	}
	s = &jsonScan{r: bufioOf(text), limit: 1 << 20, maxEntries: 10}
	if _, err := s.shareGPT(); err == nil || !strings.Contains(err.Error(), "over 10 conversations") {
		t.Errorf("entry bound: %v", err)
	}
}

// Escapes count the bytes of what they stand for: é (\u00e9) 2, 世 3, an
// emoji's surrogate pair 4, \n 1.
func TestStringBytes(t *testing.T) {
	s := &jsonScan{r: bufioOf(`"a\u00e9\u4e16\ud83d\ude00\n\"é"`), limit: 1 << 20}
	n, err := s.str(false)
	if want := int64(1 + 2 + 3 + 4 + 1 + 1 + 2); err != nil || n != want {
		t.Errorf("%d bytes, %v; want %d", n, err, want)
	}
}

func bufioOf(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// Without bench's ShareGPT file, its requests come from the stand-in, said
// in the note: 1,000 requests whose lengths sum to what gpustack's gpt-oss
// ShareGPT runs published for bench's 1,000-prompt sample (215,312 prompt
// tokens, 193,979 generated; sim/testdata/serving/train-more.csv), inside
// bench's filters and the stand-in's longest output. Another missing file
// is an error.
func TestShareGPTStandIn(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{"", dir + "/ShareGPT_V3_unfiltered_cleaned_split.json", dir + "/sharegpt_v3_unfiltered_cleaned_split.json.gz"} {
		s := Spec{Rate: math.Inf(1), NumRequests: 1000, Dataset: Dataset{Name: DatasetShareGPT, Path: path}}
		got, note := sizes(t, s)
		var in, out int
		for _, p := range got {
			in += p[0]
			out += p[1]
			if p[0] < 4 || p[0] > 1024 || p[1] < 4 || p[0]+p[1] > 2048 || p[1] > 534 {
				t.Fatalf("%q: request %v outside bench's filters or the stand-in's longest output", path, p)
			}
		}
		if len(got) != 1000 || in != 215_312 || out != 193_979 {
			t.Errorf("%q: %d requests of %d prompt and %d output tokens, want 1000 of 215,312 and 193,979", path, len(got), in, out)
		}
		if !strings.Contains(note, "ShareGPT stand-in") {
			t.Errorf("%q: the note does not say the stand-in: %s", path, note)
		}
	}
	s := Spec{Rate: math.Inf(1), NumRequests: 10, Dataset: Dataset{Name: DatasetShareGPT, Path: dir + "/sharegpt.json"}}
	if _, _, err := s.Open(osOpen); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file of another name: %v, want no such file", err)
	}
}

// The stand-in holds at most the file's 94,145 conversations whatever the
// count, and repeats them past it, as bench repeats the file's entries:
// ten million requests keep 94,145 pairs (0.75 MB), the 94,146th request
// is the first again.
func TestShareGPTStandInBounded(t *testing.T) {
	s := Spec{Rate: math.Inf(1), NumRequests: 10_000_000, Dataset: Dataset{Name: DatasetShareGPT}}
	st, _, err := s.Open(osOpen)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := st.(*bounded); ok {
		st = b.src
	}
	ds, ok := st.(*datasetStream)
	if !ok {
		t.Fatalf("a %T", st)
	}
	if len(ds.reqs) != shareGPTConversations || ds.count() != 10_000_000 {
		t.Fatalf("%d pairs held for %d requests", len(ds.reqs), ds.count())
	}
	first, _ := ds.Next()
	for range shareGPTConversations - 1 {
		if _, err := ds.Next(); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := ds.Next()
	if again.Prompt != first.Prompt || again.Output != first.Output {
		t.Errorf("request 94,146: %d/%d tokens, the first %d/%d", again.Prompt, again.Output, first.Prompt, first.Output)
	}
}
