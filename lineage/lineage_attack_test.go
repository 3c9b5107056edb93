package lineage

import "testing"

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
