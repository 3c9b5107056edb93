package wordcount

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gale-stream/gale/tuple"
)

// The split task's chunked values hold what plain tuple.Values would, across chunk
// boundaries, and a later word never changes an earlier word's values.
func TestWordValues(t *testing.T) {
	var c wordValues
	pos := any([]uint64{7, 3})
	var got []tuple.Values
	var want []tuple.Values
	for i := range 5*wordChunk + 3 {
		w := fmt.Sprintf("w%d", i)
		off := i * 37 // below and above 256
		got = append(got, c.values(w, pos, off))
		want = append(want, tuple.Values{w, pos, off})
	}
	for i := range got {
		if len(got[i]) != 3 || cap(got[i]) != 3 || !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("word %d: %#v (cap %d), want %#v", i, got[i], cap(got[i]), want[i])
		}
		if s, ok := got[i][0].(string); !ok || s != want[i][0] {
			t.Fatalf("word %d: field word is %T %v", i, got[i][0], got[i][0])
		}
		if o, ok := got[i][2].(int); !ok || o != i*37 {
			t.Fatalf("word %d: field off is %T %v", i, got[i][2], got[i][2])
		}
	}
	// An append to one word's values copies: the next word's are untouched.
	_ = append(got[0], "x")
	if got[1][0] != "w1" {
		t.Fatalf("an append to word 0's values wrote word 1's: %v", got[1])
	}
	if n := testing.AllocsPerRun(1000, func() { c.values("word", pos, 300) }); n > 0.05 {
		t.Fatalf("%.3f allocations per word, want the chunks' share only", n)
	}
}
