package gpu

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"24GiB", 25_769_803_776},          // 24 × 2^30 = 24 × 1,073,741,824
		{"24Gi", 25_769_803_776},           // Kubernetes binary suffix, same as GiB
		{"24gib", 25_769_803_776},          // units are case-insensitive
		{"24G", 24_000_000_000},            // Kubernetes decimal suffix: 24 × 10^9
		{"24GB", 24_000_000_000},           // 24 × 10^9
		{"80 GiB", 85_899_345_920},         // 80 × 1,073,741,824
		{" 80GiB\n", 85_899_345_920},       // surrounding space is ignored
		{"81920MiB", 85_899_345_920},       // 81,920 × 2^20 = 81,920 × 1,048,576 = 80 GiB
		{"81920Mi", 85_899_345_920},        // same
		{"85029158912", 85_029_158_912},    // plain bytes (H100 total)
		{"85029158912B", 85_029_158_912},   // explicit B
		{"512KiB", 524_288},                // 512 × 1024
		{"512k", 512_000},                  // Kubernetes "k" = 10^3
		{"1.5Gi", 1_610_612_736},           // 1.5 × 1,073,741,824
		{"0.5GiB", 536_870_912},            // 2^29
		{".5GiB", 536_870_912},             // leading dot allowed
		{"2Ti", 2_199_023_255_552},         // 2 × 2^40
		{"1TB", 1_000_000_000_000},         // 10^12
		{"1e9", 1_000_000_000},             // decimal exponent, as in Kubernetes
		{"2.5e3Mi", 2_621_440_000},         // 2500 × 1,048,576
		{"1E", 1_000_000_000_000_000_000},  // "E" alone is the exa suffix, 10^18
		{"7Ei", 8_070_450_532_247_928_832}, // 7 × 2^60, still below 2^63
		// 79.19 × 1,073,741,824 = 85,029,615,042.56, not a whole byte;
		// rounded up as Kubernetes does.
		{"79.19GiB", 85_029_615_043},
		{"1.0000000001", 2}, // a fraction of a byte rounds up
		{"1e-3", 1},         // 0.001 B rounds up to 1 B, which is positive
	}
	for _, tc := range tests {
		got, err := ParseBytes(tc.in)
		if err != nil {
			t.Errorf("ParseBytes(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseBytesErrors(t *testing.T) {
	tests := []struct{ in, wantSub string }{
		{"", "empty"},
		{"   ", "empty"},
		{"GiB", "bad memory size"},
		{"-1GiB", "bad memory size"},
		{"0", "not positive"},
		{"0.0GiB", "not positive"},
		{"24 XB", "unknown unit"},
		{"24m b", "bad memory size"},
		{"1,5GB", "bad memory size"},
		{"8Ei", "too large"},  // 8 × 2^60 = 2^63 > max int64
		{"1e30", "too large"}, // 10^30
		{strings.Repeat("9", 100), "too long"},
	}
	for _, tc := range tests {
		got, err := ParseBytes(tc.in)
		if err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error containing %q", tc.in, got, tc.wantSub)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantSub) {
			t.Errorf("ParseBytes(%q) error %q, want it to contain %q", tc.in, err, tc.wantSub)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseBytes(%q) error has more than one line: %q", tc.in, err)
		}
	}
}

func TestCustom(t *testing.T) {
	tests := []struct {
		bytes int64
		name  string
	}{
		{24 << 30, "custom-24GiB"},                    // whole GiB
		{24_000_000_000, "custom-24GB"},               // whole 10^9, not whole MiB (24e9 / 2^20 = 22,888.18)
		{(24 << 30) + (512 << 20), "custom-25088MiB"}, // 24 GiB + 512 MiB = 25,088 MiB, not a whole GiB
		{85_029_158_912, "custom-79.19GiB"},           // 85,029,158,912 / 2^30 = 79.1896
	}
	for _, tc := range tests {
		d := Custom(tc.bytes)
		if d.Name != tc.name || d.TotalBytes != tc.bytes {
			t.Errorf("Custom(%d) = %q, %d; want %q, %d", tc.bytes, d.Name, d.TotalBytes, tc.name, tc.bytes)
		}
		if d.Source == "" {
			t.Errorf("Custom(%d) has no source", tc.bytes)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"24GiB", "24Gi", "24G", "24GB", "80 GiB", "81920MiB", "85029158912",
		"1.5Ti", "1e9", "1E", "7Ei", "8Ei", "0", "-1", ".5", "1e-999", "9e999Ei", "GiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBytes(s)
		if err != nil {
			if b != 0 {
				t.Errorf("ParseBytes(%q) = %d with error %v; want 0", s, b, err)
			}
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Errorf("ParseBytes(%q) error is not one line: %q", s, msg)
			}
			return
		}
		if b <= 0 {
			t.Errorf("ParseBytes(%q) = %d, want > 0", s, b)
		}
		if d := Custom(b); d.TotalBytes != b || !strings.HasPrefix(d.Name, "custom-") {
			t.Errorf("Custom(%d) = %+v", b, d)
		}
	})
}
