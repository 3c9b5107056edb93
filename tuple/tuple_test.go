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
