package gpu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// migProfile is one MIG GPU-instance profile of a parent GPU.
type migProfile struct {
	name  string // "3g.40gb", "1g.10gb+me"
	bytes int64  // memory the slice reports
}

// migParent lists a GPU's MIG profiles and where their sizes come from.
type migParent struct {
	parent    string // catalog name
	estimated bool
	source    string
	profiles  []migProfile
}

// migTable holds MIG slice sizes. A slice never reports more than its
// parent's whole-GPU total, so the 7g profiles are capped at that figure.
//
// The A100 figures are the "Memory GiB" column of `nvidia-smi mig -lgip`
// (A100-SXM4-40GB: 4.75 / 9.62 / 19.50 / 39.25; A100-SXM4-80GB: 9.50 /
// 19.50 / 39.25 / 79.25), which nvidia-smi also shows as the MIG device's
// MiB (4864, 9856, 19968, 40192; 9728, 19968, 40192). The H100 figures are
// recalled from the same table and less certain. H100 NVL, H200 and B200
// sizes are estimates: a share of the parent's memory slices, rounded down
// to 0.25 GiB. CUDA inside a slice may report a little less than the table;
// every MIG size is therefore marked as an estimate.
var migTable = []migParent{
	{"A100-40GB", true, "nvidia-smi mig -lgip memory column on A100-SXM4-40GB", []migProfile{
		{"1g.5gb", 4864 * mib},
		{"1g.5gb+me", 4864 * mib},
		{"1g.10gb", 9856 * mib},
		{"2g.10gb", 9856 * mib},
		{"3g.20gb", 19968 * mib},
		{"4g.20gb", 19968 * mib},
		{"7g.40gb", 40192 * mib},
	}},
	{"A100-80GB", true, "nvidia-smi mig -lgip memory column on A100-SXM4-80GB; 7g.80gb capped at the whole GPU's 79.15 GiB", []migProfile{
		{"1g.10gb", 9728 * mib},
		{"1g.10gb+me", 9728 * mib},
		{"1g.20gb", 19968 * mib},
		{"2g.20gb", 19968 * mib},
		{"3g.40gb", 40192 * mib},
		{"4g.40gb", 40192 * mib},
		{"7g.80gb", 81050 * mib},
	}},
	{"H100-80GB", true, "nvidia-smi mig -lgip memory column on H100 80GB HBM3 (9.75 / 19.62 / 39.50 GiB, recalled); 7g.80gb capped at the whole GPU", []migProfile{
		{"1g.10gb", 9984 * mib},
		{"1g.10gb+me", 9984 * mib},
		{"1g.20gb", 20096 * mib},
		{"2g.20gb", 20096 * mib},
		{"3g.40gb", 40448 * mib},
		{"4g.40gb", 40448 * mib},
		{"7g.80gb", 85_029_158_912},
	}},
	{"H100-94GB", true, "estimate: shares of the H100 NVL's 94 GB rounded down (11.00 / 22.50 / 46.00 GiB); 7g.94gb = the whole GPU", []migProfile{
		{"1g.12gb", 11264 * mib},
		{"1g.12gb+me", 11264 * mib},
		{"1g.24gb", 23040 * mib},
		{"2g.24gb", 23040 * mib},
		{"3g.47gb", 47104 * mib},
		{"4g.47gb", 47104 * mib},
		{"7g.94gb", 95334 * mib},
	}},
	{"H200", true, "estimate: shares of the H200's 141 GB rounded down (16.50 / 32.50 / 69.75 GiB); 7g.141gb = the whole GPU", []migProfile{
		{"1g.18gb", 16896 * mib},
		{"1g.18gb+me", 16896 * mib},
		{"1g.35gb", 33280 * mib},
		{"2g.35gb", 33280 * mib},
		{"3g.71gb", 71424 * mib},
		{"4g.71gb", 71424 * mib},
		{"7g.141gb", 143165 * mib},
	}},
	{"B200", true, "estimate: shares of the B200's 180 GB rounded down (21.75 / 43.75 / 88.00 GiB); 7g.180gb = the whole GPU", []migProfile{
		{"1g.23gb", 22272 * mib},
		{"1g.23gb+me", 22272 * mib},
		{"1g.45gb", 44800 * mib},
		{"2g.45gb", 44800 * mib},
		{"3g.90gb", 90112 * mib},
		{"4g.90gb", 90112 * mib},
		{"7g.180gb", 182682 * mib},
	}},
}

// migRE finds a MIG profile at the end of a name: "1g.10gb", "3g.40gb",
// "1g.10gb+me". The device plugin's resource names cannot hold "+", so
// ".me", "-me" and "_me" are read as "+me" too.
var migRE = regexp.MustCompile(`(?i)([1-8])g\.([0-9]{1,3})gb(?:[+._-]?me)?$`)

// migSlice builds the Device for one profile of one parent.
func migSlice(p migParent, prof migProfile) Device {
	parent := catalog[index().byName[p.parent]].dev
	nominal := int64(0)
	if m := migRE.FindStringSubmatch(prof.name); m != nil {
		gb, _ := strconv.ParseInt(m[2], 10, 64)
		nominal = gb * gib
	}
	return Device{
		Name:              p.parent + "-MIG-" + prof.name,
		TotalBytes:        prof.bytes,
		ComputeCapability: parent.ComputeCapability,
		Vendor:            parent.Vendor,
		MIG:               prof.name,
		Source:            p.source,
		NominalBytes:      nominal,
		Estimated:         p.estimated,
		Parent:            p.parent,
	}
}

// MIGSlices returns every known MIG slice as a Device, grouped by parent in
// catalog order, smallest profile first.
func MIGSlices() []Device {
	var out []Device
	for _, p := range migTable {
		for _, prof := range p.profiles {
			out = append(out, migSlice(p, prof))
		}
	}
	return out
}

// resolveMIG reads a name that ends in a MIG profile: "nvidia.com/mig-1g.10gb",
// "A100-80GB:3g.40gb", "a100-80gb-mig-3g.40gb", the GFD product
// "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", or a bare "1g.10gb". ok is false when
// the name has no profile at its end.
func resolveMIG(name string) (sel Selection, ok bool, err error) {
	loc := migRE.FindStringSubmatchIndex(name)
	if loc == nil {
		return Selection{}, false, nil
	}
	profile := strings.ToLower(name[loc[2]:loc[3]] + "g." + name[loc[4]:loc[5]] + "gb")
	if loc[1]-loc[5] > len("gb") {
		profile += "+me"
	}
	prefix := strings.ToLower(name[:loc[0]])
	prefix = strings.TrimPrefix(strings.TrimSpace(prefix), "nvidia.com/")
	prefix = strings.TrimRight(prefix, " :/_.-")
	prefix = strings.TrimSuffix(prefix, "mig")
	prefix = strings.TrimRight(prefix, " :/_.-")

	if prefix == "" {
		return migWithoutParent(profile)
	}
	t, found := index().devices[key(prefix)]
	if !found {
		return Selection{}, true, fmt.Errorf("unknown GPU %q in MIG name %q: name a MIG-capable GPU (%s), e.g. A100-80GB:%s",
			prefix, name, strings.Join(migParents(), ", "), profile)
	}
	for _, c := range t.candidates {
		parent := catalog[c].dev.Name
		for _, p := range migTable {
			if p.parent != parent {
				continue
			}
			for _, prof := range p.profiles {
				if prof.name == profile {
					return Selection{Device: migSlice(p, prof), Count: 1}, true, nil
				}
			}
		}
	}
	first := catalog[t.candidates[0]].dev.Name
	if names := migProfileNames(first); len(names) > 0 {
		return Selection{}, true, fmt.Errorf("%s has no MIG profile %s: its profiles are %s", first, profile, strings.Join(names, ", "))
	}
	return Selection{}, true, fmt.Errorf("%s has no MIG profiles in the catalog: MIG-capable GPUs are %s", first, strings.Join(migParents(), ", "))
}

// migWithoutParent picks a parent for a profile named alone, as in the
// extended resource "nvidia.com/mig-1g.10gb". Decision: among the parents
// that have the profile, take the one whose slice reports the least memory,
// so a plan errs on the safe side, and say which others were possible.
func migWithoutParent(profile string) (Selection, bool, error) {
	var best Device
	var others []string
	for _, p := range migTable {
		for _, prof := range p.profiles {
			if prof.name != profile {
				continue
			}
			d := migSlice(p, prof)
			switch {
			case best.Name == "":
				best = d
			case d.TotalBytes < best.TotalBytes:
				others = append(others, best.Parent)
				best = d
			default:
				others = append(others, d.Parent)
			}
		}
	}
	if best.Name == "" {
		return Selection{}, true, fmt.Errorf("unknown MIG profile %s: known profiles are %s", profile, strings.Join(allMIGProfileNames(), ", "))
	}
	sel := Selection{Device: best, Count: 1}
	if len(others) > 0 {
		sel.Note = fmt.Sprintf("MIG profile %s exists on %s too; took %s, whose slice is smallest; write e.g. %s:%s to be exact",
			profile, strings.Join(others, ", "), best.Parent, others[0], profile)
	}
	return sel, true, nil
}

func migParents() []string {
	out := make([]string, len(migTable))
	for i, p := range migTable {
		out[i] = p.parent
	}
	return out
}

func migProfileNames(parent string) []string {
	for _, p := range migTable {
		if p.parent == parent {
			out := make([]string, len(p.profiles))
			for i, prof := range p.profiles {
				out[i] = prof.name
			}
			return out
		}
	}
	return nil
}

func allMIGProfileNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range migTable {
		for _, prof := range p.profiles {
			if !seen[prof.name] {
				seen[prof.name] = true
				out = append(out, prof.name)
			}
		}
	}
	return out
}
