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
