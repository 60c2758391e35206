package traffic

import (
	"strconv"
	"testing"
)

// TestParseCountAgainstStrconv checks the count reader against strconv
// for every length, with the number at the end of the line and followed
// by other bytes.
func TestParseCountAgainstStrconv(t *testing.T) {
	for _, s := range []string{"0", "7", "42", "512", "7420", "99999", "123456", "1234567", "12345678", "999999999999", "000123"} {
		want, _ := strconv.ParseInt(s, 10, 64)
		for _, tail := range []string{"", " ", " output_tokens=1", ",", "}", "\"", "\r"} {
			line := []byte(s + tail)
			got, ok := parseCount(line, 0)
			if !ok || got != want {
				t.Errorf("parseCount(%q) = %d, %v; want %d", line, got, ok, want)
			}
		}
	}
	for _, bad := range []string{"", "x", " 12", "12a ", "12.5 ", "1234567890123 ", "1234567890123", "12_", "-5 "} {
		if v, ok := parseCount([]byte(bad), 0); ok {
			t.Errorf("parseCount(%q) = %d, true; want not a count", bad, v)
		}
	}
	// "12." at a sentence end is a count; "12.5" is not.
	if v, ok := parseCount([]byte("12. and more"), 0); !ok || v != 12 {
		t.Errorf("parseCount(\"12. and more\") = %d, %v", v, ok)
	}
}

func TestNonDigits(t *testing.T) {
	for c := 0; c < 256; c++ {
		x := uint64(c) | uint64('5')<<8
		nd := nonDigits(x)
		isD := c >= '0' && c <= '9'
		if (nd&0xFF != 0) == isD {
			t.Errorf("byte %#x: digit %v but mask %#x", c, isD, nd&0xFF)
		}
		if nd>>8&0xFF != 0 {
			t.Errorf("byte %#x: its neighbour '5' marked non-digit", c)
		}
	}
}
