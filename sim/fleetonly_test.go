package sim

import (
	"context"
	"reflect"
	"testing"

	"headroom.dev/headroom/workload"
)

// A fleet run with FleetOnly reports the fleet exactly as one without,
// and no replica of its own.
func TestFleetOnlySameFleet(t *testing.T) {
	cfg, fe := llama8B(t, "H100-80GB")
	spec := workload.Spec{Rate: 12, Duration: 300, Prompt: workload.Uniform{Lo: 100, Hi: 2000}, Output: workload.Uniform{Lo: 10, Hi: 300}, Seed: 4}
	var reps [2]*FleetReport
	for i, only := range []bool{false, true} {
		r, err := RunFleet(context.Background(), cfg, source(t, spec), FleetOptions{RunOptions: RunOptions{FrontEnd: fe}, Replicas: 3, FleetOnly: only})
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = r
	}
	if len(reps[0].Replicas) != 3 || reps[1].Replicas != nil {
		t.Errorf("replica reports: %d without FleetOnly, %d with", len(reps[0].Replicas), len(reps[1].Replicas))
	}
	if !reflect.DeepEqual(reps[0].Fleet, reps[1].Fleet) || reps[0].ReplicaSeconds != reps[1].ReplicaSeconds {
		t.Errorf("the fleet differs:\n%+v\n%+v", reps[0].Fleet, reps[1].Fleet)
	}
}
