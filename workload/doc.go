// Package workload is headroom's one traffic language: what requests a
// run sends, when, and how long they are. `simulate`, `loadtest`, `plan
// --profile`, the web page and a pasted `vllm bench serve` command all
// describe their traffic as a Spec, read from the same flags (Flags) with
// the same grammar, and turn it into the same stream of requests (Open),
// so that a prediction and a measurement of one description see the same
// request sizes and arrival times.
//
// A Spec has arrivals (Poisson, constant or gamma-distributed at a rate,
// all at once, a closed loop of N in flight, a request log's own times,
// bursts), lengths (fixed, uniform, a range around a length as vllm bench
// serve's random dataset draws it, a profile's distributions, a log's own
// sizes, a ShareGPT or custom dataset sampled as vllm bench serve samples
// it, with CPython's Mersenne Twister for its seeded shuffle) and a bound
// (a number of requests, a duration). A pasted bench command also says
// what its result prints (BenchOutput: --goodput and the percentile
// flags). The package generates and reads requests lazily: memory does
// not grow with their number (a dataset keeps two lengths per entry).
package workload
