package vllm

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FlagConfig is `vllm serve --config FILE`: a YAML file of flags.
const FlagConfig = "config"

// MaxConfigFileBytes bounds a --config file: vLLM's are a screen of flags,
// and a file past this is not one.
const MaxConfigFileBytes = 1 << 20

// maxConfigFileKeys bounds the flags one file may give.
const maxConfigFileKeys = 1000

// ConfigReadError is a --config file that could not be read: where the
// reader looked and why. A front end that cannot read it may go on with
// the line alone (the webhook, whose ConfigMap may be missing), where a
// file that reads but is not flags is the line's error.
type ConfigReadError struct {
	Path string
	Err  error
}

func (e *ConfigReadError) Error() string {
	return "--config " + clipPath(e.Path) + ": " + e.Err.Error()
}

func (e *ConfigReadError) Unwrap() error { return e.Err }

// clipPath shortens a file's path in a message from its start, keeping
// the name: a path is longer than other quoted text and its end says
// most.
func clipPath(p string) string {
	if i := strings.IndexByte(p, '\n'); i >= 0 {
		p = p[:i]
	}
	if len(p) > 120 {
		p = "..." + p[len(p)-120:]
	}
	return p
}

// clipError is a YAML decoder's error on one line of at most 120
// characters: longer than other quoted text, since it says where the file
// goes wrong.
func clipError(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// ConfigReader reads the file a --config names: the command line from its
// working directory, the webhook from the ConfigMap mounted at its path,
// the page from the text its user gives (never the server's disk). A
// parse without one leaves the flag not modelled.
type ConfigReader func(path string) ([]byte, error)

// ConfigFile is a --config file whose flags were read into Settings.
type ConfigFile struct {
	// Path is the file as the line names it.
	Path string `json:"path"`
	// Flags are the flags read from it, in the order they were applied.
	Flags []string `json:"flags"`
	// Dropped are its keys set to false: vLLM's loader adds nothing for
	// them, so the flag keeps its default (a boolean flag is turned off by
	// its no- spelling set to true).
	Dropped []string `json:"dropped,omitempty"`
	// Unread says why the file could not be read (it is not where the
	// reader looked): its flags are then not in the settings, and the
	// flag stays among the unmodelled ones; "" when it was read.
	Unread string `json:"unread,omitempty"`
}

// ConfigFileArgs turns a --config file into the flags vLLM reads from it,
// as FlexibleArgumentParser.load_config_file does (vllm/utils/argparse_utils.py,
// 0.10 and later): a flat mapping of flag names (dashes or underscores) to
// values; true gives the bare flag and false nothing (Dropped), a list the
// flag followed by each item (none for an empty list), a mapping the flag
// and its JSON, anything else the flag and the value as written, in the
// file's order.
func ConfigFileArgs(data []byte) (ConfigFile, error) {
	args, dropped, err := configFileArgs(data)
	return ConfigFile{Flags: args, Dropped: dropped}, err
}

// pyYAMLBool is PyYAML's resolver for booleans (YAML 1.1, which
// yaml.safe_load follows): a plain yes or off is a boolean there.
var pyYAMLBool = map[string]bool{
	"yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true,
	"no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false,
}

func configFileArgs(data []byte) ([]string, []string, error) {
	if len(data) > MaxConfigFileBytes {
		return nil, nil, fmt.Errorf("the file holds %d bytes, more than the %d a --config file of flags may: give the flags on the line", len(data), MaxConfigFileBytes)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not YAML (%s): vLLM reads a mapping of flag names to values, e.g. `max-model-len: 8192`", clipError(err))
	}
	if len(doc.Content) == 0 {
		return nil, nil, nil
	}
	m := doc.Content[0]
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil, nil, nil
	}
	if m.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("not a mapping of flag names to values (e.g. `max-model-len: 8192`)")
	}
	if len(m.Content)/2 > maxConfigFileKeys {
		return nil, nil, fmt.Errorf("%d flags, more than the %d a --config file may hold", len(m.Content)/2, maxConfigFileKeys)
	}
	var out, dropped []string
	// vLLM walks the mapping in the file's order, as yaml.safe_load keeps it.
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := strings.TrimLeft(k.Value, "-")
		if k.Kind != yaml.ScalarNode || name == "" || strings.ContainsAny(name, " =\t\n") {
			return nil, nil, fmt.Errorf("%q is not a flag name: write keys as vLLM's flags without the dashes, e.g. max-model-len", clip(k.Value))
		}
		if strings.ReplaceAll(name, "_", "-") == FlagConfig {
			return nil, nil, fmt.Errorf("a --config file names another (%q): vLLM reads one; put its flags in this file", clip(v.Value))
		}
		flag := "--" + name
		switch v.Kind {
		case yaml.SequenceNode:
			if len(v.Content) == 0 {
				continue
			}
			out = append(out, flag)
			for _, item := range v.Content {
				s, err := configValue(name, item)
				if err != nil {
					return nil, nil, err
				}
				out = append(out, s)
			}
			continue
		case yaml.ScalarNode:
			if on, ok := pyYAMLBool[v.Value]; ok && v.Style == 0 {
				if on {
					out = append(out, flag)
				} else {
					dropped = append(dropped, name)
				}
				continue
			}
			if v.Tag == "!!null" {
				return nil, nil, fmt.Errorf("%s has no value: give one, or remove the key", name)
			}
		}
		s, err := configValue(name, v)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, flag, s)
	}
	return out, dropped, nil
}

// configValue is a value as vLLM writes it into the argument list: a
// scalar as written (Python's str() of a bool is True or False), a mapping
// or a nested list as JSON.
func configValue(name string, v *yaml.Node) (string, error) {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v == nil {
		return "", fmt.Errorf("%s: an alias to nothing", name)
	}
	if v.Kind == yaml.ScalarNode {
		if on, ok := pyYAMLBool[v.Value]; ok && v.Style == 0 {
			if on {
				return "True", nil
			}
			return "False", nil
		}
		if v.Tag == "!!null" {
			return "", fmt.Errorf("%s holds an empty item: give a value or remove it", name)
		}
		return v.Value, nil
	}
	var x any
	if err := v.Decode(&x); err != nil {
		return "", fmt.Errorf("%s: %s", name, clipError(err))
	}
	b, err := json.Marshal(x)
	if err != nil {
		return "", fmt.Errorf("%s: a mapping whose keys are not all names (%s)", name, clipError(err))
	}
	return string(b), nil
}

// withConfigFile reads a --config among args and returns the arguments with
// the file's flags in its place, as vLLM's parser splices them: before the
// first flag of the line, after a positional model, so that every flag the
// line gives wins over the file's (argparse keeps the last). The file is nil
// when the line names none.
func withConfigFile(args []string, read ConfigReader) ([]string, *ConfigFile, error) {
	path, rest := "", make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if !isFlag(tok) || splitOption(tok).name != FlagConfig {
			rest = append(rest, tok)
			continue
		}
		o := splitOption(tok)
		v := o.value
		if !o.hasValue {
			if i+1 >= len(args) || isFlag(args[i+1]) {
				return nil, nil, fmt.Errorf("%s needs a value: the path of a YAML file of flags", o.spelled)
			}
			i++
			v = args[i]
		}
		if path != "" && v != path {
			return nil, nil, fmt.Errorf("--config is given twice (%q and %q): vLLM reads one file", clipPath(path), clip(v))
		}
		path = v
	}
	if path == "" {
		return args, nil, nil
	}
	if ext := path[strings.LastIndexByte(path, '.')+1:]; ext != "yaml" && ext != "yml" {
		return nil, nil, fmt.Errorf("--config %s: vLLM reads only a .yaml or .yml file of flags", clipPath(path))
	}
	data, err := read(path)
	if err != nil {
		return nil, nil, &ConfigReadError{Path: path, Err: err}
	}
	cf, err := ConfigFileArgs(data)
	if err != nil {
		return nil, nil, fmt.Errorf("--config %s: %w", clipPath(path), err)
	}
	at := len(rest)
	for i, tok := range rest {
		if isFlag(tok) {
			at = i
			break
		}
	}
	cf.Path = path
	out := make([]string, 0, len(rest)+len(cf.Flags))
	out = append(out, rest[:at]...)
	out = append(out, cf.Flags...)
	return append(out, rest[at:]...), &cf, nil
}
