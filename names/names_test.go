package names

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"h100", "h100", 0},
		{"h10", "h100", 1},           // one insertion
		{"kitten", "sitting", 3},     // k→s, e→i, +g
		{"lama-3.1", "llama-3.1", 1}, // one insertion
		{"a100", "h100", 1},          // one substitution
		{"×4", "x4", 1},              // runes, not bytes
		{"abc", "", 3},
		{"größe", "grösse", 2}, // ß→s, then one s inserted
	} {
		if got := Levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Levenshtein(tc.b, tc.a); got != tc.want {
			t.Errorf("not symmetric for %q, %q", tc.a, tc.b)
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"h10", "h100", 3},
		{"h10", "a10", 0},
		{"llama-3.1-8b", "llama-3.1-70b", 10}, // "llama-3.1-" is 10 bytes
		{"", "h100", 0},
	} {
		if got := CommonPrefix(tc.a, tc.b); got != tc.want {
			t.Errorf("CommonPrefix(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
