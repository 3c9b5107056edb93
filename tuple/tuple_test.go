package tuple

import (
	"strings"
	"testing"
	"unsafe"
)

func TestFieldsAndLookup(t *testing.T) {
	src := &Source{Component: "split", Stream: "default", Fields: NewFields("word", "n")}
	tp := New(src, 3, Values{"gale", 7})
	if tp.Len() != 2 || tp.Value(1) != 7 || tp.StringByField("word") != "gale" || tp.SourceTask() != 3 || tp.Task() != -1 {
		t.Fatalf("tuple %v", tp)
	}
	if v, ok := tp.Lookup("n"); !ok || v != 7 {
		t.Fatalf("Lookup(n) = %v, %v", v, ok)
	}
	if _, ok := tp.Lookup("nope"); ok {
		t.Fatal("Lookup of an undeclared field succeeded")
	}
	if tp.Anchored() || tp.Root() != 0 || len(tp.Roots()) != 0 || tp.IsTick() {
		t.Fatal("a new tuple is untracked and not a tick")
	}
	if got := src.Fields.Index("n"); got != 1 {
		t.Fatalf("Index = %d", got)
	}
	if err := NewFields("a", "").Validate(); err == nil || err.Error() != "field 1 has an empty name" {
		t.Fatalf("Validate = %v", err)
	}
}

func TestValueByFieldPanicsWithNames(t *testing.T) {
	tp := New(&Source{Component: "c", Stream: "s", Fields: NewFields("a")}, 1, Values{1})
	defer func() {
		p := recover()
		msg, _ := p.(string)
		if !strings.Contains(msg, `stream "s" of "c" has no field "b" (fields [a])`) {
			t.Fatalf("panic %v", p)
		}
	}()
	tp.ValueByField("b")
}

func TestStringByFieldWrongType(t *testing.T) {
	tp := New(&Source{Component: "c", Stream: "s", Fields: NewFields("a")}, 1, Values{1})
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), `field "a" of stream "s" is int, not string`) {
			t.Fatalf("panic %v", p)
		}
	}()
	tp.StringByField("a")
}

// TestTupleSize: a tuple is allocated per delivery; at 96 bytes it stays in the
// allocator's 96-byte size class (112 or more costs about 10% of word count's
// throughput, measured when the lineage fields were added).
func TestTupleSize(t *testing.T) {
	if n := unsafe.Sizeof(Tuple{}); n > 96 {
		t.Errorf("Tuple is %d bytes, want at most 96", n)
	}
}

// NewBatch makes the tuples New would make, each its own: no two share values or
// tracking state.
func TestNewBatchMatchesNew(t *testing.T) {
	src := &Source{Component: "c", Stream: "s", Fields: NewFields("w", "n")}
	vals := []Values{{"a", 1}, {"b", 2}, {"c", 3}}
	batch := NewBatch(len(vals), func(i int) (*Source, int, Values) { return src, 7 + i, vals[i] })
	for i, got := range batch {
		want := New(src, 7+i, vals[i])
		if got.Source() != src || got.SourceTask() != want.SourceTask() || got.Task() != -1 ||
			got.StringByField("w") != vals[i][0] || got.ValueByField("n") != vals[i][1] || got.Root() != 0 {
			t.Fatalf("tuple %d = %v, want %v", i, got, want)
		}
	}
	if batch[0] == batch[1] || &batch[0].Values()[0] == &batch[1].Values()[0] {
		t.Fatal("tuples of a batch share storage")
	}
}
