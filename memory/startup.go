package memory

import "headroom.dev/headroom/startup"

// StartupOf is the start-up estimate of a planned server (package startup,
// docs/startup.md): the checkpoint a node reads, each GPU's weights as the
// plan counts them, the ranks they are split over and --load-format. Every
// command that needs a start-up time takes it from here, so the probe
// window of check, a replica's delay in capacity and a launch's timeout in
// probe come from the same numbers.
func StartupOf(b Budget, st startup.Storage) startup.Estimate {
	ranks := max(b.Settings.TensorParallelSize, 1) * max(b.Settings.PipelineParallelSize, 1)
	read := b.Model.CheckpointBytes
	if read <= 0 {
		// No checkpoint size: the weights as loaded, the whole model's.
		read = b.WeightsTotal
	}
	return startup.Of(startup.Input{
		CheckpointBytes: read,
		RankWeightBytes: b.PerGPU.Weights,
		Ranks:           ranks,
		LoadFormat:      b.Settings.LoadFormat(),
		Storage:         st,
	})
}
