// Package doctor names the cause of a vLLM out-of-memory failure from what
// an operator already has, and says what to change, with values computed by
// the memory planner.
//
// Evidence is recognised by content, never by file name: PyTorch's CUDA
// out-of-memory message, vLLM start-up and runtime logs (read with the
// vllm package's line recognisers; the Python literals of the settings
// lines and Python's traceback frames are read here), nvidia-smi
// output (the default screen, --query-gpu CSV, dmon; read by telemetry),
// Prometheus text from vLLM's /metrics (telemetry, which parses it with
// prometheus/common/expfmt), request logs (traffic), and Kubernetes
// manifests, `kubectl get -o yaml/json` and `kubectl describe` output.
//
// Diagnose turns the evidence into findings that follow the root-cause
// matrix operators use (weights too large, KV-cache pressure, a max-model-len
// that does not fit, a utilization at the edge, memory outside vLLM's
// budget, fragmentation, other processes, tensor-parallel misuse, the
// pod's host memory and /dev/shm, Kubernetes scheduling, version drift;
// Codes lists them), each with the evidence lines it
// rests on, a confidence, and remedies ranked with concrete values from
// memory.Plan and memory.Recommend; and names the dead ends the evidence
// invites.
//
// Confidence is a number in [0, 1] with a label: every signal that points
// at a cause carries a weight (an error text that names the cause 0.9, a
// measured number past a threshold 0.6-0.8, circumstantial signs 0.3-0.5),
// and a finding's confidence combines its signals as independent evidence,
// 1 − Π(1 − wᵢ), capped at 0.99. Labels: high ≥ 0.75, medium ≥ 0.45, low
// below.
package doctor
