package vllm

import "testing"

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want Version
	}{
		{"0.19.0", Version{0, 19, 0, ""}},
		{"v0.19.0", Version{0, 19, 0, ""}},
		{"V0.8.5", Version{0, 8, 5, ""}},
		{" 0.19 ", Version{0, 19, 0, ""}},
		{"0.19.1rc1", Version{0, 19, 1, "rc1"}},
		{"0.11.0+cu128", Version{0, 11, 0, "+cu128"}},
		{"0.10.1.1", Version{0, 10, 1, ".1"}},
		{"1", Version{1, 0, 0, ""}},
	}
	for _, tt := range tests {
		got, err := ParseVersion(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseVersion(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "v", "latest", "0..1", "0.x.1", "0.19a.1", "99999.0.0"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): no error", bad)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0.19.0", "0.19.0", 0},
		{"0.9.2", "0.10.0", -1}, // numeric, not string, order
		{"0.21.0", "0.20.9", 1},
		{"1.0.0", "0.99.99", 1},
		{"0.21.0rc1", "0.21.0", 0}, // suffixes do not order
	}
	for _, tt := range tests {
		if got := MustVersion(tt.a).Compare(MustVersion(tt.b)); got != tt.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	if !MustVersion("0.21.0").AtLeast(MustVersion("0.21.0")) || MustVersion("0.20.1").AtLeast(MustVersion("0.21.0")) {
		t.Error("AtLeast disagrees with Compare")
	}
}
