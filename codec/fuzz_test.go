package codec

import (
	"bytes"
	"testing"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// FuzzReadValue: no input panics; what decodes re-encodes, and that encoding decodes
// to itself.
func FuzzReadValue(f *testing.F) {
	for _, v := range builtinSamples(f) {
		b, err := AppendValue(nil, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, n, err := ReadValue(data)
		if err != nil {
			return
		}
		if n <= 0 || n > len(data) {
			t.Fatalf("read %d of %d bytes", n, len(data))
		}
		enc, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", v, err)
		}
		v2, n2, err := ReadValue(enc)
		if err != nil || n2 != len(enc) {
			t.Fatalf("re-encoding %x: %v", enc, err)
		}
		enc2, _ := AppendValue(nil, v2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("%x then %x", enc, enc2)
		}
	})
}

// FuzzReadMessage: no input panics; what decodes re-encodes and decodes again.
func FuzzReadMessage(f *testing.F) {
	topo := testTopology(f)
	st := NewStreams(topo)
	s := src(topo, "split", "default")
	for _, m := range []*transport.Message{
		{Kind: transport.KindTuples, From: 3, To: 7, Epoch: 1, Seq: 2, Pos: 3, Tuples: []*tuple.Tuple{
			mkTuple(s, 3, 7, tuple.Values{"word"}, tupleinternal.Edge{Root: 1, Edge: 2}),
			mkTuple(src(topo, "lines", "meta"), 1, 7, tuple.Values{int64(1), []any{"x", 1.5}},
				tupleinternal.Edge{Root: 3, Edge: 4}, tupleinternal.Edge{Root: 5, Edge: 6}),
			mkTuple(tuple.TickSource, 0, 7, tuple.Values{nil}),
		}},
		{Kind: transport.KindTuples, From: 3, To: 7, Tuples: repeatTuples(s)},
		{Kind: transport.KindAcks, Acks: []acker.Msg{{Root: 1, Val: 2, Task: 3, Kind: acker.Ack, Reason: "r"}}},
		{Kind: transport.KindOutcomes, Outcomes: []acker.Outcome{{Root: 1, SpoutTask: 2, Result: acker.Completed, Latency: 3}}},
		{Kind: transport.KindControl, Op: 1, ID: 2, Body: []byte("body")},
		{Kind: transport.KindCredit, Pos: 10},
	} {
		b, err := AppendMessage(nil, m, st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadMessage(data, st)
		if err != nil {
			return
		}
		enc, err := AppendMessage(nil, m, st)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		m2, err := ReadMessage(enc, st)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		enc2, _ := AppendMessage(nil, m2, st)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("%x then %x", enc, enc2)
		}
	})
}
