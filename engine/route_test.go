package engine

import (
	"testing"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

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
