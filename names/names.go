// Package names measures how near a typed name is to a known one, for the
// "did you mean" suggestions of the GPU and model catalogs. It sits on the
// ground floor beside gpu and model, which both use it, so neither imports
// upwards.
package names

// Levenshtein is the edit distance between a and b, counted in runes.
func Levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// CommonPrefix is the length in bytes of the longest common prefix of a and
// b: among names equally distant from the input, the one that agrees longer
// from the start is the likelier meaning ("h10" is nearer h20 than a10).
func CommonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
