package report

import (
	"bytes"
	"context"
	"io"
	"math"
	"testing"

	"headroom.dev/headroom/workload"
)

// FuzzCalibrationFile feeds --calibration any bytes: JSON lines of
// corrections and measured steps, or a kernel table. A simulation through
// it answers every request with finite latencies or refuses in one line;
// it never panics. Seeds: a correction, a measured decode and prefill
// step, a kernel table of the H100 and one of another GPU (refused), and
// broken lines.
func FuzzCalibrationFile(f *testing.F) {
	f.Add(`{"gpu":"H100-80GB","flops_efficiency":0.5,"bandwidth_efficiency":0.4,"overhead_s":0.001}`)
	f.Add(`{"gpu":"H100-80GB","batch":{"Requests":8,"Tokens":8,"Decodes":8,"DecodeContext":8192,"ContextTokens":8192},"seconds":0.009}
{"gpu":"H100-80GB","batch":{"Requests":1,"Tokens":4096,"PrefillTokens":4096,"ContextTokens":4096,"AttentionPairs":8390656,"PrefillPairs":8390656},"seconds":0.12}`)
	f.Add("# headroom gpu-kernels 1\n# gpu: NVIDIA H100 80GB HBM3\n# driver: 580.159.04\n# torch: 2.11.0+cu130\n# cuda: 13.0\nkind,dtype,shape,tokens_per_expert,seconds,flops,bytes\ngemm,bf16,m=8192 n=896 k=896,,2.341799997e-05,1.315333734e+10,3.096576000e+07\n")
	f.Add("# headroom gpu-kernels 1\n# gpu: NVIDIA L40S\nkind,dtype,shape,tokens_per_expert,seconds,flops,bytes\ngemm,bf16,m=1 n=1 k=1,,1e-300,1e300,1\n")
	f.Add(`{"flops_efficiency":-1}`)
	f.Add(`{"batch":{"Requests":1,"Tokens":1,"Decodes":1},"seconds":1e308}`)
	f.Add("{\"gpu\":\"H100-80GB\",\"overhead_s\":1e308}\nnot json")
	f.Add(`{"gpu":"H100-80GB","frontend_completion_request_s":61,"frontend_harmony_request_s":0.002}`)
	f.Fuzz(func(t *testing.T, data string) {
		files := func(string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(data))), nil }
		const n = 20
		req := SimRequest{Engine: EngineRequest{Plan: Request{Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-80GB", Offline: true}, Calibration: "cal.jsonl"},
			Workload: workload.Spec{Rate: 10, NumRequests: n, Prompt: workload.Fixed(100), Output: workload.Fixed(4), Speedup: 1}}
		rep, err := Simulate(context.Background(), offlineEnv(), files, req)
		if !answered(t, rep, err, n) {
			return
		}
		for _, v := range []float64{rep.TTFT.Mean, rep.TPOT.Mean, rep.DurationS} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("TTFT %v ms, TPOT %v ms, %v s", rep.TTFT.Mean, rep.TPOT.Mean, rep.DurationS)
			}
		}
	})
}
