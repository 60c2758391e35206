package gpu

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// Byte units used by the catalog tables and by ParseBytes. They stay
// unexported: rendering sizes belongs to the CLI, and the rest of the
// project counts plain bytes.
const (
	kib int64 = 1 << 10
	mib int64 = 1 << 20
	gib int64 = 1 << 30
)

// unitBytes maps a lower-cased unit suffix to its multiplier.
//
// Decision: we follow Kubernetes resource quantities, so a bare "G" (like
// "24G") is decimal, 10^9, and "Gi" is binary, 2^30. The "B"-suffixed forms
// follow the same split: "GB" = 10^9, "GiB" = 2^30. Units are matched without
// regard to case, so "24gib" works; the price is that a lower-case "m" means
// mega here, not Kubernetes' milli, which is meaningless for a memory size.
var unitBytes = map[string]*big.Int{
	"":    big.NewInt(1),
	"b":   big.NewInt(1),
	"k":   pow(10, 3),
	"kb":  pow(10, 3),
	"m":   pow(10, 6),
	"mb":  pow(10, 6),
	"g":   pow(10, 9),
	"gb":  pow(10, 9),
	"t":   pow(10, 12),
	"tb":  pow(10, 12),
	"p":   pow(10, 15),
	"pb":  pow(10, 15),
	"e":   pow(10, 18),
	"eb":  pow(10, 18),
	"ki":  pow(2, 10),
	"kib": pow(2, 10),
	"mi":  pow(2, 20),
	"mib": pow(2, 20),
	"gi":  pow(2, 30),
	"gib": pow(2, 30),
	"ti":  pow(2, 40),
	"tib": pow(2, 40),
	"pi":  pow(2, 50),
	"pib": pow(2, 50),
	"ei":  pow(2, 60),
	"eib": pow(2, 60),
}

func pow(base, exp int64) *big.Int {
	return new(big.Int).Exp(big.NewInt(base), big.NewInt(exp), nil)
}

// sizeRE splits a size into number, optional decimal exponent and unit.
// The exponent needs digits after the "e", so "1E" stays one exa-byte unit
// while "1e9" is 10^9 bytes, as in Kubernetes.
var sizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]{1,3}))?\s*([A-Za-z]*)$`)

// maxSizeLen bounds the text ParseBytes reads; no honest size is longer.
const maxSizeLen = 64

// ParseBytes reads a memory size such as "24GiB", "24Gi", "24G", "24GB",
// "80 GiB", "81920MiB", "1.5Ti" or "85029158912" and returns it in bytes.
// Binary units (Ki, Mi, Gi, Ti, KiB, MiB, ...) are powers of 1024; decimal
// ones (k, M, G, T, kB, MB, GB, ...) are powers of 1000, as in Kubernetes
// quantities. A fractional result is rounded up to a whole byte, as
// Kubernetes does. The size must be positive and fit in an int64.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty memory size: give a number with a unit, e.g. 24GiB or 80Gi")
	}
	if len(t) > maxSizeLen {
		return 0, fmt.Errorf("memory size %.20q... is too long: give a number with a unit, e.g. 24GiB", t)
	}
	m := sizeRE.FindStringSubmatch(t)
	if m == nil {
		return 0, fmt.Errorf("bad memory size %q: give a non-negative number with a unit, e.g. 24GiB, 24Gi (2^30) or 24GB, 24G (10^9)", s)
	}
	unit, ok := unitBytes[strings.ToLower(m[3])]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q in memory size %q: use B, KiB/MiB/GiB/TiB (or Ki/Mi/Gi/Ti) or kB/MB/GB/TB (or k/M/G/T)", m[3], s)
	}
	num, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("bad number in memory size %q", s)
	}
	if m[2] != "" {
		// Exponent is at most three digits (the regexp), so this stays small.
		var exp int64
		if _, err := fmt.Sscan(m[2], &exp); err != nil {
			return 0, fmt.Errorf("bad exponent in memory size %q", s)
		}
		scale := new(big.Rat).SetInt(pow(10, absInt64(exp)))
		if exp < 0 {
			num.Quo(num, scale)
		} else {
			num.Mul(num, scale)
		}
	}
	num.Mul(num, new(big.Rat).SetInt(unit))
	// Round up to a whole byte.
	q, r := new(big.Int).QuoRem(num.Num(), num.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("memory size %q is not positive: give a size above zero, e.g. 24GiB", s)
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("memory size %q is too large", s)
	}
	return q.Int64(), nil
}

func absInt64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// sizeName writes bytes as a short exact name when it can ("24GiB",
// "81920MiB", "80GB") and as GiB with two decimals otherwise. It is used to
// name custom devices, not to render tables.
func sizeName(b int64) string {
	switch {
	case b > 0 && b%gib == 0:
		return fmt.Sprintf("%dGiB", b/gib)
	case b > 0 && b%mib == 0:
		return fmt.Sprintf("%dMiB", b/mib)
	case b > 0 && b%1_000_000_000 == 0:
		return fmt.Sprintf("%dGB", b/1_000_000_000)
	default:
		return fmt.Sprintf("%.2fGiB", float64(b)/float64(gib))
	}
}
