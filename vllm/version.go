package vllm

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a vLLM release, e.g. 0.19.0. Pre-release and local suffixes
// ("0.19.1rc1", "0.11.0+cu128") are kept in Suffix and ignored by ordering.
type Version struct {
	Major, Minor, Patch int
	Suffix              string
}

// ParseVersion reads "0.19.0", "v0.19.0", "0.19", "0.19.1rc1" or "0.11.0+cu128".
func ParseVersion(s string) (Version, error) {
	orig := s
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "v") || strings.HasPrefix(s, "V") {
		s = s[1:]
	}
	if s == "" {
		return Version{}, fmt.Errorf("empty vLLM version: give one like 0.19.0")
	}
	var v Version
	parts := strings.SplitN(s, ".", 3)
	nums := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		j := 0
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if j == 0 {
			return Version{}, fmt.Errorf("vLLM version %q is not of the form MAJOR.MINOR.PATCH (like 0.19.0)", orig)
		}
		n, err := strconv.Atoi(p[:j])
		if err != nil || n > 1000 {
			return Version{}, fmt.Errorf("vLLM version %q is not of the form MAJOR.MINOR.PATCH (like 0.19.0)", orig)
		}
		*nums[i] = n
		if j < len(p) {
			if i < len(parts)-1 {
				return Version{}, fmt.Errorf("vLLM version %q is not of the form MAJOR.MINOR.PATCH (like 0.19.0)", orig)
			}
			v.Suffix = p[j:]
		}
	}
	return v, nil
}

// MustVersion parses a version literal known at compile time.
func MustVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// IsZero reports whether no version was given.
func (v Version) IsZero() bool { return v == Version{} }

// Compare orders versions by major, minor and patch: -1, 0 or +1.
func (v Version) Compare(o Version) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

// AtLeast reports whether v is o or newer.
func (v Version) AtLeast(o Version) bool { return v.Compare(o) >= 0 }

func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d%s", v.Major, v.Minor, v.Patch, v.Suffix)
}

// MarshalText renders the version as "0.19.0".
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText parses a version.
func (v *Version) UnmarshalText(b []byte) error {
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
