package gpu

// This file is the device catalog: the one place where a GPU's memory is
// written down. TotalBytes is what cudaMemGetInfo (torch.cuda.mem_get_info,
// vLLM's "total") reports, which is the marketing size less ECC and the
// driver's reservation. NVIDIA's "80GB" HBM parts carry 80 GiB; datacenter
// GDDR6 parts with ECC on lose 1/16 of it (nvidia-smi shows 23028 MiB on a
// 24 GiB A10G); the driver then keeps a further few hundred MiB, and newer
// drivers keep about 0.2 GiB more than older ones (A100-80GB logs show
// 79.35 GiB on old drivers and 79.15 GiB on current ones). Where two
// figures circulate we take the current-driver one, and where we are unsure
// we take the lower one, so a plan errs towards not fitting.
//
// Figures written "N GiB" in a source were printed by PyTorch or vLLM with
// two decimals; the MiB values below are the whole MiB that print so.

// entry is one catalog device and the spellings that name it. Aliases are
// matched after normalisation (see key), so "NVIDIA-A100-SXM4-80GB",
// "a100 80g" and "A100_80GB" need only one alias, "A100-80GB".
type entry struct {
	dev     Device
	aliases []string
}

// catalog is read-only; functions hand out copies.
var catalog = []entry{
	// ---- NVIDIA datacenter, oldest first ----
	{Device{Name: "K80", Vendor: "nvidia", ComputeCapability: "3.7",
		NominalBytes: 12 * gib, TotalBytes: 11441 * mib,
		Source: `one GK210 of a K80 board; PyTorch OOM messages say "11.17 GiB total capacity"`},
		[]string{"Tesla K80", "K80 12GB"}},
	{Device{Name: "M60", Vendor: "nvidia", ComputeCapability: "5.2",
		NominalBytes: 8 * gib, TotalBytes: 8129 * mib, Estimated: true,
		Source: "one GM204 of an M60 board; estimate: 8 GiB less about 60 MiB driver reservation (7.94 GiB)"},
		[]string{"Tesla M60", "M60 8GB"}},
	{Device{Name: "T4", Vendor: "nvidia", ComputeCapability: "7.5",
		NominalBytes: 16 * gib, TotalBytes: 15109 * mib,
		Source: `PyTorch on T4 prints total_memory=15109MB and OOM messages say "14.75 GiB total capacity" (nvidia-smi: 15360 MiB)`},
		[]string{"Tesla T4", "T4 16GB"}},
	{Device{Name: "T4G", Vendor: "nvidia", ComputeCapability: "7.5",
		NominalBytes: 16 * gib, TotalBytes: 15109 * mib, Estimated: true,
		Source: "estimate: the T4's figure (same 16 GiB GDDR6 board, in AWS Graviton g5g hosts)"},
		[]string{"T4G 16GB"}},
	{Device{Name: "V100-16GB", Vendor: "nvidia", ComputeCapability: "7.0",
		NominalBytes: 16 * gib, TotalBytes: 16160 * mib,
		Source: `PyTorch on V100-SXM2-16GB prints total_memory=16160MB; OOM messages say "15.78 GiB total capacity"`},
		[]string{"V100 16GB", "Tesla V100 16GB"}},
	{Device{Name: "V100-32GB", Vendor: "nvidia", ComputeCapability: "7.0",
		NominalBytes: 32 * gib, TotalBytes: 32510 * mib,
		Source: `PyTorch OOM messages on V100 32GB say "31.75 GiB total capacity"`},
		[]string{"V100 32GB", "V100S", "V100S 32GB", "Tesla V100 32GB"}},
	{Device{Name: "A2", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 16 * gib, TotalBytes: 15056 * mib, Estimated: true,
		Source: "estimate: nvidia-smi 15356 MiB (16 GiB GDDR6, ECC on) less about 300 MiB reserved, as on the A10G (14.70 GiB)"},
		[]string{"A2 16GB"}},
	{Device{Name: "A16", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 16 * gib, TotalBytes: 15056 * mib, Estimated: true,
		Source: "one of the four GPUs of an A16 board; estimate as for the A2 (same 16 GiB GDDR6 with ECC, 14.70 GiB)"},
		[]string{"A16 16GB"}},
	{Device{Name: "A10G", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 24 * gib, TotalBytes: 22722 * mib,
		Source: `PyTorch OOM messages on AWS g5 say "22.19 GiB total capacity" (nvidia-smi: 23028 MiB, ECC on)`},
		[]string{"A10G 24GB"}},
	{Device{Name: "A10", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 24 * gib, TotalBytes: 22722 * mib, Estimated: true,
		Source: "estimate: the A10G's figure (same GA102 board with 24 GiB GDDR6 and ECC; nvidia-smi 23028 MiB on both)"},
		[]string{"A10 24GB"}},
	{Device{Name: "L4", Vendor: "nvidia", ComputeCapability: "8.9",
		NominalBytes: 24 * gib, TotalBytes: 22559 * mib,
		Source: "vLLM logs on L4 show 22.03 GiB total (nvidia-smi: 23034 MiB, ECC on); some older logs show 22.17, we keep the lower"},
		[]string{"L4 24GB"}},
	{Device{Name: "A40", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 48 * gib, TotalBytes: 45414 * mib,
		Source: `PyTorch OOM messages on A40 say "44.35 GiB total capacity" (nvidia-smi: 46068 MiB, ECC on)`},
		[]string{"A40 48GB"}},
	{Device{Name: "L40", Vendor: "nvidia", ComputeCapability: "8.9",
		NominalBytes: 48 * gib, TotalBytes: 45455 * mib, Estimated: true,
		Source: "estimate: the L40S's figure (same 48 GiB GDDR6 with ECC, nvidia-smi 46068 MiB on both)"},
		[]string{"L40 48GB"}},
	{Device{Name: "L40S", Vendor: "nvidia", ComputeCapability: "8.9",
		NominalBytes: 48 * gib, TotalBytes: 45455 * mib,
		Source: "vLLM logs on L40S show 44.39 GiB total (nvidia-smi: 46068 MiB, ECC on)"},
		[]string{"L40S 48GB"}},
	{Device{Name: "A100-40GB", Vendor: "nvidia", ComputeCapability: "8.0",
		NominalBytes: 40 * gib, TotalBytes: 40335 * mib,
		Source: `PyTorch OOM messages on A100 40GB say "39.39 GiB total capacity" with current drivers (39.59 on old ones)`},
		[]string{"A100 40GB", "A100-SXM4-40GB", "A100-PCIE-40GB"}},
	{Device{Name: "A100-80GB", Vendor: "nvidia", ComputeCapability: "8.0",
		NominalBytes: 80 * gib, TotalBytes: 81050 * mib,
		Source: `PyTorch OOM text "GPU 0 has a total capacity of 79.15 GiB" on A100 80GB (79.35 on old drivers); SXM4 and PCIe alike`},
		[]string{"A100 80GB", "A100-SXM4-80GB", "A100 80GB PCIe"}},
	{Device{Name: "A800-80GB", Vendor: "nvidia", ComputeCapability: "8.0",
		NominalBytes: 80 * gib, TotalBytes: 81050 * mib, Estimated: true,
		Source: "estimate: the A100-80GB's figure (the A800 is an A100 with slower NVLink, same memory)"},
		[]string{"A800 80GB", "A800-SXM4-80GB"}},
	{Device{Name: "H100-80GB", Vendor: "nvidia", ComputeCapability: "9.0",
		NominalBytes: 80 * gib, TotalBytes: 85_029_158_912,
		// 85,029,158,912 B / 2^30 = 79.1896 GiB, logged "79.19"; ceil(x*0.95) =
		// 80,777,700,967 B = 75.2301 GiB, logged "75.23". nvidia-smi: 81559 MiB.
		Source: "52 of the 57 vLLM 0.19.0 start-ups on H100-80GB log total 79.19 GiB and requested 75.23 GiB at utilization 0.95 (the llm-d capacity planner's published start-up logs); the PCIe card reports the same"},
		[]string{"H100 80GB", "H100 80GB HBM3", "H100-SXM5-80GB", "H100 80GB PCIe"}},
	{Device{Name: "H800", Vendor: "nvidia", ComputeCapability: "9.0",
		NominalBytes: 80 * gib, TotalBytes: 85_029_158_912, Estimated: true,
		Source: "estimate: the H100-80GB's figure (the H800 is an H100 with slower NVLink, same memory)"},
		[]string{"H800 80GB", "H800 80GB HBM3"}},
	{Device{Name: "H100-94GB", Vendor: "nvidia", ComputeCapability: "9.0",
		NominalBytes: 94 * gib, TotalBytes: 95334 * mib,
		Source: "vLLM logs on H100 NVL show 93.10 GiB total (nvidia-smi: 95830 MiB)"},
		[]string{"H100 NVL", "H100 94GB", "H100 NVL 94GB"}},
	{Device{Name: "H20", Vendor: "nvidia", ComputeCapability: "9.0",
		NominalBytes: 96 * gib, TotalBytes: 97402 * mib, Estimated: true,
		Source: "estimate: nvidia-smi 97871 MiB less the H100's 469 MiB reservation (95.12 GiB)"},
		[]string{"H20 96GB"}},
	{Device{Name: "GH200", Vendor: "nvidia", ComputeCapability: "9.0",
		NominalBytes: 96 * gib, TotalBytes: 97402 * mib, Estimated: true,
		Source: "estimate for the 96 GB HBM3 GH200 (\"GH200 480GB\"): as the H20, 97871 MiB less 469 MiB; the 144 GB HBM3e GH200 is not in the catalog, give --gpu-memory"},
		[]string{"GH200 480GB", "GH200 96GB"}},
	{Device{Name: "H200", Vendor: "nvidia", ComputeCapability: "9.0",
		NominalBytes: 141 * gib, TotalBytes: 143165 * mib,
		Source: "vLLM logs on H200 show 139.81 GiB total (nvidia-smi: 143771 MiB); H200 NVL has the same 141 GB"},
		[]string{"H200 141GB", "H200 NVL"}},
	{Device{Name: "B200", Vendor: "nvidia", ComputeCapability: "10.0",
		NominalBytes: 180 * gib, TotalBytes: 182682 * mib,
		Source: "vLLM logs on HGX B200 show 178.40 GiB total (nvidia-smi: 183359 MiB)"},
		[]string{"B200 180GB", "B200 192GB"}},
	{Device{Name: "B300", Vendor: "nvidia", ComputeCapability: "10.3",
		NominalBytes: 288 * gib, TotalBytes: 274360 * mib, Estimated: true,
		Source: "estimate: nvidia-smi about 275040 MiB on B300 SXM6 less the B200's 677 MiB reservation (267.93 GiB)"},
		[]string{"B300 288GB", "B300 AC"}},

	// ---- NVIDIA workstation and consumer cards (ECC off by default) ----
	{Device{Name: "RTX-3090", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 24 * gib, TotalBytes: 24115 * mib,
		Source: "vLLM logs on RTX 3090/4090 show 23.55 to 23.58 GiB total, by driver; we take the lower, 23.55"},
		[]string{"RTX 3090", "3090", "RTX3090 24GB"}},
	{Device{Name: "RTX-4090", Vendor: "nvidia", ComputeCapability: "8.9",
		NominalBytes: 24 * gib, TotalBytes: 24115 * mib,
		Source: "vLLM logs on RTX 3090/4090 show 23.55 to 23.58 GiB total, by driver; we take the lower, 23.55"},
		[]string{"RTX 4090", "4090", "RTX4090 24GB"}},
	{Device{Name: "RTX-5090", Vendor: "nvidia", ComputeCapability: "12.0",
		NominalBytes: 32 * gib, TotalBytes: 32113 * mib,
		Source: "vLLM logs on RTX 5090 show 31.4 GiB total; we take 31.36 GiB, the low end of what rounds so"},
		[]string{"RTX 5090", "5090", "RTX5090 32GB"}},
	{Device{Name: "RTX-A6000", Vendor: "nvidia", ComputeCapability: "8.6",
		NominalBytes: 48 * gib, TotalBytes: 48681 * mib,
		Source: `PyTorch OOM messages on RTX A6000 say "47.54 GiB total capacity" (nvidia-smi: 49140 MiB)`},
		[]string{"RTX A6000", "A6000"}},
	{Device{Name: "RTX-6000-Ada", Vendor: "nvidia", ComputeCapability: "8.9",
		NominalBytes: 48 * gib, TotalBytes: 48640 * mib, Estimated: true,
		Source: "estimate: nvidia-smi 49140 MiB as on the RTX A6000, less a slightly larger current-driver reservation (47.50 GiB)"},
		[]string{"RTX 6000 Ada", "RTX 6000 Ada Generation", "6000 Ada"}},
	{Device{Name: "RTX-PRO-6000", Vendor: "nvidia", ComputeCapability: "12.0",
		NominalBytes: 96 * gib, TotalBytes: 97249 * mib, Estimated: true,
		Source: "estimate: nvidia-smi 97887 MiB on RTX PRO 6000 Blackwell less about 640 MiB reservation (94.97 GiB)"},
		[]string{"RTX PRO 6000", "RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Server Edition",
			"RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Max-Q Workstation Edition",
			"PRO 6000", "PRO 6000 Blackwell"}},

	// ---- AMD Instinct (ROCm reports the HBM size less 16 MiB) ----
	{Device{Name: "MI210", Vendor: "amd",
		NominalBytes: 64 * gib, TotalBytes: 68_702_699_520,
		Source: "rocm-smi VRAM total 68702699520 B (64 GiB less 16 MiB)"},
		[]string{"MI210 64GB"}},
	{Device{Name: "MI250X", Vendor: "amd",
		NominalBytes: 64 * gib, TotalBytes: 68_702_699_520,
		Source: "one GCD (the device ROCm shows) of an MI250X or MI250; rocm-smi VRAM total 68702699520 B"},
		[]string{"MI250X GCD", "MI250"}},
	{Device{Name: "MI300X", Vendor: "amd",
		NominalBytes: 192 * gib, TotalBytes: 192*gib - 16*mib,
		Source: "vLLM ROCm logs show 191.98 GiB total = 192 GiB less 16 MiB, as on the MI210"},
		[]string{"MI300X 192GB", "MI300X VF"}},
	{Device{Name: "MI325X", Vendor: "amd",
		NominalBytes: 256 * gib, TotalBytes: 256*gib - 16*mib, Estimated: true,
		Source: "estimate: 256 GiB HBM3E less 16 MiB, as the MI210 and MI300X report"},
		[]string{"MI325X 256GB"}},
	{Device{Name: "MI355X", Vendor: "amd",
		NominalBytes: 288 * gib, TotalBytes: 288*gib - 16*mib, Estimated: true,
		Source: "estimate: 288 GiB HBM3E less 16 MiB, as the MI210 and MI300X report"},
		[]string{"MI355X 288GB"}},
}

// bareName is a short name that more than one catalog device answers to.
// The first candidate is taken; the others are tried in order when a MIG
// profile rules the first out. The note tells the user what was assumed.
type bareName struct {
	alias      string
	candidates []string
	note       string
}

// bareNames records the decisions for ambiguous short names.
//   - A100 -> 80GB: the cloud SKUs of the last years (Azure NC A100 v4, GCP
//     a2-ultragpu, AWS p4de) carry the 80 GB card.
//   - V100 -> 16GB: most V100 fleets (AWS p3, Azure NCv3) are 16 GB, and the
//     smaller card errs on the safe side.
//   - H100 -> 80GB: SXM and PCIe H100s are 80 GB; only the NVL is 94 GB.
//   - RTX 6000 -> RTX 6000 Ada: the current card of that name; the Turing
//     "Quadro RTX 6000" (24 GB) is not in the catalog.
var bareNames = []bareName{
	{"A100", []string{"A100-80GB", "A100-40GB"}, "A100 taken as A100-80GB; say A100-40GB for the 40 GB card"},
	{"A800", []string{"A800-80GB"}, "A800 taken as A800-80GB; the 40 GB PCIe A800 is not in the catalog"},
	{"V100", []string{"V100-16GB", "V100-32GB"}, "V100 taken as V100-16GB; say V100-32GB for the 32 GB card"},
	{"H100", []string{"H100-80GB", "H100-94GB"}, "H100 taken as H100-80GB (SXM/PCIe); say H100-94GB for the H100 NVL"},
	{"RTX 6000", []string{"RTX-6000-Ada", "RTX-PRO-6000"}, "RTX 6000 taken as RTX 6000 Ada (48 GB); say RTX PRO 6000 for the 96 GB Blackwell card"},
}
