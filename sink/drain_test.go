package sink

import (
	"fmt"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/waitfor"
)

// Stop drains a batching sink (Storm's deactivate, then drain): with a batch of 100
// rows or 60 s, and 10 inputs held, Stop used to wait its deadline out, ack nothing,
// drop the partial batch in Cleanup and return ErrShutdownTimeout. Now the runtime
// calls Drain once the sink's queue is empty, so the batch is written, its inputs
// are acked, and Stop returns as soon as the trees are done, well within a deadline
// shorter than the batch delay.
func TestStopDrainsAPartialBatch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 100
		opts.BatchDelay = time.Minute
		var recs []*event.Record
		for i := range 10 {
			recs = append(recs, record(fmt.Sprintf("d%d", i), "", -1, `{}`))
		}
		o := newOutcomes()
		rt := startTopology(t, &recordSpout{records: recs, out: o}, opts, 1, false)
		waitSinkExecuted(t, rt, 10)
		eq(t, "acks before the stop", fmt.Sprint(o.counts()), "0 0")
		err := stopTopology(t, rt, 5*time.Second)
		if err != nil {
			t.Fatalf("Stop = %v; want nil (the partial batch drained)", err)
		}
		acks, fails := o.counts()
		eq(t, "acks", acks, 10)
		eq(t, "fails", fails, 0)
		eq(t, "rows", e.count(e.db, "events", ""), 10)
		eq(t, "dropped", c.Snapshot().Dropped, 0)
		eq(t, "sink errors", rt.Stats().Components["sink"].Errors, 0)
	})
}

// waitSinkExecuted waits until the sink has executed n inputs.
func waitSinkExecuted(t *testing.T, rt *engine.Runtime, n uint64) {
	t.Helper()
	waitfor.True(t, 20*time.Second, fmt.Sprintf("the sink to execute %d inputs", n), func() bool { return rt.Stats().Components["sink"].Executed >= n })
}
