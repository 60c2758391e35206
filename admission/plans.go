package admission

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
)

// maxCachedPlans bounds the plan cache; past it, plans are made afresh.
const maxCachedPlans = 4096

// planCache remembers what the planner said about an input. Reviews repeat
// their inputs: manifests are applied again unchanged (GitOps controllers
// do it on a schedule, and the API server calls webhooks before it finds
// an update changes nothing), and an edit that leaves the model, the GPU
// and the vLLM flags alone (an image tag, a label, the replicas) plans the
// same input again. The planner is pure, so a repeated input gets the
// remembered answer: the plan, and when asked for them the alternatives of
// a denial (a dozen more plans, about 0.5 ms) and autofix's fills (two or
// three plans). Only inputs whose model comes from the embedded catalog are
// kept: a model from a ConfigMap can change under the same name. Past
// maxCachedPlans inputs nothing more is kept, as in catalogCache. The
// Budgets it hands out share their slices; callers only read them.
type planCache struct {
	mu      sync.Mutex
	entries map[string]*planEntry
	// off makes every lookup miss (benchmarks of a first review).
	off bool
}

// planEntry is one input's answers; each part is filled on first use.
type planEntry struct {
	budget   memory.Budget
	err      error
	planned  bool
	alts     []memory.Alternative
	altsDone bool
	fills    fills
	fillsErr error
	fillDone bool
}

// planKey names an input whose model is a catalog entry: the catalog's id
// stands for the Spec, and everything else of the input is written out by
// appendKey, every field, maps in key order, so equal inputs give equal
// keys. It took fmt's %#v before: a tenth of an audit's evaluation.
func planKey(in memory.Input) string {
	b := make([]byte, 0, 512)
	b = appendKey(b, reflect.ValueOf(in.Model.ID))
	b = appendKey(b, reflect.ValueOf(in.Device))
	b = strconv.AppendInt(b, int64(in.Count), 10)
	b = appendKey(b, reflect.ValueOf(in.Settings))
	b = appendKey(b, reflect.ValueOf(in.Env))
	b = strconv.AppendInt(append(b, ' '), int64(in.GPUsPerNode), 10)
	return string(b)
}

// appendKey writes v to b unambiguously: strings with their length, every
// struct field in order, slices with their length, maps sorted by key,
// pointers as nil or their value.
func appendKey(b []byte, v reflect.Value) []byte {
	b = append(b, ' ')
	switch v.Kind() {
	case reflect.String:
		b = strconv.AppendInt(b, int64(v.Len()), 10)
		b = append(b, ':')
		return append(b, v.String()...)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(b, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(b, v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.AppendFloat(b, v.Float(), 'g', -1, 64)
	case reflect.Bool:
		return strconv.AppendBool(b, v.Bool())
	case reflect.Struct:
		b = append(b, '{')
		for i := range v.NumField() {
			b = appendKey(b, v.Field(i))
		}
		return append(b, '}')
	case reflect.Slice, reflect.Array:
		b = strconv.AppendInt(append(b, '['), int64(v.Len()), 10)
		for i := range v.Len() {
			b = appendKey(b, v.Index(i))
		}
		return append(b, ']')
	case reflect.Map:
		if v.IsNil() {
			return append(b, "nil"...)
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int {
			if x.Kind() == reflect.String {
				return strings.Compare(x.String(), y.String())
			}
			return strings.Compare(fmt.Sprint(x), fmt.Sprint(y))
		})
		b = strconv.AppendInt(append(b, "map"...), int64(len(keys)), 10)
		for _, k := range keys {
			b = appendKey(appendKey(b, k), v.MapIndex(k))
		}
		return b
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(b, "nil"...)
		}
		return appendKey(b, v.Elem())
	}
	return fmt.Appendf(b, "%#v", v.Interface())
}

// entry returns key's entry, adding an empty one; nil when there is no
// cache, key is "", or the cache is full or off.
func (c *planCache) entry(key string) *planEntry {
	if c == nil || key == "" || c.off {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e
	}
	if c.entries == nil {
		c.entries = map[string]*planEntry{}
	}
	if len(c.entries) >= maxCachedPlans {
		return nil
	}
	e := &planEntry{}
	c.entries[key] = e
	return e
}

// plan is memory.Plan(in), remembered under key ("" remembers nothing).
func (c *planCache) plan(key string, in memory.Input) (memory.Budget, error) {
	e := c.entry(key)
	if e == nil {
		return memory.Plan(in)
	}
	c.mu.Lock()
	if e.planned {
		defer c.mu.Unlock()
		return e.budget, e.err
	}
	c.mu.Unlock()
	b, err := memory.Plan(in)
	c.mu.Lock()
	e.budget, e.err, e.planned = b, err, true
	c.mu.Unlock()
	return b, err
}

// alternatives is memory.AlternativesFrom(in, b, devices) for the input
// planned under key.
func (c *planCache) alternatives(key string, in memory.Input, b memory.Budget, devices []gpu.Device) []memory.Alternative {
	e := c.entry(key)
	if e == nil {
		return memory.AlternativesFrom(in, b, devices)
	}
	c.mu.Lock()
	if e.altsDone {
		defer c.mu.Unlock()
		return e.alts
	}
	c.mu.Unlock()
	alts := memory.AlternativesFrom(in, b, devices)
	c.mu.Lock()
	e.alts, e.altsDone = alts, true
	c.mu.Unlock()
	return alts
}

// fills is recommendFills(a) for the input planned under a.key.
func (c *planCache) fills(a assessment) (fills, error) {
	e := c.entry(a.key)
	if e == nil {
		return recommendFills(a)
	}
	c.mu.Lock()
	if e.fillDone {
		defer c.mu.Unlock()
		return e.fills, e.fillsErr
	}
	c.mu.Unlock()
	f, err := recommendFills(a)
	c.mu.Lock()
	e.fills, e.fillsErr, e.fillDone = f, err, true
	c.mu.Unlock()
	return f, err
}
