package vllm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// FromMap reads the `vllm:` section of a KAITO inference_config.yaml (or any
// map of flag name to value, as YAML or JSON decode it). KAITO turns each
// entry into `--<key> <value>` after its own flags (docs/kaito.md §6), so the
// keys are flag names without dashes (snake_case accepted) and the values
// strings, numbers or booleans.
//
// A true boolean becomes the bare flag. A false one turns --enforce-eager
// off, becomes --no-NAME for flags that are on by default in V1
// (enable-prefix-caching, enable-chunked-prefill), and is dropped otherwise,
// since off is then the default. A null or empty value counts as not given
// (KAITO treats an empty max-model-len as absent). Lists become several
// values for flags that take several (served-model-name) and JSON
// otherwise; maps become JSON, which is how vLLM takes its config objects.
// Keys go in sorted order, so Extra is stable.
func FromMap(m map[string]any) (Settings, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p := parser{set: map[string]bool{}}
	for _, k := range keys {
		name := strings.TrimLeft(strings.TrimSpace(k), "-")
		if name == "" || strings.ContainsAny(name, "= \t\n\r") {
			return Settings{}, fmt.Errorf("vllm: key %q is not a flag name: write names such as max-model-len", clip(k))
		}
		o := splitOption("--" + name)
		if err := p.mapEntry(o, m[k]); err != nil {
			return Settings{}, err
		}
	}
	return p.finish(), nil
}

// ToMap is FromMap the other way: it writes vLLM flags (Settings.Args, or
// a recommendation's) as the vllm: section of a KAITO inference_config.yaml.
// Each key is the flag's name without dashes; a flag without a value (a
// switch such as --enforce-eager) is true; a value is an integer or a
// number where it reads as one, as YAML would type it, else a string;
// several values of a flag that takes several become a list. FromMap of
// the map gives back the settings the flags parse to.
func ToMap(args []string) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(args); i++ {
		name, v, attached := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if attached {
			m[name] = typedValue(v)
			continue
		}
		var vals []any
		for i+1 < len(args) && !isFlag(args[i+1]) && (len(vals) == 0 || multiValueFlags[name]) {
			i++
			vals = append(vals, typedValue(args[i]))
		}
		switch len(vals) {
		case 0:
			m[name] = true
		case 1:
			m[name] = vals[0]
		default:
			m[name] = vals
		}
	}
	return m
}

// typedValue is a flag's value as YAML types it.
func typedValue(v string) any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if x, err := strconv.ParseFloat(v, 64); err == nil {
		return x
	}
	return v
}

func (p *parser) mapEntry(o option, v any) error {
	if v == nil {
		return nil
	}
	if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
		return nil
	}
	if takesValue(o) {
		text := scalarText
		if f := lookupEngineFlag(o.name); f != nil && f.jsonValue {
			text = elementText // a map is the JSON object itself
		}
		raw, err := text(o, v)
		if err != nil {
			return err
		}
		_, err = p.engine(o, raw)
		return err
	}
	if isBoolFlag(o.name) {
		raw, err := scalarText(o, v)
		if err != nil {
			return err
		}
		on, err := parseBool(o.spelled, raw)
		if err != nil {
			return err
		}
		if o.name == "no-"+FlagEnforceEager {
			o.name, on = FlagEnforceEager, !on
		}
		if o.name == FlagEnforceEager {
			p.s.EnforceEager = on
			p.set[FlagEnforceEager] = true
			return nil
		}
		switch {
		case on:
			p.s.Extra = append(p.s.Extra, o.spelled)
		case defaultOnBoolFlags[o.name]:
			p.s.Extra = append(p.s.Extra, "--no-"+o.name)
		}
		p.set[o.base] = true
		return nil
	}
	switch x := v.(type) {
	case bool:
		// A flag we do not know to be boolean: true means "write the flag".
		if x {
			p.s.Extra = append(p.s.Extra, o.spelled)
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
		if !multiValueFlags[o.name] {
			b, err := json.Marshal(x)
			if err != nil {
				return fmt.Errorf("%s: %v", o.spelled, err)
			}
			p.s.Extra = append(p.s.Extra, o.spelled, string(b))
			break
		}
		extra := []string{o.spelled}
		for _, e := range x {
			t, err := elementText(o, e)
			if err != nil {
				return err
			}
			if isFlag(t) || t == "--" {
				return fmt.Errorf("%s: the value %q reads as a flag; vLLM would not take it as a value", o.spelled, clip(t))
			}
			extra = append(extra, t)
		}
		p.s.Extra = append(p.s.Extra, extra...)
	default:
		t, err := elementText(o, v)
		if err != nil {
			return err
		}
		if isFlag(t) || t == "--" {
			p.s.Extra = append(p.s.Extra, o.spelled+"="+t)
		} else {
			p.s.Extra = append(p.s.Extra, o.spelled, t)
		}
	}
	p.set[o.base] = true
	return nil
}

// scalarText renders a string, number or boolean as the text a command line
// would carry.
func scalarText(o option, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case json.Number:
		return x.String(), nil
	}
	return "", fmt.Errorf("%s: a %s is not a value for this flag; give a string, number or boolean", o.spelled, typeName(v))
}

// elementText renders a scalar as text and a map or list as JSON.
func elementText(o option, v any) (string, error) {
	switch v.(type) {
	case map[string]any, []any:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("%s: %v", o.spelled, err)
		}
		return string(b), nil
	case nil:
		return "", fmt.Errorf("%s: a list holds an empty (null) value", o.spelled)
	}
	return scalarText(o, v)
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}
