package vllm

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitCommandLine(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"plain words", "vllm serve m --tp 2", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"runs of whitespace", " vllm\t serve  m ", []string{"vllm", "serve", "m"}},
		{"single quotes keep everything", `-O '{"level": 3, "x": "$HOME \"q\""}'`, []string{"-O", `{"level": 3, "x": "$HOME \"q\""}`}},
		{"double quotes with escapes", `--chat-template "a \"b\" \\ \$X \n"`, []string{"--chat-template", `a "b" \ $X \n`}},
		{"variables are left alone", `--download-dir $HF_HOME/x "${CACHE}/y" $(nproc)`, []string{"--download-dir", "$HF_HOME/x", "${CACHE}/y", "$(nproc)"}},
		{"quotes inside a word", `--served-model-name=foo' 'bar"baz"`, []string{"--served-model-name=foo barbaz"}},
		{"empty quoted word", `--x '' ""`, []string{"--x", "", ""}},
		{"backslash escapes a space", `--path my\ dir`, []string{"--path", "my dir"}},
		{"backslash-newline continuation", "vllm serve m \\\n  --tp 2 \\\n  --pp 2", []string{"vllm", "serve", "m", "--tp", "2", "--pp", "2"}},
		{"continuation joins a split word", "--max-model-len 81\\\n92", []string{"--max-model-len", "8192"}},
		{"spaces after the backslash", "vllm serve m \\  \n --tp 2", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"CRLF line endings", "vllm serve m \\\r\n --tp 2\r\n", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"continuation inside double quotes", "\"a\\\nb\"", []string{"ab"}},
		{"newline without backslash is whitespace", "vllm serve m\n  --tp 2", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"trailing backslash", "vllm serve m \\", []string{"vllm", "serve", "m"}},
		{"comments", "vllm serve m # the model\n --tp 2 # two GPUs", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"hash inside a word", "--x a#b", []string{"--x", "a#b"}},
		{"pipe ends the command", "vllm serve m 2>&1 | tee log", []string{"vllm", "serve", "m"}},
		{"background", "nohup vllm serve m > vllm.log 2>&1 &", []string{"nohup", "vllm", "serve", "m"}},
		{"list", "vllm serve m && echo done; ls", []string{"vllm", "serve", "m"}},
		{"redirection attached", "vllm serve m >>log --tp 2", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"redirection of both streams", "vllm serve m &> log --tp 2", []string{"vllm", "serve", "m", "--tp", "2"}},
		{"input redirection", "vllm serve m </dev/null", []string{"vllm", "serve", "m"}},
		{"quoted operators are text", `--x '|' "&&" \;`, []string{"--x", "|", "&&", ";"}},
		{"no-break space from a web page", "vllm\u00a0serve m", []string{"vllm", "serve", "m"}},
		{"unicode inside words", "--served-model-name модель", []string{"--served-model-name", "модель"}},
		{"nothing", "  \n ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SplitCommandLine(tt.in)
			if err != nil {
				t.Fatalf("SplitCommandLine(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SplitCommandLine(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSplitCommandLineErrors(t *testing.T) {
	for _, in := range []string{`vllm serve 'm`, `--x "abc`, `--x "abc\"`} {
		_, err := SplitCommandLine(in)
		if err == nil {
			t.Errorf("SplitCommandLine(%q): no error", in)
			continue
		}
		if !strings.Contains(err.Error(), "unterminated") {
			t.Errorf("SplitCommandLine(%q) = %v, want an unterminated-quote error", in, err)
		}
	}
}

func TestShellQuoteRoundTrip(t *testing.T) {
	words := []string{"plain", "", "with space", "it's", `"dq"`, "$HOME", "a\nb", "#x", "--x=1", "tab\there", "\\", "|", "2>&1", "\u00a0"}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, shellQuote(w))
	}
	got, err := SplitCommandLine(strings.Join(quoted, " "))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, words) {
		t.Errorf("split(quote(words)) = %q, want %q", got, words)
	}
}
