// Package capacity sizes a fleet of vLLM replicas for a traffic under an
// SLO, by simulation, on each GPU option: one replica's SLO capacity (a
// bisection over one-replica runs), the fewest replicas each window of the
// traffic needs (each answer a replay of the window through that many
// replicas behind a router), the HorizontalPodAutoscaler thresholds that
// would have held (from one replica's knee) and their replay over the
// whole traffic, with its GPU-hours and cost.
//
// It stands on sim (the engine, the fleet, the HPA's algorithm) and
// workload (the traffic); internal/report assembles an option's replica
// from a plan and renders what Size returns. Every search here is
// deterministic: windows are sized in rounds whose verdicts depend only on
// earlier rounds, so the answer does not depend on how many CPUs ran it.
// docs/capacity.md has the method, the bounds and the measurements.
package capacity
