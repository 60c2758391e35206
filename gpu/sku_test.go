package gpu

import "testing"

func TestSKUCounts(t *testing.T) {
	// Counts and GPU models from KAITO pkg/sku (docs/kaito.md §1) and the
	// clouds' instance pages.
	tests := []struct {
		sku, cloud, device string
		count              int
	}{
		{"Standard_NC24ads_A100_v4", "azure", "A100-80GB", 1},
		{"Standard_NC96ads_A100_v4", "azure", "A100-80GB", 4},
		{"Standard_ND96asr_A100_v4", "azure", "A100-40GB", 8},  // KAITO: 320Gi total = 8 × 40
		{"Standard_ND96amsr_A100_v4", "azure", "A100-80GB", 8}, // 640Gi = 8 × 80
		{"Standard_NC40ads_H100_v5", "azure", "H100-94GB", 1},
		{"Standard_NC80adis_H100_v5", "azure", "H100-94GB", 2}, // 188Gi = 2 × 94
		{"Standard_ND96isr_H100_v5", "azure", "H100-80GB", 8},
		{"Standard_ND96isr_H200_v5", "azure", "H200", 8}, // 1128Gi = 8 × 141
		{"Standard_NV72ads_A10_v5", "azure", "A10", 2},
		{"Standard_NC24s_v3", "azure", "V100-16GB", 4},
		{"Standard_NC64as_T4_v3", "azure", "T4", 4},
		{"Standard_NV24", "azure", "M60", 4},
		{"Standard_NC16_A2", "azure-local", "A2", 2}, // 32Gi since KAITO #990
		{"Standard_NK12", "azure-local", "T4", 2},
		{"p4d.24xlarge", "aws", "A100-40GB", 8},
		{"p4de.24xlarge", "aws", "A100-80GB", 8},
		{"p5.48xlarge", "aws", "H100-80GB", 8},
		{"p5en.48xlarge", "aws", "H200", 8},
		{"g5.xlarge", "aws", "A10G", 1},
		{"g5.12xlarge", "aws", "A10G", 4},
		{"g5.48xlarge", "aws", "A10G", 8},
		{"g6.48xlarge", "aws", "L4", 8},
		{"gr6.8xlarge", "aws", "L4", 1},
		{"g6e.12xlarge", "aws", "L40S", 4},
		{"p3dn.24xlarge", "aws", "V100-32GB", 8},
		{"p2.16xlarge", "aws", "K80", 16},
		{"g4dn.metal", "aws", "T4", 8},
		{"g5g.16xlarge", "aws", "T4G", 2},
		{"a2-highgpu-4g", "gcp", "A100-40GB", 4},
		{"a2-megagpu-16g", "gcp", "A100-40GB", 16},
		{"a2-ultragpu-8g", "gcp", "A100-80GB", 8},
		{"a3-highgpu-8g", "gcp", "H100-80GB", 8},
		{"a3-edgegpu-8g", "gcp", "H100-80GB", 8},
		{"a3-ultragpu-8g", "gcp", "H200", 8},
		{"a4-highgpu-8g", "gcp", "B200", 8},
		{"g2-standard-24", "gcp", "L4", 2},
		{"g2-standard-32", "gcp", "L4", 1},
		{"g2-standard-48", "gcp", "L4", 4},
		{"g2-standard-96", "gcp", "L4", 8},
	}
	for _, tc := range tests {
		sel, err := Resolve(tc.sku)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.sku, err)
			continue
		}
		if sel.Device.Name != tc.device || sel.Count != tc.count || sel.SKU != tc.sku || sel.Cloud != tc.cloud {
			t.Errorf("Resolve(%q) = %d × %s (sku %q, cloud %q), want %d × %s on %s",
				tc.sku, sel.Count, sel.Device.Name, sel.SKU, sel.Cloud, tc.count, tc.device, tc.cloud)
		}
	}
}

func TestSKULookupIgnoresCase(t *testing.T) {
	for _, in := range []string{"P4D.24XLARGE", "standard_nc24ads_a100_v4", "NC24ads_A100_v4", "Standard-NC24ads-A100-v4", "A3-HIGHGPU-8G"} {
		sel, err := Resolve(in)
		if err != nil {
			t.Errorf("Resolve(%q): %v", in, err)
			continue
		}
		if sel.SKU == "" {
			t.Errorf("Resolve(%q) did not find an instance type: %+v", in, sel)
		}
	}
}

func TestSKUs(t *testing.T) {
	skus := SKUs()
	if len(skus) != len(skuTable) {
		t.Fatalf("SKUs() has %d rows, table %d", len(skus), len(skuTable))
	}
	clouds := map[string]bool{"azure": true, "azure-local": true, "aws": true, "gcp": true}
	names := map[string]bool{}
	for i, s := range skus {
		if names[s.Name] {
			t.Errorf("duplicate instance type %s", s.Name)
		}
		names[s.Name] = true
		if !clouds[s.Cloud] {
			t.Errorf("%s: unknown cloud %q", s.Name, s.Cloud)
		}
		if s.Count < 1 || s.Count > 16 {
			t.Errorf("%s: count %d", s.Name, s.Count)
		}
		if s.Device.Name != skuTable[i].device {
			t.Errorf("%s: device %q, table says %q (unknown catalog name?)", s.Name, s.Device.Name, skuTable[i].device)
		}
	}
	// Every KAITO NVIDIA SKU of docs/kaito.md §1 is present.
	for _, n := range []string{
		"Standard_NV36ads_A10_v5", "Standard_NC48ads_A100_v4", "Standard_NCC40ads_H100_v5",
		"Standard_NC6s_v3", "Standard_NC12s_v3", "Standard_NC24rs_v3", "Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3",
		"Standard_NC16as_T4_v3", "Standard_NV6", "Standard_NV12", "Standard_NV12s_v3", "Standard_NV24s_v3", "Standard_NV48s_v3",
		"Standard_NC4_A2", "Standard_NC8_A2", "Standard_NC32_A2", "Standard_NC4_A16", "Standard_NC8_A16", "Standard_NC16_A16",
		"Standard_NC32_A16", "Standard_NK6", "p5e.48xlarge", "g6.xlarge", "g6.2xlarge", "g6.4xlarge", "g6.8xlarge", "g6.16xlarge",
		"gr6.4xlarge", "g6.12xlarge", "g6.24xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge", "g5.24xlarge",
		"p2.xlarge", "p2.8xlarge", "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge",
		"g4dn.8xlarge", "g4dn.16xlarge", "g4dn.12xlarge", "g5g.xlarge", "g5g.2xlarge", "g5g.4xlarge", "g5g.8xlarge", "g5g.metal",
		"g3s.xlarge", "g3.4xlarge", "g3.8xlarge", "g3.16xlarge",
	} {
		if !names[n] {
			t.Errorf("missing KAITO instance type %s", n)
		}
	}
}
