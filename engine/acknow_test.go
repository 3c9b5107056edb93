package engine

import (
	"testing"
	"time"
)

// ackNow's readings, extrapolated from a monotonic reading with the cycle counter,
// stay between monotonic readings taken around them (within a calibration error far
// below the slack), never go backwards, and take a fresh monotonic reading at least
// every millisecond.
func TestAckNowFollowsTheClock(t *testing.T) {
	rt := &Runtime{realClock: true, epoch: time.Now()}
	b := &boltExec{rt: rt}
	const slack = int64(50 * time.Microsecond)
	var last int64
	anchors := map[int64]bool{}
	for i := 0; i < 200000; i++ {
		before := rt.nanotime()
		v := b.ackNow()
		after := rt.nanotime()
		if v < before-slack || v > after+slack {
			t.Fatalf("reading %d: %d ns, outside [%d, %d] by more than %d ns", i, v, before, after, slack)
		}
		if v < last-slack {
			t.Fatalf("reading %d: %d ns after %d", i, v, last)
		}
		last = v
		anchors[b.ackAt] = true
		if i > 1000 && after > int64(5*time.Millisecond) && len(anchors) >= 3 {
			return // extrapolated, and re-anchored more than once
		}
	}
	if len(anchors) < 2 {
		t.Fatalf("%d monotonic readings over %v of readings: never re-anchored", len(anchors), time.Duration(last))
	}
}
