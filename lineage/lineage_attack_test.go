package lineage

import (
	"slices"
	"testing"
)

// A tree full at MaxNodes: a tuple emitted then is not recorded and counted as
// truncated once. Its ack, heard later, finds no node and must not count it again
// (since the recorder takes an ack heard before its emit, the ack added a second
// count: every truncated tuple that was acked counted twice).
func TestTruncatedTupleCountedOnce(t *testing.T) {
	r, err := New(Config{Sample: 1, MaxTrees: 10, MaxNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(100, 7, "m7", "spout", 1, []Node{{ID: 10, Component: "spout", Task: 1, ToComponent: "bolt", ToTask: 2, EmittedAt: 100}})
	r.Emit(7, Node{ID: 20, Parents: []uint64{10}, Component: "bolt", Task: 2, ToComponent: "sink", ToTask: 3, EmittedAt: 101})
	r.Emit(7, Node{ID: 30, Parents: []uint64{10}, Component: "bolt", Task: 2, ToComponent: "sink", ToTask: 3, EmittedAt: 102})
	r.Done(105, 7, 10, 2, false, "")
	r.Done(106, 7, 20, 3, false, "")
	r.Done(107, 7, 30, 3, false, "") // the truncated tuple's ack
	tr, ok := r.Lookup("m7")
	if !ok {
		t.Fatal("tree m7 not kept")
	}
	if tr.Truncated != 1 || r.Stats().Truncated != 1 {
		t.Errorf("truncated: tree %d, stats %d; want 1 and 1 (one tuple was not recorded)", tr.Truncated, r.Stats().Truncated)
	}
	if len(tr.Nodes) != 2 {
		t.Errorf("nodes %+v, want 2", tr.Nodes)
	}
}

// Across hosts the ack of a tuple may reach the spout's host after the tree timed
// out there, though the tuple was acked before: the guess from the lineage (pending
// at the end, so held) must not stay listed beside the ack. An ack after the end
// leaves the tuple listed: it was held when the tree ended.
func TestLateAckOfATimedOutTreeIsNoHolder(t *testing.T) {
	r, err := New(Config{Sample: 1, MaxTrees: 10, MaxNodes: 10})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(100, 7, "m7", "spout", 1, []Node{{ID: 10, Component: "spout", Task: 1, ToComponent: "bolt", ToTask: 2, EmittedAt: 100}})
	r.Done(101, 7, 10, 2, false, "")
	for _, id := range []uint64{20, 30} {
		r.Emit(7, Node{ID: id, Parents: []uint64{10}, Component: "bolt", Task: 2, ToComponent: "sink", ToTask: 3, EmittedAt: 101})
	}
	r.End(30100, 7, "m7", "spout", 1, 100, TimedOut, "timeout")
	r.Done(30090, 7, 20, 3, false, "") // acked before the end, heard after it
	r.Done(30200, 7, 30, 3, false, "") // acked after the end: it was held then
	tr, _ := r.Lookup("m7")
	var held []uint64
	for _, h := range tr.Holders {
		held = append(held, h.Node)
	}
	if !slices.Equal(held, []uint64{30}) {
		t.Errorf("holders %v, want [30]: tuple 20 was acked before the tree timed out", held)
	}
}
