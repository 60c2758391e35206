// Command fakevllm stands in for `vllm` (and the GPU under it) in the
// probe's tests: this project's tests run where there is no GPU, so they
// launch this program instead of vLLM. It reads vLLM's flags (with
// vllm.ParseCommand), answers --version, prints vLLM's start-up lines and
// error texts for a hidden KV capacity (package enginesim), exits with
// vLLM's status codes, serves /health on --port once "ready", and stops on
// SIGTERM like vLLM's API server does.
//
// Environment:
//
//	FAKEVLLM_VERSION         release to act out (default 0.19.0); 0.10.0 has
//	                         no --max-model-len auto, 0.6.4 is the V0 engine
//	FAKEVLLM_VERSION_OUTPUT  printed by --version instead of the release
//	FAKEVLLM_KV_TOKENS       hidden KV capacity in tokens (default 476016)
//	FAKEVLLM_MODEL_MAX       the model's maximum context (default: the
//	                         catalog's, else 131072)
//	FAKEVLLM_LOAD_DELAY      time "loading the weights" takes (default 0)
//	FAKEVLLM_LINE_DELAY      pause between lines (default 0)
//	FAKEVLLM_FAIL            hang, silent, crash, oom, free-memory
//	FAKEVLLM_CRASH_AFTER     lines printed before "crash"
//	FAKEVLLM_SPLIT=1         write each line in pieces, pausing mid-line
//	FAKEVLLM_NO_READY_LINE=1 never print uvicorn's lines: readiness only by /health
//	FAKEVLLM_IGNORE_TERM=1   ignore SIGTERM (only SIGKILL ends it)
//	FAKEVLLM_CHILD=1         start an "engine core" child in the same process
//	                         group, as vLLM does
//	FAKEVLLM_PIDFILE         append "PID PGID" of every process started
//	FAKEVLLM_ARGSFILE        append the arguments of every launch, one line
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"headroom.dev/headroom/model/catalog"
	"headroom.dev/headroom/probe/internal/enginesim"
	"headroom.dev/headroom/vllm"
)

func main() {
	if os.Getenv("FAKEVLLM_ROLE") == "child" {
		child()
		return
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	version, err := vllm.ParseVersion(envOr("FAKEVLLM_VERSION", "0.19.0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakevllm:", err)
		return 2
	}
	if len(args) == 1 && args[0] == "--version" {
		if out, ok := os.LookupEnv("FAKEVLLM_VERSION_OUTPUT"); ok {
			fmt.Println(out)
			return 0
		}
		fmt.Println(version)
		return 0
	}
	if f := os.Getenv("FAKEVLLM_ARGSFILE"); f != "" {
		appendLine(f, strings.Join(args, " "))
	}
	recordPID()
	s, err := vllm.ParseCommand(append([]string{"vllm"}, args...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "vllm serve: error:", err)
		return 2
	}
	port := 8000
	for i, a := range s.Extra {
		if a == "--port" && i+1 < len(s.Extra) {
			port, _ = strconv.Atoi(s.Extra[i+1])
		}
	}
	maxLen := 131072
	if spec, ok := catalog.Lookup(s.Model); ok && spec.MaxPositions > 0 {
		maxLen = spec.MaxPositions
	}
	maxLen = envInt("FAKEVLLM_MODEL_MAX", maxLen)
	cfg := enginesim.Config{
		Version:     version,
		KVTokens:    int64(envInt("FAKEVLLM_KV_TOKENS", 476016)),
		ModelMaxLen: maxLen,
		Fail:        os.Getenv("FAKEVLLM_FAIL"),
		CrashAfter:  envInt("FAKEVLLM_CRASH_AFTER", 0),
		PID:         os.Getpid(),
	}
	script := enginesim.Run(cfg, s, port)

	ignoreTerm := os.Getenv("FAKEVLLM_IGNORE_TERM") == "1"
	term := make(chan os.Signal, 1)
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	} else {
		signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	}
	var kid *exec.Cmd
	if os.Getenv("FAKEVLLM_CHILD") == "1" && len(script.Lines) > 0 {
		kid = startChild()
	}
	stop := func(code int) int {
		if kid != nil {
			kid.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { kid.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				kid.Process.Kill()
				<-done
			}
		}
		return code
	}

	loadDelay := envDuration("FAKEVLLM_LOAD_DELAY")
	lineDelay := envDuration("FAKEVLLM_LINE_DELAY")
	split := os.Getenv("FAKEVLLM_SPLIT") == "1"
	noReadyLine := os.Getenv("FAKEVLLM_NO_READY_LINE") == "1"
	for _, l := range script.Lines {
		if noReadyLine && script.Ready && strings.Contains(l.Text, "INFO:  ") {
			continue
		}
		select {
		case <-term:
			fmt.Println("INFO:     Shutting down")
			return stop(0)
		default:
		}
		out := os.Stdout
		if l.Err {
			out = os.Stderr
		}
		write(out, l.Text+"\n", split)
		if l.Loading && loadDelay > 0 {
			if sleepOrTerm(loadDelay, term) {
				return stop(0)
			}
		}
		if lineDelay > 0 && sleepOrTerm(lineDelay, term) {
			return stop(0)
		}
	}
	switch {
	case script.Hang:
		<-term
		return stop(0)
	case !script.Ready:
		return stop(script.ExitCode)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): address already in use\n", port)
		return stop(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	go http.Serve(l, mux)
	<-term
	fmt.Println("INFO:     Shutting down")
	l.Close()
	return stop(0)
}

// write prints text, in pieces with pauses when split is set: the pipe
// reader then sees lines cut anywhere.
func write(out *os.File, text string, split bool) {
	if !split {
		out.WriteString(text)
		return
	}
	for len(text) > 0 {
		n := min(len(text), 7)
		out.WriteString(text[:n])
		text = text[n:]
		time.Sleep(200 * time.Microsecond)
	}
}

func sleepOrTerm(d time.Duration, term <-chan os.Signal) bool {
	select {
	case <-time.After(d):
		return false
	case <-term:
		return true
	}
}

// startChild starts an "engine core" in the same process group.
func startChild() *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "FAKEVLLM_ROLE=child")
	if err := cmd.Start(); err != nil {
		return nil
	}
	return cmd
}

// child idles like an engine core until it is stopped.
func child() {
	recordPID()
	if os.Getenv("FAKEVLLM_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		select {}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	<-term
}

func recordPID() {
	if f := os.Getenv("FAKEVLLM_PIDFILE"); f != "" {
		appendLine(f, fmt.Sprintf("%d %d", os.Getpid(), syscall.Getpgrp()))
	}
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(line + "\n")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}
