package vllm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is a vLLM release, e.g. 0.19.0. Pre-release and local suffixes
// ("0.19.1rc1", "0.11.0+cu128") are kept in Suffix and ignored by ordering.
type Version struct {
	Major, Minor, Patch int
	Suffix              string
}

// suffixRe is what may follow MAJOR.MINOR.PATCH in a release: a fourth
// number (vLLM's 0.10.1.1), then PEP 440's pre-release, post-release,
// development and local parts ("rc1", ".post1", ".dev153", "+cu128",
// "+g1b2c3d4.d20250101"). Anything else ("e308", "-garbage") means the
// text is not a release, not a release with a label.
var suffixRe = regexp.MustCompile(`(?i)^(\.\d+)?((a|b|rc)\d*)?(\.?post\d*)?(\.?dev\d*)?(\+[a-z0-9]+([._-][a-z0-9]+)*)?$`)

// maxReleaseLen bounds a release string: the longest PEP 440 version a
// vLLM build prints ("0.11.1rc2.dev153+gabcdef012.d20250101.cu128") is
// under 64 bytes.
const maxReleaseLen = 128

// ParseVersion reads "0.19.0", "v0.19.0", "0.19", "0.19.1rc1" or
// "0.11.0+cu128": the grammar, without judging the release (ParseRelease
// does).
func ParseVersion(s string) (Version, error) {
	orig := s
	s = strings.TrimSpace(s)
	if len(s) > maxReleaseLen {
		return Version{}, fmt.Errorf("vLLM version of %d bytes: give one like %s", len(s), newestKnown)
	}
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
	if !suffixRe.MatchString(v.Suffix) {
		return Version{}, fmt.Errorf("vLLM version %q is not of the form MAJOR.MINOR.PATCH (like 0.19.0), with at most a PEP 440 suffix such as rc1, .post1, .dev2 or +cu128", orig)
	}
	return v, nil
}

// oldestRelease is vLLM's first release on PyPI (0.1.0, June 2023): a
// version before it names no release.
var oldestRelease = Version{0, 1, 0, ""}

// ParseRelease reads a vLLM release that a user, a manifest or an API
// request names (--vllm-version, --upgrade-to, vllm_version, an image tag)
// and refuses what is no release, in one line saying what to give: text
// ParseVersion does not take, a lone number ("5", which reads as 5.0.0),
// a version before vLLM's first release (0.0.0, which would otherwise
// stand for "not given" and silently become the newest). A well-formed
// release newer than Newest() is taken: PastRules says so, for the
// output's notes.
func ParseRelease(s string) (Version, error) {
	v, err := ParseVersion(s)
	if err != nil {
		return Version{}, err
	}
	t := strings.TrimLeft(strings.TrimSpace(s), "vV")
	if !strings.Contains(t, ".") {
		return Version{}, fmt.Errorf("vLLM release %q is one number: give MAJOR.MINOR.PATCH, like %s", strings.TrimSpace(s), newestKnown)
	}
	if v.Compare(oldestRelease) < 0 {
		return Version{}, fmt.Errorf("vLLM release %q is older than vLLM's first release (%s): give the release you run, like %s", strings.TrimSpace(s), oldestRelease, newestKnown)
	}
	return v, nil
}

// PastRules says, for the notes of an output, that v is newer than every
// release the rules know and is planned on the newest one's rules; "" for
// a release the rules know (or none given).
func PastRules(v Version) string {
	if v.Compare(newestKnown) <= 0 {
		return ""
	}
	return fmt.Sprintf("vLLM %s is newer than the newest release these rules know (%s): it is planned on %s's rules, which may not hold for it", v, newestKnown, newestKnown)
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
