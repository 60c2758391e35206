package telemetry

import (
	"context"
	"time"
)

// Every calls take(n) for n = 1, 2, ...: the first at once, then every
// interval, until count calls are made (0: no limit), take fails or ctx
// ends. It returns take's error, or nil once ctx has ended: a reading cut
// short by an interrupt is the end of the run, not a failure.
func Every(ctx context.Context, interval time.Duration, count int, take func(n int) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		if err := take(n); err != nil || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if count > 0 && n >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// OpenAndRead opens the GPU reader opt names and takes a first reading, so that
// a missing GPU or a broken nvidia-smi is an error before anything else
// is said or written.
func OpenAndRead(ctx context.Context, opt OpenOptions) (GPUReader, []GPU, error) {
	r, err := OpenGPUs(opt)
	if err != nil {
		return nil, nil, err
	}
	gpus, err := r.GPUs(ctx)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, gpus, nil
}

// Watcher takes readings of a vLLM server and, with GPUs, of its GPUs
// (watch's loop).
type Watcher struct {
	Scraper *Scraper
	// GPUs is nil for no GPU readings.
	GPUs    GPUReader
	Monitor *Monitor
	// Interval is the time between readings; Count stops after that many
	// (0 runs until the context ends).
	Interval time.Duration
	Count    int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Run hands emit every reading with the alerts it raised and what could
// not be read. gpus are the GPUs read before (the first reading's). The
// first scrape must succeed: a wrong URL is then one error, not a stream
// of failed readings; later failures of the server or the GPUs come with
// their reading, whose part that failed is missing.
func (w Watcher) Run(ctx context.Context, gpus []GPU, emit func(Reading, []Alert, error) error) error {
	now := w.Now
	if now == nil {
		now = time.Now
	}
	return Every(ctx, w.Interval, w.Count, func(n int) error {
		var sample *VLLMSample
		s, readErr := w.Scraper.Scrape(ctx)
		switch {
		case readErr == nil:
			sample = &s
		case n == 1 || ctx.Err() != nil:
			return readErr
		}
		if w.GPUs != nil && n > 1 {
			var err error
			if gpus, err = w.GPUs.GPUs(ctx); err != nil {
				if ctx.Err() != nil {
					return err
				}
				gpus = nil
				if readErr == nil {
					readErr = err
				}
			}
		}
		r, alerts := w.Monitor.Observe(now(), sample, gpus)
		return emit(r, alerts, readErr)
	})
}

// Recording takes readings of the GPUs and writes each as lines
// (snapshot's loop): one JSON object a reading, or CSV rows under
// SnapshotCSVHeader.
type Recording struct {
	Reader GPUReader
	JSON   bool
	// Interval is the time between readings; Count stops after that many
	// (0 runs until the context ends).
	Interval time.Duration
	Count    int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Run writes gpus, the reading taken before, then a reading every
// Interval, each through write, and tells read of each once written. A
// reading that fails ends the run with its error.
func (r Recording) Run(ctx context.Context, gpus []GPU, write func([]byte) error, read func(n int, gpus []GPU)) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	return Every(ctx, r.Interval, r.Count, func(n int) error {
		var err error
		if n > 1 {
			if gpus, err = r.Reader.GPUs(ctx); err != nil {
				return err
			}
		}
		lines := [][]byte{nil}
		if r.JSON {
			lines[0], err = SnapshotJSON(now(), r.Reader.Source(), gpus)
		} else {
			lines, err = SnapshotCSV(now(), r.Reader.Source(), gpus)
		}
		for _, l := range lines {
			if err == nil {
				err = write(l)
			}
		}
		if err == nil && read != nil {
			read(n, gpus)
		}
		return err
	})
}
