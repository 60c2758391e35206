package admission

import (
	"fmt"
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
// stands for the Spec, and everything else of the input is printed (%#v
// prints maps in key order, so equal inputs print alike).
func planKey(in memory.Input) string {
	var b strings.Builder
	b.WriteString(in.Model.ID)
	fmt.Fprintf(&b, "\x00%#v\x00%d\x00%#v\x00%#v\x00%d", in.Device, in.Count, in.Settings, in.Env, in.GPUsPerNode)
	return b.String()
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
