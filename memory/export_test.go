package memory

// PlanWith lets the external tests compare a plan that reuses another
// plan's per-layer counts with one that counts them itself.
var PlanWith = planWith
