package vllm

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Value parsers for the flags Settings holds. Each error is one line naming
// the flag as the user wrote it, the value, and what is expected.

func parseText(flag, raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", fmt.Errorf("%s needs a value", flag)
	}
	return raw, nil
}

// varHint explains a value that is an unexpanded variable.
func varHint(flag, raw string) error {
	if strings.Contains(raw, "$") {
		return fmt.Errorf("%s: %q is a shell or Kubernetes variable, not a value: put in the value it stands for", flag, clip(raw))
	}
	return nil
}

// parseCountOrZero is parseCount where 0 is a value too (vLLM's default
// for a count of extras).
func parseCountOrZero(flag, raw string) (int, error) {
	if strings.TrimSpace(raw) == "0" {
		return 0, nil
	}
	return parseCount(flag, raw)
}

func parseCount(flag, raw string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil {
		if e := varHint(flag, raw); e != nil {
			return 0, e
		}
		return 0, fmt.Errorf("%s: %q is not a whole number; give a positive integer such as 2", flag, clip(raw))
	}
	if n < 1 {
		return 0, fmt.Errorf("%s: %d must be 1 or more", flag, n)
	}
	return n, nil
}

// MaxNumSeqsBound is the most --max-num-seqs headroom plans: vLLM sets no
// bound, but it sizes per-sequence buffers (block tables, sampler
// tensors, the host's request buffers) by it, and no GPU serves a million
// sequences at once, so a larger value is a typo, not a plan.
const MaxNumSeqsBound = 1 << 20

func parseSeqs(flag, raw string) (int, error) {
	n, err := parseCount(flag, raw)
	if err == nil && n > MaxNumSeqsBound {
		return 0, fmt.Errorf("%s: %d sequences at once is past the %d headroom plans (vLLM sizes buffers by it and no GPU runs that many); give a number such as 256", flag, n, MaxNumSeqsBound)
	}
	return n, err
}

// parseChoiceInt reads a whole number that must be one of choices, as
// vLLM's Literal-typed config fields accept (argparse's "invalid choice").
func parseChoiceInt(flag, raw string, choices ...int) (int, error) {
	n, err := parseCount(flag, raw)
	if err != nil || slices.Contains(choices, n) {
		return n, err
	}
	s := make([]string, len(choices))
	for i, c := range choices {
		s[i] = strconv.Itoa(c)
	}
	return 0, fmt.Errorf("%s: vLLM accepts only %s, not %d", flag, strings.Join(s, ", "), n)
}

// BlockSizes are the --block-size values vLLM's CacheConfig accepts
// (BlockSize, a Literal; docs/vllm-memory.md §3.2); a hybrid model's
// larger attention block is vLLM's own choice, never the flag's.
var BlockSizes = []int{1, 8, 16, 32, 64, 128, 256}

// LoRARanks are the --max-lora-rank values vLLM's LoRAConfig accepts
// (MaxLoRARanks, a Literal).
var LoRARanks = []int{1, 8, 16, 32, 64, 128, 256, 320, 512}

// humanInt reads an integer the way vLLM's human_readable_int does
// (vllm/engine/arg_utils.py): a plain integer, or a number with a suffix
// where lowercase k/m/g/t multiply by powers of 1000 (decimals allowed:
// 25.6k = 25600) and uppercase K/M/G/T by powers of 1024 (whole numbers
// only). So "32k" is 32000 tokens and "32K" is 32768, exactly as vLLM reads
// them; we do not second-guess what the user meant.
func humanInt(raw string) (int64, bool) {
	v := strings.TrimSpace(raw)
	if v == "" {
		return 0, false
	}
	suffix := v[len(v)-1]
	var mult float64
	binary := false
	switch suffix {
	case 'k':
		mult = 1e3
	case 'm':
		mult = 1e6
	case 'g':
		mult = 1e9
	case 't':
		mult = 1e12
	case 'K':
		mult, binary = 1<<10, true
	case 'M':
		mult, binary = 1<<20, true
	case 'G':
		mult, binary = 1<<30, true
	case 'T':
		mult, binary = 1<<40, true
	}
	if mult == 0 {
		// Python's int() also takes a sign and digit-separating underscores.
		if strings.Contains(v, "_") && (strings.Contains(v, "__") || strings.HasPrefix(v, "_") || strings.HasSuffix(v, "_")) {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
		return n, err == nil
	}
	num := v[:len(v)-1]
	if !decimalNumber.MatchString(num) {
		return 0, false
	}
	if binary {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || float64(n)*mult >= math.MaxInt64 {
			return 0, false
		}
		return n * int64(mult), true
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*mult >= math.MaxInt64 {
		return 0, false
	}
	return int64(f * mult), true // vLLM truncates: int(float(number) * mult)
}

// HumanInt is humanInt for the other readers of token counts (the
// workload's lengths), so that "2k" means one thing in every flag.
func HumanInt(raw string) (int64, bool) { return humanInt(raw) }

// HumanIntHelp says how HumanInt reads a suffix, for error messages.
const HumanIntHelp = humanIntHelp

var decimalNumber = regexp.MustCompile(`^\d+(\.\d+)?$`)

const humanIntHelp = "(k = 1000, K = 1024, so 8k = 8000 and 8K = 8192)"

func parseTokens(flag, raw string) (int, error) {
	n, ok := humanInt(raw)
	if !ok || n > math.MaxInt32 {
		if e := varHint(flag, raw); e != nil {
			return 0, e
		}
		return 0, fmt.Errorf("%s: %q is not a number of tokens; give an integer such as 8192 or 8K %s", flag, clip(raw), humanIntHelp)
	}
	if n < 1 {
		return 0, fmt.Errorf("%s: %d must be 1 or more", flag, n)
	}
	return int(n), nil
}

func parseMaxModelLen(flag, raw string) (int, error) {
	v := strings.TrimSpace(raw)
	if strings.EqualFold(v, "auto") || v == "-1" {
		return AutoMaxModelLen, nil
	}
	n, ok := humanInt(v)
	if !ok || n > math.MaxInt32 {
		if e := varHint(flag, raw); e != nil {
			return 0, e
		}
		return 0, fmt.Errorf("%s: %q is not a number or 'auto'; give tokens such as 32768 or 32K %s, or 'auto'", flag, clip(raw), humanIntHelp)
	}
	if n < 1 {
		return 0, fmt.Errorf("%s: %d is not a context length; give a positive number of tokens, or 'auto' (-1)", flag, n)
	}
	return int(n), nil
}

func parseBytes(flag, raw string) (int64, error) {
	n, ok := humanInt(raw)
	if !ok {
		if e := varHint(flag, raw); e != nil {
			return 0, e
		}
		return 0, fmt.Errorf("%s: %q is not a byte count; give an integer such as 21474836480 or 20G (G = 2^30, g = 10^9)", flag, clip(raw))
	}
	if n < 1 {
		return 0, fmt.Errorf("%s: %d must be a positive number of bytes", flag, n)
	}
	return n, nil
}

func parseFloat(flag, raw, want string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		if e := varHint(flag, raw); e != nil {
			return 0, e
		}
		return 0, fmt.Errorf("%s: %q is not a number; give %s", flag, clip(raw), want)
	}
	return f, nil
}

func parseFraction(flag, raw string) (float64, error) {
	const want = "a fraction of GPU memory in (0, 1] such as 0.9"
	f, err := parseFloat(flag, raw, want)
	if err != nil {
		return 0, err
	}
	if f <= 0 || f > 1 {
		return 0, fmt.Errorf("%s: %s is outside (0, 1]; give %s", flag, fmtFloat(f), want)
	}
	return f, nil
}

func parseGiB(flag, raw string) (float64, error) {
	const want = "GiB per GPU, 0 or more, such as 4"
	f, err := parseFloat(flag, raw, want)
	if err != nil {
		return 0, err
	}
	if f < 0 {
		return 0, fmt.Errorf("%s: %s is negative; give %s", flag, fmtFloat(f), want)
	}
	return f, nil
}

// dtypeChoices are the values of --dtype (vllm/config/model.py, ModelDType).
var dtypeChoices = []string{"auto", "half", "float16", "bfloat16", "float", "float32"}

func parseDtypeFlag(flag, raw string) (string, error) {
	for _, c := range dtypeChoices {
		if raw == c {
			return raw, nil
		}
	}
	return "", fmt.Errorf("%s: %q is not one of %s", flag, clip(raw), strings.Join(dtypeChoices, ", "))
}

func parseBool(flag, raw string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is not true or false", flag, clip(raw))
}

// itoa renders a count for a flag; "" (not rendered) when zero.
func itoa(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// ftoa renders a float for a flag, as short as round-trips; "" when zero.
func ftoa(f float64) string {
	if f == 0 {
		return ""
	}
	return fmtFloat(f)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
