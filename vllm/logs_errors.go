package vllm

import (
	"strconv"
	"strings"
)

// vLLM's and PyTorch's error texts that stop a start-up or a server.

// OOM holds the numbers of PyTorch's CUDA out-of-memory message.
type OOM struct {
	// Tried is the allocation that failed ("Tried to allocate 2.00 GiB").
	Tried int64 `json:"tried_to_allocate_bytes,omitempty"`
	// Total and Free: "GPU 0 has a total capacity of T of which F is free".
	Total int64 `json:"total_capacity_bytes,omitempty"`
	Free  int64 `json:"free_bytes,omitempty"`
	// ProcessInUse is "this process has X memory in use" ("Including
	// non-PyTorch memory, ..."), or the sum of the "Process N has X memory
	// in use" entries; Processes lists those entries.
	ProcessInUse int64           `json:"process_in_use_bytes,omitempty"`
	Processes    []ProcessMemory `json:"processes,omitempty"`
	// Allocated is "X is allocated by PyTorch" (pre-2.1: "X already
	// allocated"; some builds: "current allocated: X").
	Allocated int64 `json:"allocated_by_pytorch_bytes,omitempty"`
	// PrivatePools is "with X allocated in private pools (e.g., CUDA Graphs)".
	PrivatePools int64 `json:"private_pools_bytes,omitempty"`
	// ReservedUnallocated is "X is reserved by PyTorch but unallocated".
	ReservedUnallocated int64 `json:"reserved_unallocated_bytes,omitempty"`
	// Reserved is the pre-2.1 "X reserved in total by PyTorch".
	Reserved int64 `json:"reserved_bytes,omitempty"`
}

// ProcessMemory is one "Process N has X memory in use" entry.
type ProcessMemory struct {
	PID   int   `json:"pid"`
	Bytes int64 `json:"bytes"`
}

var (
	freeErrUtil  = lazyRE(`less than desired GPU memory utilization \(` + numPat + `, ` + gibPat + `\)`)
	maxLenLRe    = lazyRE(`max seq len \(` + intPat + `\)`)
	maxLenNeedRe = lazyRE(gibPat + ` KV cache is needed`)
	maxLenAvail  = lazyRE(`available KV cache memory \(` + gibPat + `\)`)
	maxLenEstRe  = lazyRE(`estimated maximum model length is (-?\d[\d,]*)`)
	v0MaxLenRe   = lazyRE(`max seq len \(` + intPat + `\) is larger than the maximum number of tokens that can be stored in KV cache \(` + intPat + `\)`)
	aboveModelRe = lazyRE(`User-specified max_model_len \(` + intPat + `\) is greater than the derived max_model_len \(\w+=` + intPat)
	argErrRe     = lazyRE(`error: (?:argument \S+|unrecognized arguments)`)
	oomTriedRe   = lazyRE(`Tried to allocate ` + sizePat)
	oomTotalRe   = lazyRE(`GPU (\d+) has a total capacity of ` + sizePat + ` of which ` + sizePat + ` is free`)
	oomProcRe    = lazyRE(`Process (\d+) has ` + sizePat + ` memory in use`)
	oomThisRe    = lazyRE(`this process has ` + sizePat + ` memory in use`)
	oomAllocRe   = lazyRE(`Of the allocated memory ` + sizePat + ` is allocated by PyTorch`)
	oomPoolsRe   = lazyRE(`with ` + sizePat + ` allocated in private pools`)
	oomUnallocRe = lazyRE(`and ` + sizePat + ` is reserved by PyTorch but unallocated`)
	oomCurrentRe = lazyRE(`current allocated: ` + sizePat)
	oomOldRe     = lazyRE(`\(GPU (\d+); ` + sizePat + ` total capacity; ` + sizePat + ` already allocated; ` + sizePat + ` free;(?: ` + sizePat + ` (?:allowed;|reserved in total))?`)
	oomOldResRe  = lazyRE(sizePat + ` reserved in total by PyTorch`)
)

func parseFreeMemoryErr(l string) (LogEvent, bool) {
	ev := event(LogErrFreeMemory, l, "Free memory on device")
	if m := summaryFree().FindStringSubmatch(l); m != nil {
		ev.Device = deviceIndex(m[1])
		if b, ok := gib(m[2]); ok {
			ev.Memory.Free = b
		}
		if b, ok := gib(m[3]); ok {
			ev.Memory.Total = b
		}
	}
	if m := freeErrUtil().FindStringSubmatch(l); m != nil {
		if f, ok := fraction(m[1]); ok {
			ev.Utilization = f
		}
		if b, ok := gib(m[2]); ok {
			ev.Memory.Requested = b
		}
	}
	return ev, true
}

func parseMaxLenErr(l string) (LogEvent, bool) {
	ev := event(LogErrMaxLen, l, "To serve at least one request")
	if m := maxLenLRe().FindStringSubmatch(l); m != nil {
		if n, ok := length(m[1]); ok {
			ev.MaxModelLen = n
		}
	}
	if m := maxLenNeedRe().FindStringSubmatch(l); m != nil {
		if b, ok := gib(m[1]); ok {
			ev.Memory.KVNeeded = b
		}
	}
	if m := maxLenAvail().FindStringSubmatch(l); m != nil {
		if b, ok := gib(m[1]); ok {
			ev.Memory.AvailableKV = b
		}
	}
	if m := maxLenEstRe().FindStringSubmatch(l); m != nil {
		raw := m[1]
		if strings.HasPrefix(raw, "-") {
			// estimate_max_model_len returns 0 when nothing fits; a
			// negative number is read as that.
			ev.HasEstimate = true
		} else if n, ok := length(strings.TrimRight(raw, ",")); ok {
			ev.EstimatedMaxLen, ev.HasEstimate = n, true
		}
	}
	return ev, true
}

func parseV0MaxLenErr(l string) (LogEvent, bool) {
	m := v0MaxLenRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	ev := event(LogErrV0MaxLen, l, "The model's max seq len")
	if n, ok := length(m[1]); ok {
		ev.MaxModelLen = n
	}
	if n, ok := count(m[2]); ok {
		ev.Tokens = n
	}
	return ev, true
}

func parseAboveModel(l string) (LogEvent, bool) {
	m := aboveModelRe().FindStringSubmatch(l)
	if m == nil {
		return LogEvent{}, false
	}
	ev := event(LogErrMaxLenAboveModel, l, "User-specified max_model_len")
	if n, ok := length(m[1]); ok {
		ev.MaxModelLen = n
	}
	if n, ok := length(m[2]); ok {
		ev.EstimatedMaxLen, ev.HasEstimate = n, true
	}
	return ev, true
}

func parseArgErr(l string) (LogEvent, bool) {
	m := argErrRe().FindStringIndex(l)
	if m == nil {
		return LogEvent{}, false
	}
	return event(LogErrArgument, l, l[m[0]:m[1]]), true
}

func parseOOM(l string) (LogEvent, bool) {
	anchor := "CUDA out of memory"
	switch {
	case strings.Contains(l, anchor):
	case strings.Contains(l, "CUDA error: out of memory"):
		anchor = "CUDA error: out of memory"
	case strings.Contains(l, "OutOfMemoryError"):
		anchor = "OutOfMemoryError"
	default:
		return LogEvent{}, false
	}
	ev := event(LogErrOOM, l, anchor)
	o := &OOM{}
	if m := oomTriedRe().FindStringSubmatch(l); m != nil {
		o.Tried, _ = size(m[1], m[2])
	}
	if m := oomTotalRe().FindStringSubmatch(l); m != nil {
		ev.Device = deviceIndex(m[1])
		o.Total, _ = size(m[2], m[3])
		o.Free, _ = size(m[4], m[5])
	}
	for _, m := range oomProcRe().FindAllStringSubmatch(l, 64) {
		pid, err := strconv.Atoi(m[1])
		b, ok := size(m[2], m[3])
		if err != nil || !ok {
			continue
		}
		o.Processes = append(o.Processes, ProcessMemory{PID: pid, Bytes: b})
		o.ProcessInUse = addBytes(o.ProcessInUse, b)
	}
	if m := oomThisRe().FindStringSubmatch(l); m != nil {
		o.ProcessInUse, _ = size(m[1], m[2])
	}
	if m := oomAllocRe().FindStringSubmatch(l); m != nil {
		o.Allocated, _ = size(m[1], m[2])
	} else if m := oomCurrentRe().FindStringSubmatch(l); m != nil {
		o.Allocated, _ = size(m[1], m[2])
	}
	if m := oomPoolsRe().FindStringSubmatch(l); m != nil {
		o.PrivatePools, _ = size(m[1], m[2])
	}
	if m := oomUnallocRe().FindStringSubmatch(l); m != nil {
		o.ReservedUnallocated, _ = size(m[1], m[2])
	}
	if m := oomOldRe().FindStringSubmatch(l); m != nil {
		ev.Device = deviceIndex(m[1])
		o.Total, _ = size(m[2], m[3])
		o.Allocated, _ = size(m[4], m[5])
		o.Free, _ = size(m[6], m[7])
		if m := oomOldResRe().FindStringSubmatch(l); m != nil {
			o.Reserved, _ = size(m[1], m[2])
		}
	}
	ev.OOM = o
	ev.Memory.Total, ev.Memory.Free = o.Total, o.Free
	return ev, true
}
