package lineage

import (
	"fmt"
	"testing"
)

// TestBounds: the failures FIFO keeps MaxTrees trees, dropping the oldest, and a
// message id lookup finds the newest root of a replayed message.
func TestBounds(t *testing.T) {
	r, err := New(Config{Sample: 0, MaxTrees: 3, MaxNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		r.End(int64(i), uint64(i), fmt.Sprint(i%4), "s", 1, 0, Failed, "boom")
	}
	st := r.Stats()
	if st.Failures != 3 || st.Evicted != 2 {
		t.Fatalf("stats %+v, want 3 kept, 2 evicted", st)
	}
	if _, ok := r.Lookup(fmt.Sprintf("%016x", 1)); ok {
		t.Error("root 1 kept past the bound")
	}
	// Message "1" was root 1 (evicted) and root 5: the lookup finds 5.
	if tr, ok := r.Lookup("1"); !ok || tr.Root != 5 {
		t.Errorf("lookup of message 1 = %+v %v, want root 5", tr.Root, ok)
	}
	if got := r.Attempts("1"); len(got) != 1 || got[0] != 5 {
		t.Errorf("attempts of message 1 = %v", got)
	}
	// Completed unsampled trees are not kept; MaxNodes truncates.
	r.End(9, 9, "x", "s", 1, 0, Completed, "")
	if _, ok := r.Lookup("x"); ok {
		t.Error("completed unsampled tree kept")
	}
	r2, _ := New(Config{Sample: 1, MaxTrees: 3, MaxNodes: 2})
	r2.Start(1, 42, "m", "s", 1, []Node{{ID: 1}, {ID: 2}, {ID: 3}})
	if tr, _ := r2.Lookup("m"); len(tr.Nodes) != 2 || tr.Truncated != 1 {
		t.Errorf("nodes %d truncated %d, want 2 and 1", len(tr.Nodes), tr.Truncated)
	}
	for _, bad := range []Config{{Sample: -0.1, MaxTrees: 1, MaxNodes: 1}, {Sample: 1.5, MaxTrees: 1, MaxNodes: 1}, {MaxTrees: 0, MaxNodes: 1}, {MaxTrees: 1}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}

// TestSampledThreshold: the fraction of roots below the threshold is the sample.
func TestSampledThreshold(t *testing.T) {
	r, _ := New(Config{Sample: 0.25, MaxTrees: 1, MaxNodes: 1})
	if !r.Sampled(1) || r.Sampled(0) || r.Sampled(1<<62) || !r.Sampled(1<<62-1) {
		t.Errorf("threshold %x", r.Threshold())
	}
}

// TestMessageIDChangedBetweenStartAndEnd: the first id names the tree; the index never
// points at a dropped tree, and it stays bounded (found by review: a nil dereference).
func TestMessageIDChangedBetweenStartAndEnd(t *testing.T) {
	r, _ := New(Config{Sample: 1, MaxTrees: 2, MaxNodes: 10})
	r.Start(1, 0x10, "&{1 0}", "s", 1, nil)
	r.End(2, 0x10, "&{1 1}", "s", 1, 1, Completed, "")
	for i := range 5 {
		r.Start(3, 0x100+uint64(i), fmt.Sprint("m", i), "s", 1, nil)
	}
	if _, ok := r.Lookup("&{1 0}"); ok {
		t.Error("an evicted tree is still found")
	}
	for i := range 1000 {
		r.Start(4, 0x1000+uint64(i), fmt.Sprint("a", i), "s", 1, nil)
		r.End(5, 0x1000+uint64(i), fmt.Sprint("b", i), "s", 1, 4, Completed, "")
	}
	if n := len(r.byMsg); n != 2 {
		t.Errorf("%d message ids indexed for 2 trees", n)
	}
	if tr, ok := r.Lookup("a999"); !ok || tr.MsgID != "a999" {
		t.Errorf("lookup a999 = %+v %v", tr, ok)
	}
}

// TestLateReportsDoNotEvict: holder and fail reports for trees no longer kept never
// push kept trees out (found by review: a mass timeout emptied the timed-out list).
func TestLateReportsDoNotEvict(t *testing.T) {
	r, _ := New(Config{Sample: 0, MaxTrees: 100, MaxNodes: 10})
	for i := 1; i <= 500; i++ {
		r.End(int64(i), uint64(i), fmt.Sprint(i), "s", 1, 0, TimedOut, "timeout")
	}
	for i := 1; i <= 500; i++ {
		r.Hold(uint64(i), Holder{Component: "sink", Task: 3})
		r.Fail(uint64(10_000+i), FailPoint{Component: "b", Task: 2, Reason: "late"})
	}
	if got := r.Recent(TimedOut, 1000); len(got) != 100 || got[0].Root != 500 {
		t.Fatalf("%d timed-out trees listed (newest %v), want the newest 100", len(got), got[0].Root)
	}
	if tr, _ := r.Lookup("500"); len(tr.Holders) != 1 {
		t.Errorf("holders of 500 = %v", tr.Holders)
	}
	r.Hold(500, Holder{Component: "sink", Task: 3})
	if tr, _ := r.Lookup("500"); len(tr.Holders) != 1 {
		t.Errorf("a repeated report was added twice: %v", tr.Holders)
	}
	if len(r.early) != 100 {
		t.Errorf("%d early fail points kept, want the bound 100", len(r.early))
	}
	// An early fail point joins its tree at End.
	r.End(600, 10_500, "x", "s", 1, 0, Failed, "")
	if tr, _ := r.Lookup("x"); len(tr.Fails) != 1 || tr.Reason != "late" {
		t.Errorf("tree x = %+v", tr)
	}
	// Long ids and reasons are cut.
	r.End(700, 20_000, string(make([]byte, 5000)), "s", 1, 0, Failed, string(make([]byte, 5000)))
	if tr, ok := r.Lookup(fmt.Sprintf("%016x", 20_000)); !ok || len(tr.MsgID) > MaxIDBytes || len(tr.Reason) > MaxReasonBytes {
		t.Errorf("kept %d-byte id and %d-byte reason", len(tr.MsgID), len(tr.Reason))
	}
}
