package engine

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
)

// BenchmarkSpoutStateHeapUnderChurn passes b.N trees through a spout task's state
// with 5,000 in flight (max spout pending), 25 µs apart (40,000 trees/s, a rotation
// every 7.5 s of the default 30 s timeout), and reports the live heap after them:
// the same at 1 million and at 30 million trees, or the buckets creep up with the
// trees passed. Run it at both: -benchtime 1000000x and 30000000x.
func BenchmarkSpoutStateHeapUnderChurn(b *testing.B) {
	const live = 5000
	r := rand.New(rand.NewPCG(4, 4))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newSpoutState(spoutConfig{MessageTimeout: 30 * time.Second, MaxPending: live, Timeouts: true}, 0)
	var ring [live]uint64
	now := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now += int64(25 * time.Microsecond)
		s.Tick(now)
		if root := ring[i%live]; root != 0 {
			s.Outcome(now, acker.Outcome{Root: root, Result: acker.Completed})
		}
		root := r.Uint64() | 1
		ring[i%live] = root
		s.Emit(now, root, i)
	}
	b.StopTimer()
	if want := min(b.N, live); s.Pending() != want {
		b.Fatalf("%d trees pending, want %d", s.Pending(), want)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1024, "live-heap-KiB")
	runtime.KeepAlive(s)
}
