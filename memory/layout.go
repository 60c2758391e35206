package memory

import (
	"fmt"

	"headroom.dev/headroom/model"
	"headroom.dev/headroom/vllm"
)

// DefaultGPUsPerNode is the node size assumed when nothing names one: the
// eight-GPU servers multi-node serving runs on (HGX/DGX H100 and A100,
// p4d/p5.48xlarge, Standard_ND96*, a3-highgpu-8g all hold eight).
const DefaultGPUsPerNode = 8

// Layout is how vLLM's multi-node guide (docs "Distributed inference and
// serving": "the tensor parallel size is the number of GPUs in each node,
// and the pipeline parallel size is the number of nodes") shards a model
// over gpus GPUs on nodes of perNode: tensor parallelism inside a node,
// where its all-reduce of every layer runs over NVLink, and pipeline
// parallelism across nodes, which sends one activation per stage over the
// slower network. Within one node it is tensor parallelism alone. ok is
// false when the GPUs do not fill whole nodes or vLLM cannot shard s's
// attention over the tensor-parallel size (TPShards). perNode <= 0 means
// DefaultGPUsPerNode.
func Layout(gpus, perNode int, s model.Spec) (tp, pp int, ok bool) {
	if perNode <= 0 {
		perNode = DefaultGPUsPerNode
	}
	if gpus <= 0 || s.Heads <= 0 {
		return 0, 0, false
	}
	tp, pp = gpus, 1
	if gpus > perNode {
		if gpus%perNode != 0 {
			return 0, 0, false
		}
		tp, pp = perNode, gpus/perNode
	}
	return tp, pp, TPShards(s, tp)
}

// FewestShards plans in at each tensor-parallel size from 1 to one node
// of GPUs (DefaultGPUsPerNode, where the all-reduce of every layer stays
// on the node's links) that vLLM shards the model over (TPShards), on the
// GPUs that size needs, and returns the smallest that serves the
// context; when none does, the one that starts with the longest context,
// else the largest tried (the closest to fitting). A
// --tensor-parallel-size the user set is planned alone.
func FewestShards(in Input) (Budget, error) {
	sizes := []int{max(in.Settings.TensorParallelSize, 1)}
	if !in.Settings.Set[vllm.FlagTensorParallelSize] {
		sizes = sizes[:0]
		for tp := 1; tp <= DefaultGPUsPerNode; tp++ {
			if TPShards(in.Model, tp) {
				sizes = append(sizes, tp)
			}
		}
		if len(sizes) == 0 {
			sizes = []int{1}
		}
	}
	var best Budget
	for i, tp := range sizes {
		at := in
		at.Settings.TensorParallelSize = tp
		b, err := Plan(at)
		if err != nil {
			return Budget{}, err
		}
		if i == 0 || b.Fits || b.MaxFitLen > best.MaxFitLen || (best.MaxFitLen == 0 && b.MaxFitLen == 0) {
			best = b
		}
		if b.Fits {
			break
		}
	}
	return best, nil
}

// TPShards reports whether vLLM shards s's attention over tp GPUs: tp
// divides the attention heads (ModelConfig.verify_with_parallel_config
// refuses the rest), and the key/value heads either divide among the
// ranks or are replicated a whole number of times on them
// (QKVParallelLinear: divide(total_num_kv_heads, tp) below tp,
// divide(tp, total_num_kv_heads) from it, each asserting divisibility as
// the weights load). phi-4 (40 heads, 10 KV heads) passes the first at
// tp 4 and fails the second.
func TPShards(s model.Spec, tp int) bool {
	if tp <= 0 || s.Heads <= 0 || s.Heads%tp != 0 {
		return false
	}
	kv := s.KVHeads
	return kv <= 0 || kv%tp == 0 || tp%kv == 0
}

// gpusPerNode is in's node size, DefaultGPUsPerNode when it names none.
func (in Input) gpusPerNode() int {
	if in.GPUsPerNode > 0 {
		return in.GPUsPerNode
	}
	return DefaultGPUsPerNode
}

// LayoutFlags is the advice to shard with tp × pp: "set
// --tensor-parallel-size 8 --pipeline-parallel-size 2" (pp left out when 1).
func LayoutFlags(tp, pp int) string {
	if pp > 1 {
		return fmt.Sprintf("set --tensor-parallel-size %d --pipeline-parallel-size %d", tp, pp)
	}
	return fmt.Sprintf("set --tensor-parallel-size %d", tp)
}
