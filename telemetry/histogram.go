package telemetry

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Bucket is one cumulative histogram bucket: Count observations were at or
// below UpperBound (which is +Inf for the last).
type Bucket struct {
	UpperBound float64 `json:"le"`
	Count      float64 `json:"count"`
}

// bucketJSON is a Bucket in JSON: the bound as Prometheus writes its le
// label ("0.25", "+Inf"), since JSON has no number for infinity and every
// histogram's last bucket is +Inf.
type bucketJSON struct {
	UpperBound string  `json:"le"`
	Count      float64 `json:"count"`
}

// MarshalJSON writes the bound as a string.
func (b Bucket) MarshalJSON() ([]byte, error) {
	return json.Marshal(bucketJSON{UpperBound: strconv.FormatFloat(b.UpperBound, 'g', -1, 64), Count: b.Count})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *Bucket) UnmarshalJSON(data []byte) error {
	var j bucketJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	ub, err := strconv.ParseFloat(j.UpperBound, 64)
	if err != nil {
		return fmt.Errorf("histogram bucket le %q: %v", j.UpperBound, err)
	}
	b.UpperBound, b.Count = ub, j.Count
	return nil
}

// Histogram is a Prometheus histogram: cumulative buckets in ascending
// order of UpperBound, the total Count and the Sum of observations.
type Histogram struct {
	Buckets []Bucket `json:"buckets,omitempty"`
	Count   float64  `json:"count"`
	Sum     float64  `json:"sum"`
}

// add merges o into h bucket by bucket, as Prometheus' sum by (le) does;
// series with different bucket layouts keep the union of the bounds.
func (h Histogram) add(o Histogram) Histogram {
	byBound := map[float64]float64{}
	for _, b := range h.Buckets {
		byBound[b.UpperBound] += b.Count
	}
	for _, b := range o.Buckets {
		byBound[b.UpperBound] += b.Count
	}
	out := Histogram{Count: h.Count + o.Count, Sum: h.Sum + o.Sum}
	for ub, c := range byBound {
		out.Buckets = append(out.Buckets, Bucket{UpperBound: ub, Count: c})
	}
	sort.Slice(out.Buckets, func(i, j int) bool { return out.Buckets[i].UpperBound < out.Buckets[j].UpperBound })
	return out
}

// Sub returns the observations made since prev, an earlier reading of the
// same histogram. When any count went down the server restarted and its
// counters began again from zero, so h itself is the difference.
func (h Histogram) Sub(prev Histogram) Histogram {
	if h.Count < prev.Count {
		return h
	}
	old := map[float64]float64{}
	for _, b := range prev.Buckets {
		old[b.UpperBound] = b.Count
	}
	out := Histogram{Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	for _, b := range h.Buckets {
		d := b.Count - old[b.UpperBound]
		if d < 0 {
			return h
		}
		out.Buckets = append(out.Buckets, Bucket{UpperBound: b.UpperBound, Count: d})
	}
	return out
}

// Quantile estimates the q-quantile (0 <= q <= 1) the way PromQL's
// histogram_quantile does: find the bucket holding rank q*Count and
// interpolate linearly inside it, taking 0 as the lower bound of the first
// bucket. A rank in the +Inf bucket returns the largest finite bound. ok is
// false with no observations or no finite bucket.
func (h Histogram) Quantile(q float64) (v float64, ok bool) {
	if h.Count <= 0 || math.IsNaN(q) || q < 0 || q > 1 || len(h.Buckets) == 0 {
		return 0, false
	}
	rank := q * h.Count
	lower, below := 0.0, 0.0
	lastFinite := math.NaN()
	for _, b := range h.Buckets {
		if math.IsInf(b.UpperBound, 1) {
			break
		}
		lastFinite = b.UpperBound
		if b.Count >= rank && b.Count > below {
			if b.UpperBound < lower { // unordered input; never from a real histogram
				return 0, false
			}
			return lower + (b.UpperBound-lower)*(rank-below)/(b.Count-below), true
		}
		lower, below = b.UpperBound, b.Count
	}
	if math.IsNaN(lastFinite) {
		return 0, false
	}
	return lastFinite, true
}
