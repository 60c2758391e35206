// Package host plans the host side of a vLLM server: the memory its pod
// holds beside the GPUs (process baselines, request buffers, weights on
// their way to the GPU, weights and KV cache offloaded to the CPU, LoRA
// adapters and multimodal processor caches) and the /dev/shm it writes
// (the engine's message-queue rings, NCCL, the offloaded KV region). A
// pod whose memory limit is below the plan is OOMKilled by its cgroup, a
// restart loop that looks, to its owner, like any other crash; one whose
// /dev/shm is the container's default 64 MiB fails at tensor parallel.
//
// The host plan stands on the GPU plan (memory.Budget): the settings with
// vLLM's defaults filled in, the context length it resolved, the weights
// per rank. It lives beside memory, not in it, because memory is the GPU
// budget calculator on the core floor that every command runs, and the
// host plan is one more reader of it (docs/architecture.md).
//
// Every term says how it is known (Basis): a mechanism read from vLLM's or
// PyTorch's code, a report with its numbers (a vLLM issue or pull
// request), or an assumption where neither gives a number. The sources
// are in README.md; the tests check each factor against the reports'
// numbers (testdata/).
package host
