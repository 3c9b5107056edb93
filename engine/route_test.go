package engine

import (
	"hash/fnv"
	"testing"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Fields grouping must route a key to the same task in every process, so its hash may
// not depend on a per-process seed: for strings it is FNV-1a (checked against
// hash/fnv) followed by a field separator.
func TestFieldsHashIsStable(t *testing.T) {
	for _, w := range []string{"the", "gale", "storm", ""} {
		f := fnv.New64a()
		f.Write([]byte(w))
		want := (f.Sum64() ^ 0xff) * 1099511628211
		if got := hashValue(fnvOffset, w); got != want {
			t.Fatalf("hashValue(%q) = %#x, want %#x", w, got, want)
		}
	}
	r := &route{kind: topology.FieldsKind, targets: []int{1, 2, 3, 4, 5, 6, 7}, fieldIdx: []int{0}}
	for _, w := range []string{"the", "gale"} {
		d1, _ := r.choose(tuple.Values{w}, nil)
		d2, _ := r.choose(tuple.Values{w}, nil)
		if d1[0] != d2[0] || uint64(d1[0]) != mix(hashValue(fnvOffset, w))%7+1 {
			t.Fatalf("%q routed to %v then %v", w, d1, d2)
		}
	}
}

// Shuffle spreads evenly; fields grouping spreads distinct keys over every task.
func TestShuffleAndFieldsSpread(t *testing.T) {
	targets := []int{10, 11, 12}
	sh := &route{kind: topology.ShuffleKind, targets: targets}
	fi := &route{kind: topology.FieldsKind, targets: targets, fieldIdx: []int{1}}
	shuffled, fielded := map[int]int{}, map[int]int{}
	for i := range 3000 {
		d, _ := sh.choose(tuple.Values{i, i}, nil)
		shuffled[d[0]]++
		d, _ = fi.choose(tuple.Values{"x", i}, nil)
		fielded[d[0]]++
	}
	for _, task := range targets {
		if shuffled[task] != 1000 {
			t.Fatalf("shuffle: %v", shuffled)
		}
		if fielded[task] < 800 || fielded[task] > 1200 {
			t.Fatalf("fields: %v", fielded)
		}
	}
}
