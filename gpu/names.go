package gpu

import (
	"regexp"
	"sort"
	"strings"
	"sync"

	"headroom.dev/headroom/names"
)

// noiseTokens are words that appear in vendor and GFD product names but do
// not change the memory: vendor and brand words, form factors (an SXM and a
// PCIe H100 report the same memory) and memory technologies.
var noiseTokens = map[string]bool{
	"nvidia": true, "tesla": true, "geforce": true, "amd": true, "instinct": true,
	"sxm": true, "sxm2": true, "sxm3": true, "sxm4": true, "sxm5": true, "sxm6": true, "pcie": true,
	"hbm2": true, "hbm2e": true, "hbm3": true, "hbm3e": true, "gddr6": true, "gddr6x": true, "gddr7": true,
}

// gbRE folds "80gb" and "80gib" into "80g", so "A100 80G", "A100-80GB" and
// "A100 80GiB" meet. Only after a digit, so "gb200" is left alone.
var gbRE = regexp.MustCompile(`([0-9])gi?b`)

// key normalises a device name for lookup: lower case, split on anything
// that is not a letter or digit, drop noise tokens, join, fold GB units.
func key(s string) string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	var b strings.Builder
	for _, f := range fields {
		if !noiseTokens[f] {
			b.WriteString(f)
		}
	}
	return gbRE.ReplaceAllString(b.String(), "${1}g")
}

// skuKey normalises an instance type: lower case, letters and digits only,
// without Azure's "Standard_" prefix, so "standard_nc24ads_a100_v4",
// "NC24ads-A100-v4" and "Standard_NC24ads_A100_v4" meet.
func skuKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return strings.TrimPrefix(b.String(), "standard")
}

// deviceTarget is what a normalised device key resolves to.
type deviceTarget struct {
	candidates []int // catalog indexes; the first is taken
	note       string
}

// lookupIndex holds the normalised keys of every name Resolve accepts.
type lookupIndex struct {
	devices map[string]deviceTarget
	byName  map[string]int // canonical name -> catalog index
	skus    map[string]int // skuKey -> skuTable index
}

// index is built once from the read-only tables and never changed.
var index = sync.OnceValue(buildIndex)

func buildIndex() *lookupIndex {
	ix := &lookupIndex{
		devices: map[string]deviceTarget{},
		byName:  map[string]int{},
		skus:    map[string]int{},
	}
	for i, e := range catalog {
		ix.byName[e.dev.Name] = i
		for _, a := range append([]string{e.dev.Name}, e.aliases...) {
			ix.devices[key(a)] = deviceTarget{candidates: []int{i}}
		}
	}
	for _, b := range bareNames {
		t := deviceTarget{note: b.note}
		for _, c := range b.candidates {
			t.candidates = append(t.candidates, ix.byName[c])
		}
		ix.devices[key(b.alias)] = t
	}
	for i, s := range skuTable {
		ix.skus[skuKey(s.name)] = i
	}
	return ix
}

// Suggest returns up to n known names (catalog devices and instance types)
// closest to name, best first, for "did you mean" messages.
func Suggest(name string, n int) []string {
	if n <= 0 {
		return nil
	}
	// Long input only slows the edit distance; no known name is this long.
	if len(name) > 64 {
		name = name[:64]
	}
	dk, sk := key(name), skuKey(name)
	best := map[string]float64{}
	var order []string
	consider := func(display, input, cand string) {
		if input == "" || cand == "" {
			return
		}
		score := float64(names.Levenshtein(input, cand))
		// A known name that starts with what was typed is the likeliest
		// meaning of a truncated name ("H10", "Standard_NC24").
		if len(input) >= 2 && strings.HasPrefix(cand, input) && score > 0.5 {
			score = 0.5
		}
		// Among equals, the name that agrees longer from the start wins
		// ("H10" is nearer H20 than A10).
		score -= 0.001 * float64(names.CommonPrefix(input, cand))
		if old, ok := best[display]; !ok {
			best[display] = score
			order = append(order, display)
		} else if score < old {
			best[display] = score
		}
	}
	for _, e := range catalog {
		consider(e.dev.Name, dk, key(e.dev.Name))
		for _, a := range e.aliases {
			consider(e.dev.Name, dk, key(a))
		}
	}
	for _, b := range bareNames {
		consider(b.candidates[0], dk, key(b.alias))
	}
	for _, s := range skuTable {
		consider(s.name, sk, skuKey(s.name))
	}
	// Drop names that share too little with the input to help: "xyz" gets
	// no suggestions rather than three random cards.
	limit := max(1, float64(max(len(dk), len(sk)))/2)
	kept := order[:0]
	for _, d := range order {
		if best[d] <= limit {
			kept = append(kept, d)
		}
	}
	order = kept
	sort.SliceStable(order, func(i, j int) bool { return best[order[i]] < best[order[j]] })
	if len(order) > n {
		order = order[:n]
	}
	return order
}
