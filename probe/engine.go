package probe

import (
	"context"
	"time"

	"headroom.dev/headroom/vllm"
)

// Engine starts a vLLM engine, one launch per call. Process is the real
// one; tests and the benchmark drive a simulated one.
type Engine interface {
	// Version reports the engine's release (`vllm --version`).
	Version(ctx context.Context) (vllm.Version, error)
	// Launch starts the engine with the settings, waits until it is ready
	// to serve, fails or runs out of time, stops it, and waits until its
	// GPU memory is released. The error is for a launch that could not be
	// made or was interrupted (ctx); a failed start-up is an Attempt with
	// Outcome Failed. Nothing it started may outlive the call.
	Launch(ctx context.Context, l Launch) (Attempt, error)
}

// Launch is one start of the engine.
type Launch struct {
	// Settings are the engine flags; MaxModelLen is the candidate
	// (vllm.AutoMaxModelLen for `--max-model-len auto`).
	Settings vllm.Settings
	// Timeout bounds the start-up: loading, profiling, graph capture.
	Timeout time.Duration
	// Observe, when set, is told of each phase change and each recognised
	// log line, with what the log said so far. Calls may come from several
	// goroutines, one at a time.
	Observe func(Phase, vllm.StartupReport)
}

// Phase is where a launch is.
type Phase string

// The phases of a launch, in order.
const (
	PhaseLaunching Phase = "launching"
	PhaseLoading   Phase = "loading"
	PhaseProfiling Phase = "profiling"
	PhaseReady     Phase = "ready"
	PhaseStopping  Phase = "stopping"
	// PhaseReleasing: waiting until the GPU memory is back to where it was
	// before the launch.
	PhaseReleasing Phase = "releasing"
)

// Outcome is how a launch ended.
type Outcome string

// Launch outcomes.
const (
	// Started: the server answered (log line or /health); it was stopped.
	Started Outcome = "started"
	// Failed: the engine exited before it was ready.
	Failed Outcome = "failed"
	// TimedOut: not ready within the launch timeout; it was stopped.
	TimedOut Outcome = "timed_out"
	// Interrupted: the probe was cancelled (Ctrl-C); it was stopped.
	Interrupted Outcome = "interrupted"
)

// Attempt is what one launch did and said.
type Attempt struct {
	// MaxModelLen is the length launched with (vllm.AutoMaxModelLen: auto).
	MaxModelLen int `json:"max_model_len"`
	// Args is the command line run.
	Args    []string `json:"args"`
	Outcome Outcome  `json:"outcome"`
	// Reason says in one line why a launch failed or timed out.
	Reason string `json:"reason,omitempty"`
	// Report is what the log said: the numbers read.
	Report vllm.StartupReport `json:"numbers"`
	// ExitCode is the exit status when the engine exited by itself, -1
	// when it was stopped or killed.
	ExitCode int `json:"exit_code"`
	// Tail holds the last lines of output, for errors.
	Tail []string `json:"-"`
	// Duration is the wall time of the launch, stop and release included.
	Duration time.Duration `json:"-"`
	// Seconds is Duration in seconds, for output.
	Seconds float64 `json:"seconds"`
	// Notes are things worth saying about the launch (memory not released).
	Notes []string `json:"notes,omitempty"`
}
