package memory_test

import (
	"math"
	"testing"

	"headroom.dev/headroom/memory"
)

// bandRow is one start-up of a calibration set, planned: the logged KV
// cache and the plan's point, band and the parts of its width.
type bandRow struct {
	group, label string
	logged       float64 // GiB of KV cache a worker, as logged
	point        float64 // GiB the plan gives
	ext          float64 // GiB of the band from extrapolated parts
	cold         float64 // GiB the band reaches lower for a cold start
	named        bool    // outside the mechanism and named (the 0.28 cold-start and weights rows)
}

// bandRows plans every start-up of the three calibration sets.
func bandRows(t *testing.T) []bandRow {
	var rows []bandRow
	add := func(group, label string, b memory.Budget, logged float64, named bool) {
		unc := 0.0
		for _, e := range b.Evidence {
			if e.Term == "cudagraph_bytes" && !b.CUDAGraphInBudget {
				continue
			}
			if e.Class == memory.EvidenceExtrapolated {
				unc += float64(e.UncertaintyBytes) / gib
			}
		}
		rows = append(rows, bandRow{group: group, label: label, logged: logged, point: float64(b.Stages[0].KVCache) / gib,
			ext: unc, cold: float64(b.ColdStartAllowance()) / gib, named: named})
	}
	for _, r := range readCalibration(t) {
		add("0.19.0 H100", r.model, plan(t, r.input(t)), r.kvGiB, false)
	}
	for _, r := range readStartups010(t) {
		add("0.10.1 A100 TP 2", "Qwen2-7B on "+r.gpu, plan(t, r.input(t, device(t, r.gpu))), r.kvGiB, false)
	}
	for _, r := range readStartups028(t) {
		if r.tokens == 0 {
			continue
		}
		b := plan(t, r.input(t))
		_, cold := coldStartRows028[r.id]
		_, weights := weightRows028[r.id]
		add("0.28.0 L4/L40S", "row "+r.id, b, r.kvBytes(b)/gib, cold || weights)
	}
	return rows
}

// TestBandLeaveOneGroupOut measures the KV band as a user meets it on
// start-ups of a kind the planner was not built on: each calibration set in
// turn is held out, the band's constants are taken from the others (the
// KV residual from their largest miss; for the 0.28.0 set, the plan
// without the PCIe non-torch point its tensor-parallel rows gave), and the
// held-out set's logged KV caches are checked against that band. The
// cold-start allowance stays: the 0.27.1 and 0.31.0 reports outside these
// sets give the same 1.65 GiB. Target: at least 80% of the held-out
// start-ups inside their band (the bar for start-ups measured outside the
// repository).
func TestBandLeaveOneGroupOut(t *testing.T) {
	rows := bandRows(t)
	// The 0.28.0 set held out: its tensor-parallel rows planned without
	// the PCIe point they gave (the NVLink figure, extrapolated).
	restore := memory.WithoutTPPoints("pcie")
	var noPCIe []bandRow
	for _, r := range readStartups028(t) {
		if r.tokens == 0 {
			continue
		}
		b := plan(t, r.input(t))
		_, cold := coldStartRows028[r.id]
		_, weights := weightRows028[r.id]
		unc := 0.0
		for _, e := range b.Evidence {
			if e.Class == memory.EvidenceExtrapolated && (e.Term != "cudagraph_bytes" || b.CUDAGraphInBudget) {
				unc += float64(e.UncertaintyBytes) / gib
			}
		}
		noPCIe = append(noPCIe, bandRow{group: "0.28.0 L4/L40S", label: "row " + r.id, logged: r.kvBytes(b) / gib,
			point: float64(b.PerGPU.KVCache) / gib, ext: unc, cold: float64(b.ColdStartAllowance()) / gib, named: cold || weights})
	}
	restore()

	groups := []string{"0.19.0 H100", "0.10.1 A100 TP 2", "0.28.0 L4/L40S"}
	var in, all int
	var width float64
	for _, held := range groups {
		// The KV residual from the other sets' start-ups the mechanism
		// covers.
		var res float64
		for _, r := range rows {
			if r.group != held && !r.named {
				res = math.Max(res, math.Abs(r.logged-r.point))
			}
		}
		res = math.Max(res, 0.01) // the logs' two decimals
		test := rows
		if held == "0.28.0 L4/L40S" {
			test = noPCIe
		}
		var hin, hall int
		for _, r := range test {
			if r.group != held {
				continue
			}
			lo, hi := r.point-res-r.ext-r.cold, r.point+res+r.ext
			ok := r.logged >= lo && r.logged <= hi
			if ok {
				hin++
			} else {
				t.Logf("  %s %s: logged %.2f GiB outside %.2f–%.2f", held, r.label, r.logged, lo, hi)
			}
			hall++
			width += (hi - lo) / 2 / r.point
		}
		t.Logf("%s held out: KV residual of the others ± %.2f GiB; %d of %d inside the band", held, res, hin, hall)
		in += hin
		all += hall
	}
	t.Logf("leave one set out: %d of %d start-ups inside the band (%.0f%%), mean half-width ± %.1f%% of the KV cache", in, all, 100*float64(in)/float64(all), 100*width/float64(all))
	if float64(in) < 0.8*float64(all) {
		t.Errorf("the band holds %d of %d held-out start-ups, under 80%%", in, all)
	}
}
