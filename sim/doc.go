// Package sim is a discrete-event simulation of vLLM V1's engine: the FCFS
// scheduler with continuous batching, a per-step token budget with chunked
// prefill, max-num-seqs, a paged KV-cache pool whose blocks are given to
// requests as they grow, preemption of the newest running request with
// recompute, no admission in a step that preempted, prefix caching and
// sliding-window groups. The rules are those of docs/vllm-scheduler.md
// (vLLM's vllm/v1/core/sched/scheduler.py and vllm/v1/core/); the pool's
// size comes from memory.Plan.
//
// The Engine is incremental (Add requests, Step, read Gauges) so that a
// real-time server can drive it; Run drives it over a stream of requests
// in bounded memory, with the clients (open or closed loop) and vLLM's API
// server (FrontEnd, a CPU its requests share) in front of it, and reports
// what the clients see; RunFleet does the same for N replicas behind a
// router, with an autoscaler (Scaler, HPA) if asked. A step's duration comes from a StepTimer: a fixed
// time, or the Roofline model with a Calibration fitted on published
// serving runs (CalibrationFor; README.md). The package does no I/O.
//
// Decisions where vLLM's behaviour is wider than the model:
//   - A request needs room for one output token: a prompt of max-model-len
//     tokens or more is rejected, and the output is cut to max-model-len
//     minus the prompt (vLLM stops a request at max-model-len). A request
//     whose whole length can never fit the pool is rejected too: vLLM would
//     preempt it forever.
//   - An output of 0 tokens counts as 1: every request samples one token.
//   - Prefix caching is modelled for pools of one KV-cache group (all
//     full-attention or MLA layers). With sliding-window or linear groups
//     blocks are still given and freed per group, but no cache hits are
//     counted (vLLM's hybrid hit search is not modelled).
//   - Blocks are hashed by (shared prefix id, block index) for the blocks
//     of a declared shared prefix, and by (request, block index) after it,
//     so a preempted request finds its own freed blocks if nobody evicted
//     them, as in vLLM.
package sim

// StandInField is the field a simulated engine's /v1/models entries carry
// (true) when `headroom simulate --serve` stands in for vLLM: loadtest
// reads it, and never writes a step calibration from a stand-in's steps,
// which would calibrate the GPU by the simulator's own clock.
const StandInField = "headroom_simulated"
