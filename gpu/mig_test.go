package gpu

import "testing"

func TestMIGLookups(t *testing.T) {
	tests := []struct {
		in, parent, profile string
		mib                 int64 // `nvidia-smi mig -lgip` memory GiB × 1024
		note                bool
	}{
		{"A100-80GB:3g.40gb", "A100-80GB", "3g.40gb", 40192, false},                 // 39.25 GiB
		{"a100-80gb-mig-3g.40gb", "A100-80GB", "3g.40gb", 40192, false},             // 39.25 GiB
		{"A100 80GB MIG 1g.10gb", "A100-80GB", "1g.10gb", 9728, false},              // 9.50 GiB
		{"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB", "1g.5gb", 4864, false},    // 4.75 GiB
		{"NVIDIA-A100-SXM4-40GB-MIG-3g.20gb", "A100-40GB", "3g.20gb", 19968, false}, // 19.50 GiB
		{"A100-40GB:7g.40gb", "A100-40GB", "7g.40gb", 40192, false},                 // 39.25 GiB
		{"A100-40GB:1g.5gb+me", "A100-40GB", "1g.5gb+me", 4864, false},
		// A bare "A100" means the 80 GB card, which has no 1g.5gb: the 40 GB
		// card is the only A100 that does.
		{"A100:1g.5gb", "A100-40GB", "1g.5gb", 4864, false},
		{"H100:1g.10gb", "H100-80GB", "1g.10gb", 9984, false},      // 9.75 GiB
		{"h100-mig-3g.40gb", "H100-80GB", "3g.40gb", 40448, false}, // 39.50 GiB
		// Extended resources name no parent. 1g.10gb exists on A100-40GB
		// (9.62 GiB), A100-80GB (9.50) and H100-80GB (9.75): the smallest wins.
		{"nvidia.com/mig-1g.10gb", "A100-80GB", "1g.10gb", 9728, true},
		{"nvidia.com/mig-1g.5gb", "A100-40GB", "1g.5gb", 4864, false}, // only on A100-40GB
		{"nvidia.com/mig-1g.10gb.me", "A100-80GB", "1g.10gb+me", 9728, true},
		{"MIG 3g.40gb", "A100-80GB", "3g.40gb", 40192, true},
		{"1g.18gb", "H200", "1g.18gb", 16896, false},
		{"NVIDIA-H200-MIG-3g.71gb", "H200", "3g.71gb", 71424, false},
		{"B200:1g.23gb", "B200", "1g.23gb", 22272, false},
		{"H100 NVL:1g.12gb", "H100-94GB", "1g.12gb", 11264, false},
	}
	for _, tc := range tests {
		sel, err := Resolve(tc.in)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.in, err)
			continue
		}
		d := sel.Device
		if d.Parent != tc.parent || d.MIG != tc.profile || d.TotalBytes != tc.mib<<20 || sel.Count != 1 {
			t.Errorf("Resolve(%q) = %d × %s (parent %s, mig %s, %d MiB), want %s %s %d MiB",
				tc.in, sel.Count, d.Name, d.Parent, d.MIG, d.TotalBytes>>20, tc.parent, tc.profile, tc.mib)
		}
		if want := tc.parent + "-MIG-" + tc.profile; d.Name != want {
			t.Errorf("Resolve(%q) name %q, want %q", tc.in, d.Name, want)
		}
		if (sel.Note != "") != tc.note {
			t.Errorf("Resolve(%q) note %q, want a note: %v", tc.in, sel.Note, tc.note)
		}
	}
}

func TestMIGSlicesSane(t *testing.T) {
	slices := MIGSlices()
	if len(slices) != 6*7 {
		t.Errorf("%d MIG slices, want 7 profiles on each of 6 parents", len(slices))
	}
	seen := map[string]bool{}
	for _, d := range slices {
		if seen[d.Name] {
			t.Errorf("duplicate slice %s", d.Name)
		}
		seen[d.Name] = true
		parent, err := Resolve(d.Parent)
		if err != nil {
			t.Errorf("%s: parent: %v", d.Name, err)
			continue
		}
		p := parent.Device
		if d.TotalBytes <= 0 || d.TotalBytes > p.TotalBytes {
			t.Errorf("%s: %d bytes, parent %s reports %d", d.Name, d.TotalBytes, p.Name, p.TotalBytes)
		}
		// A slice named "Ngb" has less than N GiB, but not by more than 15%.
		if d.TotalBytes >= d.NominalBytes || d.TotalBytes*100 <= d.NominalBytes*85 {
			t.Errorf("%s: %d bytes vs nominal %d", d.Name, d.TotalBytes, d.NominalBytes)
		}
		if d.ComputeCapability != p.ComputeCapability || d.Vendor != "nvidia" || d.Source == "" || !d.Estimated {
			t.Errorf("%s: %+v", d.Name, d)
		}
		// Every slice can be found again by its own name.
		back, err := Resolve(d.Name)
		if err != nil || back.Device != d {
			t.Errorf("Resolve(%q) = %+v, %v", d.Name, back.Device, err)
		}
	}
}
