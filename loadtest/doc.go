// Package loadtest sends traffic to an OpenAI-compatible server (vLLM or
// any other) and measures it the way `vllm bench serve` does, while it
// reads the server's /metrics: KV-cache usage, running and waiting
// requests, preemptions, and GPU memory where the GPUs are local.
//
// The parts are separate so each can be tested on its own:
//
//   - a Schedule says what to send and when: open loop (Poisson or
//     constant arrivals at a rate, bursts), or a replayed request log with
//     its own timestamps and token sizes; a closed loop takes the same
//     items and ignores their times;
//   - the client (Client) builds one streaming request, reads the SSE
//     stream (SSEReader) and its chunks (ParseChunk), and times each
//     content chunk;
//   - Stats turns per-request timings into bounded histograms and the
//     report; Series keeps the metric time series bounded.
//
// Definitions, from vLLM's benchmarks/lib/endpoint_request_func.py and
// benchmarks/serve.py (vLLM 0.11-0.13): TTFT is the time from sending a
// request to its first chunk carrying content (a chat stream's first
// role-only chunk is not content); ITL is the gap between consecutive
// content chunks; E2E is the time to the last content chunk; TPOT is
// (E2E - TTFT) / (output tokens - 1) for requests with more than one output
// token, the output tokens being the server's usage.completion_tokens.
// Throughputs divide by the run's duration, from the first send to the
// last completion. Goodput counts the requests that meet every per-request
// SLO bound (TTFT, TPOT, ITL, E2E), per second.
//
// Clocks and HTTP clients are passed in.
package loadtest
