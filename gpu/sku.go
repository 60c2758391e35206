package gpu

// SKU is a cloud instance type: Count GPUs of one Device.
//
// KAITO's catalog stored the memory of the whole VM (GPUMem) and divided it
// by the count wherever a per-GPU figure was needed, with integer division
// in older versions. We store the count and the per-GPU Device, whose
// TotalBytes is what each GPU reports, so nothing is ever divided.
type SKU struct {
	// Name is the instance type as the cloud spells it ("p4d.24xlarge").
	Name string `json:"name"`
	// Cloud is "azure", "azure-local" (Azure Arc / Azure Local), "aws" or "gcp".
	Cloud string `json:"cloud"`
	// Count is the number of GPUs in one instance.
	Count int `json:"count"`
	// Device is one of those GPUs.
	Device Device `json:"device"`
}

// skuRow is one row of the instance-type table; device names a catalog entry.
type skuRow struct {
	name   string
	cloud  string
	count  int
	device string
}

// skuTable lists GPU instance types. Azure, Azure Local and AWS rows are
// those of KAITO's pkg/sku (HEAD 056b8280, v0.12.0) plus the NVIDIA ones it
// removed (expired VM sizes in #1780, compute capability below 8.0 in
// #2185), which clusters still run; AMD Radeon (V520, V620, MI25),
// Trainium and Inferentia rows are left out because the catalog has no such
// devices. The other rows come from the clouds' instance documentation.
var skuTable = []skuRow{
	// ---- Azure (KAITO azure_sku_handler.go) ----
	{"Standard_NV36ads_A10_v5", "azure", 1, "A10"},
	{"Standard_NV72ads_A10_v5", "azure", 2, "A10"},
	{"Standard_NC24ads_A100_v4", "azure", 1, "A100-80GB"},
	{"Standard_NC48ads_A100_v4", "azure", 2, "A100-80GB"},
	{"Standard_NC96ads_A100_v4", "azure", 4, "A100-80GB"},
	{"Standard_ND96asr_A100_v4", "azure", 8, "A100-40GB"},
	{"Standard_ND96amsr_A100_v4", "azure", 8, "A100-80GB"},
	{"Standard_NC40ads_H100_v5", "azure", 1, "H100-94GB"},
	{"Standard_NC80adis_H100_v5", "azure", 2, "H100-94GB"},
	{"Standard_NCC40ads_H100_v5", "azure", 1, "H100-94GB"},
	{"Standard_ND96isr_H100_v5", "azure", 8, "H100-80GB"},
	{"Standard_ND96isr_H200_v5", "azure", 8, "H200"},
	// Not in KAITO: Azure ND MI300X v5.
	{"Standard_ND96isr_MI300X_v5", "azure", 8, "MI300X"},
	// Removed from KAITO: NCv3 (V100), NCasT4_v3, NV and NVv3 (M60).
	{"Standard_NC6s_v3", "azure", 1, "V100-16GB"},
	{"Standard_NC12s_v3", "azure", 2, "V100-16GB"},
	{"Standard_NC24s_v3", "azure", 4, "V100-16GB"},
	{"Standard_NC24rs_v3", "azure", 4, "V100-16GB"},
	{"Standard_NC4as_T4_v3", "azure", 1, "T4"},
	{"Standard_NC8as_T4_v3", "azure", 1, "T4"},
	{"Standard_NC16as_T4_v3", "azure", 1, "T4"},
	{"Standard_NC64as_T4_v3", "azure", 4, "T4"},
	{"Standard_NV6", "azure", 1, "M60"},
	{"Standard_NV12", "azure", 2, "M60"},
	{"Standard_NV24", "azure", 4, "M60"},
	{"Standard_NV12s_v3", "azure", 1, "M60"},
	{"Standard_NV24s_v3", "azure", 2, "M60"},
	{"Standard_NV48s_v3", "azure", 4, "M60"},

	// ---- Azure Local / Arc (KAITO arc_sku_handker.go); NK removed ----
	{"Standard_NC4_A2", "azure-local", 1, "A2"},
	{"Standard_NC8_A2", "azure-local", 1, "A2"},
	{"Standard_NC16_A2", "azure-local", 2, "A2"},
	{"Standard_NC32_A2", "azure-local", 2, "A2"},
	{"Standard_NC4_A16", "azure-local", 1, "A16"},
	{"Standard_NC8_A16", "azure-local", 1, "A16"},
	{"Standard_NC16_A16", "azure-local", 2, "A16"},
	{"Standard_NC32_A16", "azure-local", 2, "A16"},
	{"Standard_NK6", "azure-local", 1, "T4"},
	{"Standard_NK12", "azure-local", 2, "T4"},

	// ---- AWS (KAITO aws_sku_handler.go) ----
	{"p4d.24xlarge", "aws", 8, "A100-40GB"},
	{"p4de.24xlarge", "aws", 8, "A100-80GB"},
	{"p5.48xlarge", "aws", 8, "H100-80GB"},
	{"p5e.48xlarge", "aws", 8, "H200"},
	{"p5en.48xlarge", "aws", 8, "H200"},
	{"g6.xlarge", "aws", 1, "L4"},
	{"g6.2xlarge", "aws", 1, "L4"},
	{"g6.4xlarge", "aws", 1, "L4"},
	{"g6.8xlarge", "aws", 1, "L4"},
	{"g6.16xlarge", "aws", 1, "L4"},
	{"gr6.4xlarge", "aws", 1, "L4"},
	{"gr6.8xlarge", "aws", 1, "L4"},
	{"g6.12xlarge", "aws", 4, "L4"},
	{"g6.24xlarge", "aws", 4, "L4"},
	{"g6.48xlarge", "aws", 8, "L4"},
	{"g5.xlarge", "aws", 1, "A10G"},
	{"g5.2xlarge", "aws", 1, "A10G"},
	{"g5.4xlarge", "aws", 1, "A10G"},
	{"g5.8xlarge", "aws", 1, "A10G"},
	{"g5.16xlarge", "aws", 1, "A10G"},
	{"g5.12xlarge", "aws", 4, "A10G"},
	{"g5.24xlarge", "aws", 4, "A10G"},
	{"g5.48xlarge", "aws", 8, "A10G"},
	// Not in KAITO: g6e (L40S) and p6-b200.
	{"g6e.xlarge", "aws", 1, "L40S"},
	{"g6e.2xlarge", "aws", 1, "L40S"},
	{"g6e.4xlarge", "aws", 1, "L40S"},
	{"g6e.8xlarge", "aws", 1, "L40S"},
	{"g6e.16xlarge", "aws", 1, "L40S"},
	{"g6e.12xlarge", "aws", 4, "L40S"},
	{"g6e.24xlarge", "aws", 4, "L40S"},
	{"g6e.48xlarge", "aws", 8, "L40S"},
	{"p6-b200.48xlarge", "aws", 8, "B200"},
	// Removed from KAITO: p2 (K80), p3 (V100), g4dn (T4), g5g (T4G), g3 (M60).
	{"p2.xlarge", "aws", 1, "K80"},
	{"p2.8xlarge", "aws", 8, "K80"},
	{"p2.16xlarge", "aws", 16, "K80"},
	{"p3.2xlarge", "aws", 1, "V100-16GB"},
	{"p3.8xlarge", "aws", 4, "V100-16GB"},
	{"p3.16xlarge", "aws", 8, "V100-16GB"},
	{"p3dn.24xlarge", "aws", 8, "V100-32GB"},
	{"g4dn.xlarge", "aws", 1, "T4"},
	{"g4dn.2xlarge", "aws", 1, "T4"},
	{"g4dn.4xlarge", "aws", 1, "T4"},
	{"g4dn.8xlarge", "aws", 1, "T4"},
	{"g4dn.16xlarge", "aws", 1, "T4"},
	{"g4dn.12xlarge", "aws", 4, "T4"},
	{"g4dn.metal", "aws", 8, "T4"},
	{"g5g.xlarge", "aws", 1, "T4G"},
	{"g5g.2xlarge", "aws", 1, "T4G"},
	{"g5g.4xlarge", "aws", 1, "T4G"},
	{"g5g.8xlarge", "aws", 1, "T4G"},
	{"g5g.16xlarge", "aws", 2, "T4G"},
	{"g5g.metal", "aws", 2, "T4G"},
	{"g3s.xlarge", "aws", 1, "M60"},
	{"g3.4xlarge", "aws", 1, "M60"},
	{"g3.8xlarge", "aws", 2, "M60"},
	{"g3.16xlarge", "aws", 4, "M60"},

	// ---- GCP (Compute Engine accelerator-optimized and G2 machine types) ----
	{"a2-highgpu-1g", "gcp", 1, "A100-40GB"},
	{"a2-highgpu-2g", "gcp", 2, "A100-40GB"},
	{"a2-highgpu-4g", "gcp", 4, "A100-40GB"},
	{"a2-highgpu-8g", "gcp", 8, "A100-40GB"},
	{"a2-megagpu-16g", "gcp", 16, "A100-40GB"},
	{"a2-ultragpu-1g", "gcp", 1, "A100-80GB"},
	{"a2-ultragpu-2g", "gcp", 2, "A100-80GB"},
	{"a2-ultragpu-4g", "gcp", 4, "A100-80GB"},
	{"a2-ultragpu-8g", "gcp", 8, "A100-80GB"},
	{"a3-highgpu-1g", "gcp", 1, "H100-80GB"},
	{"a3-highgpu-2g", "gcp", 2, "H100-80GB"},
	{"a3-highgpu-4g", "gcp", 4, "H100-80GB"},
	{"a3-highgpu-8g", "gcp", 8, "H100-80GB"},
	{"a3-megagpu-8g", "gcp", 8, "H100-80GB"},
	{"a3-edgegpu-8g", "gcp", 8, "H100-80GB"},
	{"a3-ultragpu-8g", "gcp", 8, "H200"},
	{"a4-highgpu-8g", "gcp", 8, "B200"},
	{"g2-standard-4", "gcp", 1, "L4"},
	{"g2-standard-8", "gcp", 1, "L4"},
	{"g2-standard-12", "gcp", 1, "L4"},
	{"g2-standard-16", "gcp", 1, "L4"},
	{"g2-standard-24", "gcp", 2, "L4"},
	{"g2-standard-32", "gcp", 1, "L4"},
	{"g2-standard-48", "gcp", 4, "L4"},
	{"g2-standard-96", "gcp", 8, "L4"},
}

// Devices returns the catalog in a stable order (NVIDIA datacenter cards by
// generation, then workstation and consumer cards, then AMD), for listings
// and --all-gpus. MIG slices are listed by MIGSlices.
func Devices() []Device {
	out := make([]Device, len(catalog))
	for i, e := range catalog {
		out[i] = e.dev
	}
	return out
}

// SKUs returns every known instance type in a stable order (Azure, Azure
// Local, AWS, GCP; within a cloud as the table lists them).
func SKUs() []SKU {
	ix := index()
	out := make([]SKU, 0, len(skuTable))
	for _, r := range skuTable {
		out = append(out, SKU{Name: r.name, Cloud: r.cloud, Count: r.count, Device: catalog[ix.byName[r.device]].dev})
	}
	return out
}
