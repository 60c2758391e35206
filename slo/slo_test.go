package slo

import (
	"fmt"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	s, err := Parse("ttft_p99=2s, tpot_p99=100ms,error_rate=0.5%")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 3 || s[0] != (Bound{Metric: "ttft", Stat: "p99", Limit: 2 * time.Second}) ||
		s[1].Limit != 100*time.Millisecond || s[2].Rate != 0.005 {
		t.Errorf("got %+v", s)
	}
	for _, bad := range []string{"ttft=2s", "ttft_p98=2s", "foo_p99=2s", "ttft_p99=fast", "ttft_p99=-1s", "error_rate=2", "ttft_p99"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzParse: any text gives bounds that can be judged, or an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"ttft_p99=2s,tpot_p99=100ms", "error_rate=1%", "=,", "e2e_max=1h", "itl_p95=20ms, error_rate=0.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bs, err := Parse(s)
		if err != nil {
			return
		}
		for _, b := range bs {
			if b.Metric == "error_rate" && (b.Rate < 0 || b.Rate > 1) || b.Metric != "error_rate" && b.Limit <= 0 {
				t.Fatalf("%q: %+v", s, b)
			}
		}
	})
}

func TestPick(t *testing.T) {
	bounds, err := Parse("ttft_mean=1s,ttft_p50=1s,ttft_p90=1s,tpot_p95=1s,e2e_p99=1s,itl_max=1s,error_rate=1%")
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, b := range bounds {
		got = append(got, b.Pick(1, 2, 3, 4, 5, 6))
	}
	if fmt.Sprint(got) != "[1 2 3 4 5 6 0]" {
		t.Errorf("picked %v", got)
	}
}
