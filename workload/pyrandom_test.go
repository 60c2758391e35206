package workload

import (
	"slices"
	"testing"
)

// The reference output of Matsumoto and Nishimura's mt19937ar.c
// (mt19937ar.out, "1000 outputs of genrand_int32()") after
// init_by_array({0x123, 0x234, 0x345, 0x456}, 4) begins 1067595299
// 955945823 477289528 4107218783 4228976476.
func TestMTReference(t *testing.T) {
	r := &pyRandom{}
	r.initByArray([]uint32{0x123, 0x234, 0x345, 0x456})
	var got []uint32
	for range 5 {
		got = append(got, r.uint32())
	}
	if want := []uint32{1067595299, 955945823, 477289528, 4107218783, 4228976476}; !slices.Equal(got, want) {
		t.Errorf("genrand_int32: %v, want %v", got, want)
	}
}

// Values CPython 3.11.7 printed, the interpreter vllm bench serve runs in:
//
//	random.seed(0); random.random()              0.8444218515250481
//	random.seed(42); random.random()             0.6394267984578837
//	random.seed(2**40+7); random.random()        0.6137037779936511 (a two-word key)
//	random.seed(0); [random.getrandbits(32) for _ in range(3)]
//	                                             [3626764237, 1654615998, 3255389356]
//	l = list(range(10)); random.seed(0); random.shuffle(l); l
//	                                             [7, 8, 1, 5, 3, 4, 2, 0, 9, 6]
//	l = list(range(100)); random.seed(1234); random.shuffle(l); l[:10]
//	                                             [71, 80, 18, 26, 55, 51, 27, 98, 6, 75]
//	random.seed(0); [random.choice(range(1000)) for _ in range(5)]
//	                                             [864, 394, 776, 911, 430]
//	random.seed(0); random.choices(range(1000), k=5)
//	                                             [844, 757, 420, 258, 511]
func TestPythonRandom(t *testing.T) {
	for _, c := range []struct {
		seed uint64
		want float64
	}{{0, 0.8444218515250481}, {42, 0.6394267984578837}, {1<<40 + 7, 0.6137037779936511}} {
		if got := newPyRandom(c.seed).random(); got != c.want {
			t.Errorf("seed %d: random() = %v, want %v", c.seed, got, c.want)
		}
	}
	r := newPyRandom(0)
	if got := []uint32{r.getrandbits(32), r.getrandbits(32), r.getrandbits(32)}; !slices.Equal(got, []uint32{3626764237, 1654615998, 3255389356}) {
		t.Errorf("getrandbits(32): %v", got)
	}
	shuffled := func(seed uint64, n int) []int {
		l := make([]int, n)
		for i := range l {
			l[i] = i
		}
		newPyRandom(seed).shuffle(n, func(i, j int) { l[i], l[j] = l[j], l[i] })
		return l
	}
	if got := shuffled(0, 10); !slices.Equal(got, []int{7, 8, 1, 5, 3, 4, 2, 0, 9, 6}) {
		t.Errorf("shuffle(range(10)), seed 0: %v", got)
	}
	if got := shuffled(1234, 100)[:10]; !slices.Equal(got, []int{71, 80, 18, 26, 55, 51, 27, 98, 6, 75}) {
		t.Errorf("shuffle(range(100)), seed 1234: %v", got)
	}
	r = newPyRandom(0)
	var choice, choices []int
	for range 5 {
		choice = append(choice, r.choice(1000))
	}
	// random.choices without weights picks floor(random() × n) each
	// (what bench's oversampling drew before it drew with choice).
	r = newPyRandom(0)
	for range 5 {
		choices = append(choices, int(r.random()*1000))
	}
	if !slices.Equal(choice, []int{864, 394, 776, 911, 430}) || !slices.Equal(choices, []int{844, 757, 420, 258, 511}) {
		t.Errorf("choice: %v, choices: %v", choice, choices)
	}
}

// randbelow(n) stays below n for every n, and a shuffle is a permutation.
func TestPythonRandomInvariants(t *testing.T) {
	r := newPyRandom(7)
	for n := 1; n < 5000; n += 7 {
		if v := r.randbelow(n); v < 0 || v >= n {
			t.Fatalf("randbelow(%d) = %d", n, v)
		}
		if v := r.random(); v < 0 || v >= 1 {
			t.Fatalf("random() = %v", v)
		}
	}
	l := make([]int, 1000)
	for i := range l {
		l[i] = i
	}
	r.shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
	seen := make([]bool, len(l))
	for _, v := range l {
		if seen[v] {
			t.Fatalf("%d twice", v)
		}
		seen[v] = true
	}
}
