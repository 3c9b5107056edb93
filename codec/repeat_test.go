package codec

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// repeatTuples are three tuples of s whose second value is one shared []uint64 (as
// word count's split emits a line's pos with each word), then one whose second value
// is an equal slice in another box, and whose first value is the same small int as
// the tuple before.
func repeatTuples(s *tuple.Source) []*tuple.Tuple {
	pos := any([]uint64{1 << 40, 7})
	return []*tuple.Tuple{
		mkTuple(s, 3, 7, tuple.Values{"a", pos}, tupleinternal.Edge{Root: 1, Edge: 2}),
		mkTuple(s, 3, 7, tuple.Values{"b", pos}, tupleinternal.Edge{Root: 1, Edge: 3}),
		mkTuple(s, 3, 7, tuple.Values{7, pos}, tupleinternal.Edge{Root: 1, Edge: 4}),
		mkTuple(s, 3, 7, tuple.Values{7, []uint64{1 << 40, 7}}, tupleinternal.Edge{Root: 5, Edge: 6}),
	}
}

func dataWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).data }

// A value shared by consecutive tuples travels once and is shared again on the
// receiving side; an equal value in another box travels in full and stays its own.
func TestRepeatedValues(t *testing.T) {
	topo := testTopology(t)
	st := NewStreams(topo)
	s := src(topo, "count", "default")
	m := &transport.Message{Kind: transport.KindTuples, From: 3, To: 7, Epoch: 1, Seq: 1, Pos: 4, Tuples: repeatTuples(s)}
	enc, err := AppendMessage(nil, m, st)
	if err != nil {
		t.Fatal(err)
	}
	// The pos is written in full once per box: tuples 0 and 3.
	full, _ := AppendValue(nil, []uint64{1 << 40, 7})
	if n := bytes.Count(enc, full); n != 2 {
		t.Fatalf("pos written %d times, want 2 (once per box): % x", n, enc)
	}
	got, err := ReadMessage(enc, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tuples) != 4 {
		t.Fatalf("%d tuples", len(got.Tuples))
	}
	for i, tt := range got.Tuples {
		if !reflect.DeepEqual(tt.Values(), m.Tuples[i].Values()) {
			t.Fatalf("tuple %d: %#v, want %#v", i, tt.Values(), m.Tuples[i].Values())
		}
		if tt.Root() != m.Tuples[i].Root() || tt.Source() != s {
			t.Fatalf("tuple %d: root %x source %v", i, tt.Root(), tt.Source())
		}
	}
	v := got.Tuples
	if p := dataWord(v[0].Value(1)); p != dataWord(v[1].Value(1)) || p != dataWord(v[2].Value(1)) {
		t.Fatal("the shared pos decoded into separate values")
	}
	if dataWord(v[3].Value(1)) == dataWord(v[2].Value(1)) {
		t.Fatal("an equal pos in another box decoded into the shared one")
	}
	if &v[0].Value(1).([]uint64)[0] == &m.Tuples[0].Value(1).([]uint64)[0] {
		t.Fatal("the decoded pos shares memory with the sender's")
	}
	// Re-encoding the decoded message gives the same frame.
	again, err := AppendMessage(nil, got, st)
	if err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("re-encoded % x (%v), want % x", again, err, enc)
	}
}

// A repeat with no previous tuple, or beyond the previous tuple's values, is
// refused; outside a frame's tuples the marker is no value at all.
func TestRepeatCorrupt(t *testing.T) {
	topo := testTopology(t)
	st := NewStreams(topo)
	s := src(topo, "count", "default")
	one := func(vals ...tuple.Values) []byte {
		m := &transport.Message{Kind: transport.KindTuples, From: 3, To: 7}
		for _, v := range vals {
			m.Tuples = append(m.Tuples, mkTuple(s, 3, 7, v))
		}
		enc, err := AppendMessage(nil, m, st)
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}
	// The first tuple's first value made a repeat: its 0x02 'x' 0x01 'x' (tag string, length 1, "x").
	enc := one(tuple.Values{"x"})
	i := bytes.Index(enc, []byte{tagString, 1, 'x'})
	bad := append(append(append([]byte(nil), enc[:i]...), repeatValue), enc[i+3:]...)
	if _, err := ReadMessage(bad, st); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a repeat in the first tuple: %v", err)
	}
	// The second tuple has two values, the first one: its second repeats nothing.
	shared := any("s")
	enc = one(tuple.Values{shared}, tuple.Values{shared, "y"})
	if bytes.Count(enc, []byte{repeatValue}) != 1 {
		t.Fatalf("want one repeat: % x", enc)
	}
	i = bytes.LastIndex(enc, []byte{tagString, 1, 'y'})
	bad = append(append(append([]byte(nil), enc[:i]...), repeatValue), enc[i+3:]...)
	if _, err := ReadMessage(bad, st); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a repeat beyond the previous tuple's values: %v", err)
	}
	if _, _, err := ReadValue([]byte{repeatValue}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadValue of the marker: %v", err)
	}
	// nil is never repeated (it has no box), and AppendValues (a value's bytes, the
	// hash's) never writes the marker.
	enc = one(tuple.Values{nil}, tuple.Values{nil})
	if bytes.Contains(enc, []byte{repeatValue}) {
		t.Fatalf("nil repeated: % x", enc)
	}
	vals, _ := AppendValues(nil, tuple.Values{shared, shared}, nil)
	if bytes.Contains(vals, []byte{repeatValue}) {
		t.Fatalf("AppendValues wrote the marker: % x", vals)
	}
}
