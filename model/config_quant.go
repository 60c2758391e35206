package model

import (
	"fmt"
	"sort"
	"strings"
)

// parseQuant reads quantization_config. Unknown methods keep their name
// with Bits 0 so the planner can say it does not know their size.
func parseQuant(m map[string]any) (*Quantization, error) {
	q := sub(m, "quantization_config.")
	method, _, err := q.str("quant_method")
	if err != nil {
		return nil, err
	}
	method = strings.ToLower(method)
	if method == "" {
		if q.has("load_in_4bit") || q.has("load_in_8bit") {
			method = "bitsandbytes"
		} else {
			method = "unknown"
		}
	}
	out := &Quantization{Method: method}
	bits := func(def int, keys ...string) error {
		b, ok, err := q.int(1, 16, keys...)
		if err != nil {
			return err
		}
		if !ok {
			b = def
		}
		out.Bits = b
		return nil
	}
	// group reads a group size; -1 (per channel) becomes 0.
	group := func(keys ...string) error {
		g, _, err := q.int(-1, maxWidth, keys...)
		if g < 0 {
			g = 0
		}
		out.GroupSize = g
		return err
	}
	switch method {
	case "fp8", "fbgemm_fp8":
		// Block-wise FP8 (DeepSeek-V3: weight_block_size [128, 128]) keeps one
		// scale per block: GroupSize is the block's element count, 16384.
		out.Bits, out.Float, out.Symmetric = 8, true, true
		l, name, ok, err := q.list("weight_block_size")
		if err != nil {
			return nil, err
		}
		if ok {
			if out.GroupSize, err = blockElems(l, name); err != nil {
				return nil, err
			}
		}
	case "awq":
		if err := bits(4, "bits", "w_bit"); err != nil {
			return nil, err
		}
		if err := group("group_size", "q_group_size"); err != nil {
			return nil, err
		}
		zp, ok, err := q.bool("zero_point")
		if err != nil {
			return nil, err
		}
		out.Symmetric = ok && !zp // AutoAWQ's default is zero_point true
	case "gptq", "auto-round", "autoround":
		if err := bits(4, "bits"); err != nil {
			return nil, err
		}
		if err := group("group_size"); err != nil {
			return nil, err
		}
		act, _, err := q.bool("desc_act")
		if err != nil {
			return nil, err
		}
		sym, ok, err := q.bool("sym")
		if err != nil {
			return nil, err
		}
		out.ActOrder, out.Symmetric = act, sym || !ok
	case "compressed-tensors":
		if err := compressedTensors(q, out); err != nil {
			return nil, err
		}
	case "mxfp4":
		// OCP MX: 4-bit e2m1 values, one e8m0 scale per 32.
		out.Bits, out.Float, out.GroupSize, out.Symmetric = 4, true, 32, true
	case "bitsandbytes":
		b4, _, err := q.bool("load_in_4bit")
		if err != nil {
			return nil, err
		}
		b8, _, err := q.bool("load_in_8bit")
		if err != nil {
			return nil, err
		}
		switch {
		case b4:
			// bitsandbytes 4-bit quantizes in blocks of 64 (its default
			// blocksize, not stored in the config).
			t, _, err := q.str("bnb_4bit_quant_type")
			if err != nil {
				return nil, err
			}
			out.Bits, out.GroupSize, out.Symmetric, out.Float = 4, 64, true, t == "fp4"
		case b8:
			out.Bits, out.Symmetric = 8, true
		}
	case "modelopt":
		// NVIDIA ModelOpt exports quant_algo at the top or under "quantization".
		algo, _, err := q.str("quant_algo")
		if err != nil {
			return nil, err
		}
		if algo == "" {
			if inner, ok, err := q.obj("quantization"); err != nil {
				return nil, err
			} else if ok {
				if algo, _, err = sub(inner, "quantization_config.quantization.").str("quant_algo"); err != nil {
					return nil, err
				}
			}
		}
		switch strings.ToUpper(algo) {
		case "FP8":
			out.Bits, out.Float, out.Symmetric = 8, true, true
		case "NVFP4":
			// vLLM names this method modelopt_fp4; NVFP4 scales every 16 values.
			out.Method, out.Bits, out.Float, out.Symmetric, out.GroupSize = "modelopt_fp4", 4, true, true, 16
			if g, ok, err := q.int(1, maxWidth, "group_size"); err != nil {
				return nil, err
			} else if ok {
				out.GroupSize = g
			}
		}
	}
	return out, nil
}

// blockElems multiplies a block shape such as [128, 128].
func blockElems(l []any, name string) (int, error) {
	if len(l) == 0 || len(l) > 4 {
		return 0, fmt.Errorf("config.json: %s has %d entries, want a block shape like [128, 128]", name, len(l))
	}
	n := 1
	for i, v := range l {
		x, err := toInt(v, fmt.Sprintf("%s[%d]", name, i), 1, 1<<16)
		if err != nil {
			return 0, err
		}
		n *= x
	}
	if n > maxWidth {
		return 0, fmt.Errorf("config.json: %s blocks hold %d weights, more than %d: check the file", name, n, maxWidth)
	}
	return n, nil
}

// compressedTensors reads the weight scheme of a compressed-tensors config
// (llm-compressor). With several config_groups the first by name that
// quantizes weights is taken; mixed-precision checkpoints are rare and the
// planner's weight bytes come from safetensors when it has them.
func compressedTensors(q *conf, out *Quantization) error {
	f, _, err := q.str("format")
	if err != nil {
		return err
	}
	out.Format = f
	groups, ok, err := q.obj("config_groups")
	if err != nil || !ok {
		return err
	}
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		g, isObj := groups[name].(map[string]any)
		if !isObj {
			return fmt.Errorf("config.json: quantization_config.config_groups.%s is %s, want an object", name, describe(groups[name]))
		}
		w, ok, err := sub(g, "").obj("weights")
		if err != nil {
			return fmt.Errorf("config.json: quantization_config.config_groups.%s.weights is not an object", name)
		}
		if !ok {
			continue
		}
		wc := sub(w, "quantization_config.config_groups."+name+".weights.")
		if out.Bits, _, err = wc.int(1, 16, "num_bits"); err != nil {
			return err
		}
		typ, _, err := wc.str("type")
		if err != nil {
			return err
		}
		out.Float = typ == "float"
		sym, ok, err := wc.bool("symmetric")
		if err != nil {
			return err
		}
		out.Symmetric = sym || !ok
		strategy, _, err := wc.str("strategy")
		if err != nil {
			return err
		}
		switch strategy {
		case "group", "tensor_group":
			if out.GroupSize, _, err = wc.int(1, maxWidth, "group_size"); err != nil {
				return err
			}
		case "block":
			l, name, ok, err := wc.list("block_structure")
			if err != nil {
				return err
			}
			if ok {
				if out.GroupSize, err = blockElems(l, name); err != nil {
					return err
				}
			}
		}
		// vLLM CompressedTensorsWNA16 stores g_idx only for actorder
		// "group"; early llm-compressor releases wrote a boolean.
		switch a := w["actorder"].(type) {
		case string:
			out.ActOrder = a == "group"
		case bool:
			out.ActOrder = a
		}
		return nil
	}
	return nil
}
