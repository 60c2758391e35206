package admission

import (
	"fmt"

	"headroom.dev/headroom/gpu"
	"headroom.dev/headroom/memory"
)

// pinnedAlternatives are the alternatives of a denial for a pod pinned to
// an instance type (node): the planner proposes more of the GPU, or
// another GPU, wherever it may be had, but the pod schedules only on that
// type. What its nodes can run comes first, unchanged; the rest follows,
// each saying the instance type it needs instead (the smallest of the
// same cloud that has it). Without a pinned type they are alts as given.
// alts is not changed: the plan cache shares it.
func pinnedAlternatives(alts []memory.Alternative, in memory.Input, node gpu.Selection) []memory.Alternative {
	if node.SKU == "" || len(alts) == 0 {
		return alts
	}
	out := make([]memory.Alternative, 0, len(alts))
	var elsewhere []memory.Alternative
	for _, a := range alts {
		device, count := altHardware(a, in)
		switch {
		case device != node.Device.Name:
			a.Message += ", on an instance type that has it" + instead(node, device, count)
		case count > node.Count:
			a.Message += fmt.Sprintf(" on a larger instance type: %s has %d", node.SKU, node.Count) + instead(node, device, count)
		default:
			out = append(out, a)
			continue
		}
		elsewhere = append(elsewhere, a)
	}
	return append(out, elsewhere...)
}

// instead names the smallest instance type of node's cloud with count of
// device, in the catalog's order among equals: ", g5.12xlarge has 4";
// "" when the catalog has none.
func instead(node gpu.Selection, device string, count int) string {
	var best gpu.SKU
	for _, s := range gpu.SKUs() {
		if s.Cloud != node.Cloud || s.Device.Name != device || s.Count < count {
			continue
		}
		if best.Name == "" || s.Count < best.Count {
			best = s
		}
	}
	switch {
	case best.Name == "":
		return ""
	case device == node.Device.Name:
		return fmt.Sprintf(", %s has %d", best.Name, best.Count)
	}
	return fmt.Sprintf(" (%s: %d × %s)", best.Name, best.Count, device)
}

// altHardware is the GPU and count an alternative runs on: its own where it
// changes them, else the plan's.
func altHardware(a memory.Alternative, in memory.Input) (device string, count int) {
	device, count = in.Device.Name, in.Count
	if a.GPU != "" {
		device = a.GPU
	}
	if a.Count > 0 {
		count = a.Count
	}
	return device, count
}

// Runs reports whether the pod's nodes can run an alternative of the
// engine's denial as the pod selects them: on the GPU it plans, at a
// count its pinned instance type holds (any count where none is pinned).
// Another GPU, or more than the type has, is a change of node selection.
func (e Engine) Runs(a memory.Alternative) bool {
	device, count := altHardware(a, e.Input)
	return device == e.Input.Device.Name && (e.node.SKU == "" || count <= e.node.Count)
}
