package tuple_test

import (
	"testing"

	"github.com/gale-stream/gale/tuple"
)

func TestSlabMakesDistinctTuplesLikeNew(t *testing.T) {
	src := &tuple.Source{Component: "split", Stream: tuple.DefaultStream, Fields: tuple.NewFields("word")}
	var s tuple.Slab
	seen := map[*tuple.Tuple]bool{}
	for i := range 3*tuple.SlabSize + 1 {
		tp := s.New(src, i, tuple.Values{i})
		if seen[tp] {
			t.Fatalf("tuple %d reuses the memory of an earlier one", i)
		}
		seen[tp] = true
		want := tuple.New(src, i, tuple.Values{i})
		if tp.String() != want.String() || tp.SourceTask() != i || tp.Value(0) != i || tp.SourceComponent() != "split" {
			t.Fatalf("slab tuple %d = %v (task %d), want %v", i, tp, tp.SourceTask(), want)
		}
	}
	for tp := range seen {
		if tp.Value(0).(int) != tp.SourceTask() {
			t.Fatalf("tuple of task %d holds %v: a later tuple overwrote it", tp.SourceTask(), tp.Value(0))
		}
	}
}

// sink makes the tuples escape, as the runtime's do.
var sink *tuple.Tuple

func TestSlabAllocatesOncePerBlock(t *testing.T) {
	src := &tuple.Source{Component: "c", Stream: tuple.DefaultStream}
	var s tuple.Slab
	vals := tuple.Values{}
	// AllocsPerRun truncates: one block per SlabSize tuples averages below one.
	if n := testing.AllocsPerRun(10*tuple.SlabSize, func() { sink = s.New(src, 0, vals) }); n != 0 {
		t.Fatalf("%v allocations per tuple, want one per %d tuples", n, tuple.SlabSize)
	}
	if n := testing.AllocsPerRun(100, func() { sink = tuple.New(src, 0, vals) }); n != 1 {
		t.Fatalf("New: %v allocations per tuple, want 1", n)
	}
}

var kept [1024]*tuple.Tuple

// BenchmarkTupleNew compares New with a Slab, tuples kept as a queue keeps them.
func BenchmarkTupleNew(b *testing.B) {
	src := &tuple.Source{Component: "c", Stream: tuple.DefaultStream}
	vals := tuple.Values{1}
	b.Run("New", func(b *testing.B) {
		for i := range b.N {
			kept[i&1023] = tuple.New(src, i, vals)
		}
	})
	b.Run("Slab", func(b *testing.B) {
		var s tuple.Slab
		for i := range b.N {
			kept[i&1023] = s.New(src, i, vals)
		}
	})
}
