package vllm

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Flag names (vLLM's long option names without the leading dashes) of the
// settings Settings holds; they are also the keys of Settings.Set.
const (
	FlagModel                   = "model"
	FlagTensorParallelSize      = "tensor-parallel-size"
	FlagPipelineParallelSize    = "pipeline-parallel-size"
	FlagDataParallelSize        = "data-parallel-size"
	FlagGPUMemoryUtilization    = "gpu-memory-utilization"
	FlagMaxModelLen             = "max-model-len"
	FlagMaxNumSeqs              = "max-num-seqs"
	FlagMaxNumBatchedTokens     = "max-num-batched-tokens"
	FlagDtype                   = "dtype"
	FlagQuantization            = "quantization"
	FlagKVCacheDtype            = "kv-cache-dtype"
	FlagBlockSize               = "block-size"
	FlagEnforceEager            = "enforce-eager"
	FlagCPUOffloadGB            = "cpu-offload-gb"
	FlagMaxCudagraphCaptureSize = "max-cudagraph-capture-size"
	// FlagNumGPUBlocksOverride replaces the KV blocks vLLM measured (its
	// profiling tests use it); FlagLongPrefillTokenThreshold caps the
	// prompt tokens one request may schedule in a step when set. Both from
	// vllm/engine/arg_utils.py; the scheduler reads them (docs/vllm-scheduler.md).
	FlagNumGPUBlocksOverride      = "num-gpu-blocks-override"
	FlagLongPrefillTokenThreshold = "long-prefill-token-threshold"
	// The negative forms of the BooleanOptionalAction flags for prefix
	// caching and chunked prefill; they stay in Extra and are read from Set.
	FlagNoPrefixCaching  = "no-enable-prefix-caching"
	FlagNoChunkedPrefill = "no-enable-chunked-prefill"
	// FlagAsyncScheduling and its negative form overlap the engine's CPU
	// work with the forward pass (AsyncScheduling); kept in Extra.
	FlagAsyncScheduling   = "async-scheduling"
	FlagNoAsyncScheduling = "no-async-scheduling"
	// FlagKVCacheMemory is the flag of EngineArgs.kv_cache_memory_bytes
	// (PR #21489). vLLM's own start-up hint spells it --kv-cache-memory,
	// which argparse accepts as an unambiguous prefix; both spellings are
	// read, and this full name is the one rendered.
	FlagKVCacheMemory = "kv-cache-memory-bytes"
	// FlagStreamInterval is SchedulerConfig.stream_interval: the API
	// server's output processor sends a request's tokens every N of them
	// (its first token and its last at once); 1, the default, every token.
	FlagStreamInterval = "stream-interval"
)

// engineFlag is one flag parsed into a Settings field.
type engineFlag struct {
	name   string
	isBool bool
	// set parses raw (spelled is the flag as the user wrote it, for errors).
	set func(s *Settings, spelled, raw string) error
	// get renders the field, "" when it is zero (not given).
	get func(s Settings) string
	// jsonValue: the value is a JSON object (a KAITO map gives it).
	jsonValue bool
}

// engineFlags lists the flags Settings holds, in rendering order, the
// features' (featureFlags) and then the host's (hostFlags) last. Read-only.
var engineFlags = append([]engineFlag{
	{name: FlagTensorParallelSize,
		set: func(s *Settings, f, r string) (err error) { s.TensorParallelSize, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.TensorParallelSize)) }},
	{name: FlagPipelineParallelSize,
		set: func(s *Settings, f, r string) (err error) { s.PipelineParallelSize, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.PipelineParallelSize)) }},
	{name: FlagDataParallelSize,
		set: func(s *Settings, f, r string) (err error) { s.DataParallelSize, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.DataParallelSize)) }},
	{name: FlagGPUMemoryUtilization,
		set: func(s *Settings, f, r string) (err error) { s.GPUMemoryUtilization, err = parseFraction(f, r); return },
		get: func(s Settings) string { return ftoa(s.GPUMemoryUtilization) }},
	{name: FlagMaxModelLen,
		set: func(s *Settings, f, r string) (err error) { s.MaxModelLen, err = parseMaxModelLen(f, r); return },
		get: func(s Settings) string {
			if s.MaxModelLen == AutoMaxModelLen {
				return "auto"
			}
			return itoa(int64(s.MaxModelLen))
		}},
	{name: FlagMaxNumSeqs,
		set: func(s *Settings, f, r string) (err error) { s.MaxNumSeqs, err = parseSeqs(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxNumSeqs)) }},
	{name: FlagMaxNumBatchedTokens,
		set: func(s *Settings, f, r string) (err error) { s.MaxNumBatchedTokens, err = parseTokens(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxNumBatchedTokens)) }},
	{name: FlagDtype,
		set: func(s *Settings, f, r string) (err error) { s.Dtype, err = parseDtypeFlag(f, r); return },
		get: func(s Settings) string { return s.Dtype }},
	{name: FlagQuantization,
		set: func(s *Settings, f, r string) (err error) { s.Quantization, err = parseText(f, r); return },
		get: func(s Settings) string { return s.Quantization }},
	{name: FlagKVCacheDtype,
		set: func(s *Settings, f, r string) (err error) { s.KVCacheDtype, err = parseText(f, r); return },
		get: func(s Settings) string { return s.KVCacheDtype }},
	{name: FlagBlockSize,
		set: func(s *Settings, f, r string) (err error) {
			s.BlockSize, err = parseChoiceInt(f, r, BlockSizes...)
			return
		},
		get: func(s Settings) string { return itoa(int64(s.BlockSize)) }},
	{name: FlagEnforceEager, isBool: true,
		set: func(s *Settings, f, r string) (err error) { s.EnforceEager, err = parseBool(f, r); return },
		get: func(s Settings) string {
			if s.EnforceEager {
				return "true"
			}
			return ""
		}},
	{name: FlagKVCacheMemory,
		set: func(s *Settings, f, r string) (err error) { s.KVCacheMemoryBytes, err = parseBytes(f, r); return },
		get: func(s Settings) string { return itoa(s.KVCacheMemoryBytes) }},
	{name: FlagCPUOffloadGB,
		set: func(s *Settings, f, r string) (err error) { s.CPUOffloadGiB, err = parseGiB(f, r); return },
		get: func(s Settings) string { return ftoa(s.CPUOffloadGiB) }},
	{name: FlagMaxCudagraphCaptureSize,
		set: func(s *Settings, f, r string) (err error) { s.MaxCudagraphCaptureSize, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.MaxCudagraphCaptureSize)) }},
	{name: FlagNumGPUBlocksOverride,
		set: func(s *Settings, f, r string) (err error) { s.NumGPUBlocksOverride, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.NumGPUBlocksOverride)) }},
	{name: FlagLongPrefillTokenThreshold,
		set: func(s *Settings, f, r string) (err error) {
			// 0 is vLLM's default: no cap.
			if strings.TrimSpace(r) == "0" {
				s.LongPrefillTokenThreshold = 0
				return nil
			}
			s.LongPrefillTokenThreshold, err = parseTokens(f, r)
			return
		},
		get: func(s Settings) string { return itoa(int64(s.LongPrefillTokenThreshold)) }},
	{name: FlagStreamInterval,
		set: func(s *Settings, f, r string) (err error) { s.StreamInterval, err = parseCount(f, r); return },
		get: func(s Settings) string { return itoa(int64(s.StreamInterval)) }},
}, slices.Concat(featureFlags, hostFlags)...)

// shortAliases maps vLLM's one-dash short forms to the canonical flag name,
// from vllm/engine/arg_utils.py (`add_argument("--tensor-parallel-size",
// "-tp")` and so on). -O was the short form of --compilation-config (v0.7
// on; vLLM rewrites -O3 itself); in the newest releases -O is said to select
// an optimization level instead *(unverified)*. Either way the token is kept
// verbatim in Extra, so only the name recorded in Set depends on this. Other
// short forms (-dpl, -dcp ...) are kept verbatim and recorded under their
// own spelling. Read-only.
var shortAliases = map[string]string{
	"tp": FlagTensorParallelSize,
	"pp": FlagPipelineParallelSize,
	"dp": FlagDataParallelSize,
	// -dcp: vLLM's short form of --decode-context-parallel-size.
	"dcp": FlagDecodeContextParallelSize,
	"q":   FlagQuantization,
	"O":   "compilation-config",
	"h":   "help",
}

// longAliases maps other long spellings to the canonical flag name.
// --kv-cache-memory is what vLLM's own start-up hint prints; argparse takes
// it as an unambiguous prefix of --kv-cache-memory-bytes. Read-only.
var longAliases = map[string]string{
	"kv-cache-memory":           FlagKVCacheMemory,
	FlagDeviceMemoryUtilization: FlagGPUMemoryUtilization,
}

// attachedValueAliases are the one-letter options that take a value written
// right after them (-qfp8, -O3), as argparse allows for one-letter options.
var attachedValueAliases = map[string]bool{"q": true, "O": true}

// boolFlags are vLLM flags known to take no value (argparse store_true or
// BooleanOptionalAction, whose negative form --no-NAME is recognised too),
// from vllm/engine/arg_utils.py and vllm/entrypoints/openai/cli_args.py
// across releases; some exist only in some releases. A flag missing here is
// assumed to take a value when one follows it. Read-only.
var boolFlags = map[string]bool{
	"allow-credentials":                true,
	"async-scheduling":                 true,
	"calculate-kv-scales":              true,
	"disable-async-output-proc":        true,
	"disable-cascade-attn":             true,
	"disable-custom-all-reduce":        true,
	"disable-fastapi-docs":             true,
	"disable-frontend-multiprocessing": true,
	"disable-hybrid-kv-cache-manager":  true,
	"disable-log-requests":             true,
	"disable-log-stats":                true,
	"disable-mm-preprocessor-cache":    true,
	"disable-sliding-window":           true,
	"disable-uvicorn-access-log":       true,
	"enable-auto-tool-choice":          true,
	"enable-chunked-prefill":           true,
	"enable-batch-sharded-sampling":    true,
	"enable-dbo":                       true,
	"enable-eplb":                      true,
	"enable-expert-parallel":           true,
	"enable-force-include-usage":       true,
	"enable-log-outputs":               true,
	"enable-log-requests":              true,
	"enable-lora":                      true,
	"enable-lora-bias":                 true,
	"enable-prefix-caching":            true,
	"enable-prompt-embeds":             true,
	"enable-prompt-tokens-details":     true,
	"enable-reasoning":                 true,
	"enable-request-id-headers":        true,
	"enable-server-load-tracking":      true,
	"enable-sleep-mode":                true,
	"enable-ssl-refresh":               true,
	"enable-tokenizer-info-endpoint":   true,
	"enforce-eager":                    true,
	"fully-sharded-loras":              true,
	"headless":                         true,
	"help":                             true,
	"ray-workers-use-nsight":           true,
	"return-tokens-as-token-ids":       true,
	"skip-tokenizer-init":              true,
	"trust-remote-code":                true,
	"use-v2-block-manager":             true,
	"worker-use-ray":                   true,
}

// defaultOnBoolFlags are boolean flags that default to on in the V1 engine,
// so turning them off has to be written out as --no-NAME (FromMap with false).
var defaultOnBoolFlags = map[string]bool{
	"enable-prefix-caching":  true,
	"enable-chunked-prefill": true,
}

// multiValueFlags take one or more values (argparse nargs="+"). Read-only.
var multiValueFlags = map[string]bool{
	"served-model-name":       true,
	"lora-modules":            true,
	"prompt-adapters":         true,
	"cuda-graph-sizes":        true,
	"cudagraph-capture-sizes": true,
}

func lookupEngineFlag(name string) *engineFlag {
	for i := range engineFlags {
		if engineFlags[i].name == name {
			return &engineFlags[i]
		}
	}
	return nil
}

func isBoolFlag(name string) bool {
	return boolFlags[name] || (strings.HasPrefix(name, "no-") && boolFlags[name[3:]])
}

// negativeNumber is argparse's test for a token that looks like a negative
// number and is therefore a value, not an option.
var negativeNumber = regexp.MustCompile(`^-\d+$|^-\d*\.\d+$`)

// isFlag reports whether tok is an option rather than a value, by argparse's
// rules: it starts with "-", is longer than "-" and is not a negative number.
func isFlag(tok string) bool {
	return len(tok) >= 2 && tok[0] == '-' && !negativeNumber.MatchString(tok)
}

// option is one command-line option token taken apart.
type option struct {
	spelled  string // the flag as written, without any =value
	name     string // canonical name: dashes, aliases resolved
	base     string // name up to the first "." (--compilation-config.level)
	value    string
	hasValue bool // the value was attached (--x=v, -qfp8)
}

// splitOption reads an option token. vLLM's FlexibleArgumentParser turns
// underscores in long option names into dashes (--max_model_len), so the
// canonical name does too.
func splitOption(tok string) option {
	var o option
	if strings.HasPrefix(tok, "--") {
		key, val, has := strings.Cut(tok[2:], "=")
		o = option{spelled: "--" + key, name: strings.ReplaceAll(key, "_", "-"), value: val, hasValue: has}
		if a := longAliases[o.name]; a != "" {
			o.name = a
		}
	} else {
		body := tok[1:]
		key, val, has := strings.Cut(body, "=")
		switch {
		case shortAliases[body] != "":
			o = option{spelled: tok, name: shortAliases[body]}
		case shortAliases[key] != "":
			o = option{spelled: "-" + key, name: shortAliases[key], value: val, hasValue: has}
		case attachedValueAliases[body[:1]]:
			o = option{spelled: "-" + body[:1], name: shortAliases[body[:1]], value: body[1:], hasValue: true}
		default:
			o = option{spelled: "-" + key, name: key, value: val, hasValue: has}
		}
	}
	if o.name == "" {
		o.name = tok // "--=x": no name to normalise; record the token itself
	}
	o.base, _, _ = strings.Cut(o.name, ".")
	if o.base == "" {
		o.base = o.name // "-.5x": nothing before the dot
	}
	return o
}

// parser collects settings from options and positionals.
type parser struct {
	s        Settings
	set      map[string]bool
	model    string // from --model
	posModel string // positional
}

// engine applies an option Settings holds. It reports false for any other.
func (p *parser) engine(o option, raw string) (bool, error) {
	if o.name != o.base {
		return false, nil
	}
	if o.name == FlagModel {
		m, err := parseText(o.spelled, raw)
		p.model = m
		p.set[FlagModel] = true
		return true, err
	}
	if o.name == "no-"+FlagEnforceEager {
		if raw != "" {
			return true, fmt.Errorf("%s takes no value; write it alone, or --%s=%s", o.spelled, FlagEnforceEager, negateBool(raw))
		}
		p.s.EnforceEager = false
		p.set[FlagEnforceEager] = true
		return true, nil
	}
	f := lookupEngineFlag(o.name)
	if f == nil {
		return false, nil
	}
	p.set[f.name] = true
	if canonicalName(o.spelled) == FlagDeviceMemoryUtilization {
		// The spelling matters: releases before the alias refuse it.
		p.set[FlagDeviceMemoryUtilization] = true
	}
	return true, f.set(&p.s, o.spelled, raw)
}

func negateBool(raw string) string {
	if b, err := strconv.ParseBool(raw); err == nil && b {
		return "false"
	}
	return "true"
}

// takesValue reports whether an option Settings holds needs a value.
func takesValue(o option) bool {
	if o.name != o.base {
		return false
	}
	if o.name == FlagModel {
		return true
	}
	f := lookupEngineFlag(o.name)
	return f != nil && !f.isBool
}

func (p *parser) positional(tok, after string) error {
	if strings.HasPrefix(tok, "\u2013") || strings.HasPrefix(tok, "\u2014") {
		return fmt.Errorf("%q starts with a typographic dash (– or —), not \"--\": retype the dashes", clip(tok))
	}
	if p.posModel == "" {
		p.posModel = tok
		return nil
	}
	if after != "" {
		return fmt.Errorf("unexpected argument %q after %s, which takes no value: write %s alone to turn it on", clip(tok), after, after)
	}
	return fmt.Errorf("unexpected argument %q: the model is already %q, and a flag's value belongs right after the flag (or write --flag=value)", clip(tok), clip(p.posModel))
}

func (p *parser) finish() Settings {
	s := p.s
	s.Model = p.model
	if p.posModel != "" {
		// `vllm serve` copies the positional model over --model.
		s.Model = p.posModel
		p.set[FlagModel] = true
	}
	if len(p.set) > 0 {
		s.Set = p.set
	}
	return s
}

// ParseFlags reads vLLM engine and server flags without the leading command:
// an `args:` array of a Kubernetes container whose image starts `vllm
// serve` itself, or a KAITO argument list. A positional model is accepted
// (the vllm/vllm-openai image's entrypoint is `vllm serve`).
//
// Both --flag value and --flag=value are read, snake_case spellings
// (--max_model_len) and vLLM's short aliases (-tp, -pp, -dp, -q, -O) too.
// When a flag is given twice the last one wins, as with argparse. Flags
// Settings does not hold go verbatim into Extra, each with its value: an
// unknown flag followed by a token that is not a flag is taken to have that
// value unless it is one of vLLM's known boolean flags (a heuristic: an
// unknown boolean flag written just before the model would swallow the
// model). Flags in a --config YAML file are not read (ParseFlagsWith reads
// them); the flag goes to Extra.
func ParseFlags(args []string) (Settings, error) {
	p := parser{set: map[string]bool{}}
	prevBool := ""
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			// argparse: everything after a bare "--" is positional.
			for _, a := range args[i+1:] {
				if err := p.positional(a, ""); err != nil {
					return Settings{}, err
				}
			}
			break
		}
		if !isFlag(tok) {
			if err := p.positional(tok, prevBool); err != nil {
				return Settings{}, err
			}
			prevBool = ""
			continue
		}
		o := splitOption(tok)
		prevBool = ""
		if isBoolFlag(o.name) && !o.hasValue {
			prevBool = o.spelled
		}
		raw := o.value
		if takesValue(o) && !o.hasValue {
			if i+1 >= len(args) || isFlag(args[i+1]) {
				return Settings{}, fmt.Errorf("%s needs a value", o.spelled)
			}
			i++
			raw = args[i]
		}
		if o.name == FlagEnforceEager && !o.hasValue {
			raw = "true"
		}
		if handled, err := p.engine(o, raw); err != nil {
			return Settings{}, err
		} else if handled {
			continue
		}
		extra := []string{tok}
		switch {
		case o.hasValue || isBoolFlag(o.name):
		case multiValueFlags[o.name]:
			for i+1 < len(args) && args[i+1] != "--" && !isFlag(args[i+1]) {
				i++
				extra = append(extra, args[i])
			}
		case i+1 < len(args) && args[i+1] != "--" && !isFlag(args[i+1]):
			i++
			extra = append(extra, args[i])
		}
		if handled, err := p.dottedConfigKey(o, extra[1:]); err != nil {
			return Settings{}, err
		} else if handled {
			continue
		}
		p.s.Extra = append(p.s.Extra, extra...)
		p.set[o.base] = true
	}
	if _, _, err := p.s.graphConfig(); err != nil {
		return Settings{}, err
	}
	return p.finish(), nil
}

// ParseCommand reads a vLLM launch command split into words (see
// SplitCommandLine for a pasted one-liner):
//
//	vllm serve MODEL [flags]            (also /opt/venv/bin/vllm serve ...)
//	python -m vllm.entrypoints.openai.api_server --model MODEL [flags]
//	python3 -m vllm.entrypoints.cli.main serve MODEL [flags]
//	python3 /workspace/vllm/inference_api.py [flags]   (KAITO)
//
// Leading environment assignments (VLLM_USE_V1=0 ...) go into Settings.Env;
// a leading "$" prompt, env, exec, nohup and time are skipped. A line that
// starts with a flag is read as flags alone (ParseFlags). The flags are read
// as ParseFlags does.
func ParseCommand(args []string) (Settings, error) {
	return ParseCommandWith(args, nil)
}

// ParseFlagsWith is ParseFlags that also reads a --config file with read:
// the file's flags take its place, before the line's own flags, which win
// (vLLM's FlexibleArgumentParser._pull_args_from_config). With a nil read
// it is ParseFlags.
func ParseFlagsWith(args []string, read ConfigReader) (Settings, error) {
	if read == nil {
		return ParseFlags(args)
	}
	args, cf, err := withConfigFile(args, read)
	if err != nil {
		return Settings{}, err
	}
	s, err := ParseFlags(args)
	if err != nil {
		if cf != nil {
			err = fmt.Errorf("%w (the flags of --config %s included)", err, clipPath(cf.Path))
		}
		return Settings{}, err
	}
	s.ConfigFile = cf
	return s, nil
}

// ParseCommandWith is ParseCommand that reads a --config file as
// ParseFlagsWith does.
func ParseCommandWith(args []string, read ConfigReader) (Settings, error) {
	var env map[string]string
	i := 0
prefix:
	for i < len(args) {
		switch t := args[i]; {
		case t == "$" || t == "exec" || t == "nohup" || t == "time":
			i++
		case t == "env":
			i++
			for i < len(args) && strings.HasPrefix(args[i], "-") {
				if args[i] == "-u" || args[i] == "--unset" {
					i++
				}
				i++
			}
		case isAssignment(t):
			name, value, _ := strings.Cut(t, "=")
			if env == nil {
				env = map[string]string{}
			}
			env[name] = value
			i++
		default:
			break prefix
		}
	}
	if i >= len(args) {
		return Settings{}, fmt.Errorf("empty command: paste a launch command such as `vllm serve MODEL --max-model-len 8192`")
	}
	rest, err := serveArgs(args[i:])
	if err != nil {
		return Settings{}, err
	}
	s, err := ParseFlagsWith(rest, read)
	if err != nil {
		return Settings{}, err
	}
	s.Env = env
	return s, nil
}

var pythonProgram = regexp.MustCompile(`^python[0-9.]*[a-z]?$`)

// serveArgs strips the program (vllm serve, python -m ...) and returns the
// arguments of the server.
func serveArgs(args []string) ([]string, error) {
	prog := args[0]
	if isFlag(prog) {
		return args, nil
	}
	base := prog[strings.LastIndexByte(prog, '/')+1:]
	switch {
	case base == "vllm":
		return subcommandServe("vllm", args[1:])
	case pythonProgram.MatchString(base):
		return pythonModuleArgs(base, args[1:])
	case base == "docker" || base == "podman":
		return nil, fmt.Errorf("%s command lines are not read: paste the arguments that follow the image name", base)
	}
	return nil, fmt.Errorf("%q is not a vLLM launch command: expected `vllm serve MODEL ...` or `python -m vllm.entrypoints.openai.api_server --model MODEL ...`", clip(prog))
}

func subcommandServe(prog string, args []string) ([]string, error) {
	if len(args) == 0 || args[0] != "serve" {
		got := "nothing"
		if len(args) > 0 {
			got = strconv.Quote(clip(args[0]))
		}
		return nil, fmt.Errorf("only `%s serve` starts a vLLM server; got %s after %s", prog, got, prog)
	}
	return args[1:], nil
}

func pythonModuleArgs(prog string, args []string) ([]string, error) {
	for j := 0; j < len(args); {
		a := args[j]
		module := ""
		switch {
		case a == "-m":
			if j+1 >= len(args) {
				return nil, fmt.Errorf("%s -m needs a module name such as vllm.entrypoints.openai.api_server", prog)
			}
			module, j = args[j+1], j+2
		case strings.HasPrefix(a, "-m"):
			module, j = a[2:], j+1
		case a == "-c":
			return nil, fmt.Errorf("%s -c runs inline code, not a vLLM server: paste the `vllm serve` command instead", prog)
		case a == "-X" || a == "-W":
			j += 2
			continue
		case strings.HasPrefix(a, "-"):
			j++
			continue
		case a[strings.LastIndexByte(a, '/')+1:] == kaitoEntryPoint:
			return args[j+1:], nil
		default:
			return nil, fmt.Errorf("%s runs the script %q, not a vLLM server module: expected `%s -m vllm.entrypoints.openai.api_server --model MODEL ...`", prog, clip(a), prog)
		}
		switch module {
		case "vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server":
			return args[j:], nil
		case "vllm.entrypoints.cli.main":
			return subcommandServe(prog+" -m "+module, args[j:])
		}
		return nil, fmt.Errorf("%s -m %s is not a vLLM server: expected -m vllm.entrypoints.openai.api_server", prog, clip(module))
	}
	return nil, fmt.Errorf("%s without -m vllm.entrypoints.openai.api_server does not start a vLLM server", prog)
}

// kaitoEntryPoint is the script KAITO starts vLLM with
// (presets/workspace/inference/vllm/inference_api.py, docs/kaito.md): it
// builds vLLM's own argument parser and adds --kaito-* flags, so its
// arguments read as vLLM flags (the --kaito-* ones go to Extra).
const kaitoEntryPoint = "inference_api.py"

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(tok string) bool { return assignment.MatchString(tok) }
