package acker

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkLedgerAck measures one ledger step in the steady state of a busy acker:
// 10,000 trees pending, each tree an init, two acks that leave it pending and a final
// ack that completes it. ns/op is per message.
func BenchmarkLedgerAck(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const live = 10_000
	l := New(3)
	type tr struct{ root, e1, e2 uint64 }
	trees := make([]tr, live)
	for i := range trees {
		trees[i] = tr{r.Uint64() | 1, r.Uint64() | 1, r.Uint64() | 1}
		l.Step(0, Msg{Kind: Init, Root: trees[i].root, Val: trees[i].e1, Task: 1})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % live
		t := &trees[k]
		switch (i / live) % 3 {
		case 0: // parent acks, adding a child edge
			l.Step(int64(i), Msg{Kind: Ack, Root: t.root, Val: t.e1 ^ t.e2})
		case 1: // child acks: the tree completes
			l.Step(int64(i), Msg{Kind: Ack, Root: t.root, Val: t.e2})
		case 2: // a new tree takes its place
			t.root, t.e1, t.e2 = r.Uint64()|1, r.Uint64()|1, r.Uint64()|1
			l.Step(int64(i), Msg{Kind: Init, Root: t.root, Val: t.e1, Task: 1})
		}
	}
}

// BenchmarkPendingTreeBytes reports the heap held per pending tree (bytes/tree) for
// 1,000,000 trees spread over the buckets as they would be under a steady load.
func BenchmarkPendingTreeBytes(b *testing.B) {
	const n = 1_000_000
	var perTree float64
	for i := 0; i < b.N; i++ {
		r := rand.New(rand.NewPCG(2, 2))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := New(3)
		for j := range n {
			l.Step(int64(j), Msg{Kind: Init, Root: r.Uint64() | 1, Val: 1, Task: 1})
			if j == n/3 || j == 2*n/3 {
				l.Rotate()
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTree = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(l)
	}
	b.ReportMetric(perTree, "bytes/tree")
}

// BenchmarkLedgerHeapUnderChurn passes b.N trees through a ledger with 5,000 in
// flight (each an init and a completing ack), rotating every 300,000 trees (40,000
// trees/s with rotations every 7.5 s), and reports the live heap after them: the
// same at 1 million and at 30 million trees, or the ledger's maps creep up with the
// trees passed. Run it at both: -benchtime 1000000x and 30000000x.
func BenchmarkLedgerHeapUnderChurn(b *testing.B) {
	const live, rotateEvery = 5000, 300_000
	r := rand.New(rand.NewPCG(3, 3))
	l := New(5)
	var ring [live]uint64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%rotateEvery == rotateEvery-1 {
			l.Rotate()
		}
		if root := ring[i%live]; root != 0 {
			l.Step(int64(i), Msg{Kind: Ack, Root: root, Val: 1})
		}
		root := r.Uint64() | 1
		ring[i%live] = root
		l.Step(int64(i), Msg{Kind: Init, Root: root, Val: 1, Task: 1})
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1024, "live-heap-KiB")
	runtime.KeepAlive(l)
}
