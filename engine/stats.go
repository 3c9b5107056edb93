package engine

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"time"
)

// Misuse kinds, counted per component and logged at most once per component and kind
// per 10 s (see the package doc's Warnings).
const (
	MisuseDoubleAck      = "double-ack"        // Ack of an input already acked
	MisuseDoubleFail     = "double-fail"       // Fail of an input already failed
	MisuseAckAfterFail   = "ack-after-fail"    // Ack of an input already failed
	MisuseFailAfterAck   = "fail-after-ack"    // Fail of an input already acked
	MisuseAnchorAfterAck = "anchor-after-done" // emit anchored to an acked or failed input (R3)
	MisuseForeignTask    = "foreign-task"      // Ack/Fail in a task that did not receive the input
	MisuseResetAfterDone = "reset-after-done"  // ResetTimeout of an acked or failed input
	MisuseEmitAfterStop  = "emit-after-stop"   // emit or ack after the task shut down
	MisuseBasicOutside   = "basic-outside"     // BasicCollector used after its Execute returned
	MisuseNilTuple       = "nil-tuple"         // a nil input to Ack, Fail or ResetTimeout, or a nil anchor
)

// MisuseKinds lists every misuse kind, so that a count of 0 can be shown.
var MisuseKinds = []string{MisuseDoubleAck, MisuseDoubleFail, MisuseAckAfterFail, MisuseFailAfterAck,
	MisuseAnchorAfterAck, MisuseForeignTask, MisuseResetAfterDone, MisuseEmitAfterStop,
	MisuseBasicOutside, MisuseNilTuple}

// ComponentStats are the counters of one component, summed over its tasks. Counts are
// exact (no sampling) and follow Storm's UI definitions.
type ComponentStats struct {
	ID    string
	Spout bool
	Tasks int
	// Emitted counts emit calls; Transferred counts tuples sent to consumer tasks.
	Emitted, Transferred uint64
	// Spout: trees acked, failed by a bolt, and failed by the message timeout.
	// Bolt: inputs acked and failed.
	Acked, Failed, TimedOut uint64
	// LateOutcomes: acker outcomes for trees the spout had already timed out (ignored).
	LateOutcomes uint64
	// Pending: spout trees in flight now.
	Pending int
	// Bolt: execute calls and the time spent in them.
	Executed    uint64
	ExecuteTime time.Duration
	// Dropped: tuples discarded because a hard stop interrupted their send.
	Dropped uint64
	// Abandoned (spouts): trees given neither Ack nor Fail because the shutdown
	// deadline passed or the Start context was canceled.
	Abandoned int
	// Exhausted (spouts): tasks whose spout said its input is done
	// (topology.FiniteSpout) with no tree in flight; NextTuple is no longer called.
	Exhausted int
	// Ticks delivered (not counted in Executed).
	Ticks uint64
	// Errors reported with ReportError or recovered panics.
	Errors    uint64
	LastError string
	// Misuse by kind (see the Misuse* constants).
	Misuse map[string]uint64
	// CompleteLatency (spouts): emit to tree completion, measured by the spout.
	CompleteLatency *Histogram
	// ExecuteLatency (bolts): time inside Execute, per input. ProcessLatency (bolts):
	// from the start of Execute to the ack of that input (Storm's definition), measured
	// to the end of the Execute call during which the ack came, or to the ack itself
	// when it came between batches (an async or joining bolt). Both nil when
	// Config.LatencyMetrics is off. Like the counters, they are as of the task's last
	// flush.
	ExecuteLatency, ProcessLatency *Histogram
	// SkippedMaxSpout (spouts): time NextTuple was not called because max spout pending
	// was reached (Storm's __skipped-max-spout-ms).
	SkippedMaxSpout time.Duration
	// Backpressure: time spent blocked sending to a full queue.
	Backpressure time.Duration
	// QueueDepth (bolts): tuples waiting in the input queues now (sent to the task
	// and not yet taken by it).
	QueueDepth int
	// Task is the task id of a per-task entry, 0 for a component total.
	Task int
	// ByTask holds one entry per task (component totals only).
	ByTask []*ComponentStats
}

// add sums a task's entry into its component's and keeps it in ByTask.
func (c *ComponentStats) add(t *ComponentStats) {
	c.Emitted += t.Emitted
	c.Transferred += t.Transferred
	c.Acked += t.Acked
	c.Failed += t.Failed
	c.TimedOut += t.TimedOut
	c.LateOutcomes += t.LateOutcomes
	c.Pending += t.Pending
	c.Executed += t.Executed
	c.ExecuteTime += t.ExecuteTime
	c.Dropped += t.Dropped
	c.Abandoned += t.Abandoned
	c.Exhausted += t.Exhausted
	c.Ticks += t.Ticks
	c.Errors += t.Errors
	if t.LastError != "" {
		c.LastError = t.LastError
	}
	for k, v := range t.Misuse {
		c.Misuse[k] += v
	}
	mergeHist(&c.CompleteLatency, t.CompleteLatency)
	mergeHist(&c.ExecuteLatency, t.ExecuteLatency)
	mergeHist(&c.ProcessLatency, t.ProcessLatency)
	c.SkippedMaxSpout += t.SkippedMaxSpout
	c.Backpressure += t.Backpressure
	c.QueueDepth += t.QueueDepth
	c.ByTask = append(c.ByTask, t)
}

// MisuseTotal sums Misuse.
func (c *ComponentStats) MisuseTotal() uint64 {
	var n uint64
	for _, v := range c.Misuse {
		n += v
	}
	return n
}

// AckerStats sum the acker tasks' ledgers.
type AckerStats struct {
	Tasks int
	// Pending: trees held now. Unmatched: entries held without an init (acks ahead of
	// their init, or late acks for trees already ended; dropped as Orphans).
	Pending, Unmatched                          int
	Completed, Failed, Resets, Expired, Orphans uint64
	Rejected                                    uint64 // malformed messages
}

// Stats is a snapshot of a running topology, or of the tasks one engine hosts
// (ClusterStats merges every host's).
type Stats struct {
	Components map[string]*ComponentStats
	Order      []string // component ids in declaration order
	Acker      AckerStats
	// Transport counts messages: Errors are sends the transport refused (each also
	// logged), Dropped the messages it lost (a test transport's drops). Duplicates
	// counts tuples received twice and dropped; Stray counts messages no task
	// expected (a protocol error); Unreachable counts messages to a host that is not
	// there (not started yet, or gone: normal at the start and end of a run).
	Transport TransportStats
	// LineageDropped counts lineage records of trees rooted on another host that
	// were not forwarded there: the batch waiting for the next sweep was full.
	LineageDropped uint64
}

// TransportStats are the message counters of Stats.
type TransportStats struct {
	Sent, Errors, Dropped, Duplicates, Stray, Unreachable uint64
	LastError                                             string
}

// Merge adds another host's stats (of the same topology): ClusterStats does it for
// the hosts it asks.
func (s *Stats) Merge(o *Stats) {
	for _, id := range o.Order {
		oc := o.Components[id]
		c := s.Components[id]
		if c == nil || oc == nil {
			continue
		}
		for _, t := range oc.ByTask {
			if t.Misuse == nil {
				t.Misuse = map[string]uint64{}
			}
			c.add(t)
		}
	}
	a := &s.Acker
	a.Tasks += o.Acker.Tasks
	a.Pending += o.Acker.Pending
	a.Unmatched += o.Acker.Unmatched
	a.Completed += o.Acker.Completed
	a.Failed += o.Acker.Failed
	a.Resets += o.Acker.Resets
	a.Expired += o.Acker.Expired
	a.Orphans += o.Acker.Orphans
	a.Rejected += o.Acker.Rejected
	t := &s.Transport
	t.Sent += o.Transport.Sent
	t.Errors += o.Transport.Errors
	t.Dropped += o.Transport.Dropped
	t.Duplicates += o.Transport.Duplicates
	t.Stray += o.Transport.Stray
	t.Unreachable += o.Transport.Unreachable
	if o.Transport.LastError != "" {
		t.LastError = o.Transport.LastError
	}
	s.LineageDropped += o.LineageDropped
}

// MisuseTotal sums misuse reports over every component.
func (s *Stats) MisuseTotal() uint64 {
	var n uint64
	for _, c := range s.Components {
		n += c.MisuseTotal()
	}
	return n
}

// taskStats are one task's counters, guarded by the task collector's mutex.
type taskStats struct {
	emitted, transferred    uint64
	acked, failed, timedOut uint64
	late, executed, errors  uint64
	executeNanos            int64
	dropped                 uint64
	ticks                   uint64
	lastError               string
	misuse                  map[string]uint64
	latency                 *Histogram // complete latency (spouts)
	execLat, procLat        *Histogram // bolts, when Config.LatencyMetrics
}

// Histogram is a log-linear histogram of durations: 16 sub-buckets per power of two,
// so a quantile is within about 3% of the true value. Its memory is at most 8.6 KiB,
// and about 1 KiB for durations within a few powers of two.
type Histogram struct {
	// rows holds the buckets 16 at a time, a row made at its first value: most
	// histograms use a few rows (durations within a few powers of two), so one costs
	// about 1 KiB instead of 8 (a 10,000-task topology keeps 40,000 of them).
	rows [64]*[16]uint64
	n    uint64
	sum  int64
	max  int64
	// dirty marks the buckets changed since the last syncTo, a bit each, so that a
	// task's flush copies a few buckets, not 8 KiB.
	dirty [64 * 16 / 64]uint64
}

func histIndex(v int64) int {
	if v < 16 {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := bits.Len64(uint64(v)) - 1 // v in [2^e, 2^(e+1))
	sub := int(uint64(v)>>(e-4)) & 15
	return (e-3)*16 + sub
}

func histLower(i int) int64 {
	if i < 16 {
		return int64(i)
	}
	e := i/16 + 3
	sub := i % 16
	return int64(16+sub) << (e - 4)
}

// Record adds one duration in nanoseconds.
func (h *Histogram) Record(ns int64) {
	i := histIndex(ns)
	r := h.rows[i>>4]
	if r == nil {
		r = new([16]uint64)
		h.rows[i>>4] = r
	}
	r[i&15]++
	h.dirty[i/64] |= 1 << (i % 64)
	h.n++
	h.sum += ns
	h.max = max(h.max, ns)
}

// syncTo makes dst equal to h, where dst is a copy of h as of the previous syncTo
// (or both were empty then): it copies the buckets changed since and clears the marks.
func (h *Histogram) syncTo(dst *Histogram) {
	for w, m := range h.dirty {
		for m != 0 {
			i := w*64 + bits.TrailingZeros64(m)
			dst.set(i, h.get(i))
			m &= m - 1
		}
		h.dirty[w] = 0
	}
	dst.n, dst.sum, dst.max = h.n, h.sum, h.max
}

// Buckets calls fn for every non-empty bucket in increasing order, with its bounds in
// nanoseconds [lower, upper) and its count.
func (h *Histogram) Buckets(fn func(lower, upper int64, count uint64)) {
	h.each(func(i int, c uint64) { fn(histLower(i), histLower(i+1), c) })
}

// Sum is the total of the recorded values.
func (h *Histogram) Sum() time.Duration { return time.Duration(h.sum) }

// Sub removes o's counts from h, where o is an earlier copy of h (for windows). Max is
// kept.
func (h *Histogram) Sub(o *Histogram) {
	o.each(func(i int, c uint64) {
		h.set(i, h.get(i)-c)
		h.dirty[i/64] |= 1 << (i % 64)
	})
	h.n -= o.n
	h.sum -= o.sum
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	o.each(func(i int, c uint64) {
		h.set(i, h.get(i)+c)
		h.dirty[i/64] |= 1 << (i % 64)
	})
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// histJSON is a Histogram as sent between hosts: its non-empty buckets only.
type histJSON struct {
	Buckets [][2]uint64 `json:"b"` // index, count
	N       uint64      `json:"n"`
	Sum     int64       `json:"s"`
	Max     int64       `json:"m"`
}

// MarshalJSON encodes the histogram with its non-empty buckets (stats travel
// between hosts as messages).
func (h *Histogram) MarshalJSON() ([]byte, error) {
	j := histJSON{N: h.n, Sum: h.sum, Max: h.max, Buckets: [][2]uint64{}}
	h.each(func(i int, c uint64) { j.Buckets = append(j.Buckets, [2]uint64{uint64(i), c}) })
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Histogram{n: j.N, sum: j.Sum, max: j.Max}
	for _, bc := range j.Buckets {
		if bc[0] >= histBuckets {
			return fmt.Errorf("engine: histogram bucket %d out of range", bc[0])
		}
		h.set(int(bc[0]), bc[1])
		h.dirty[bc[0]/64] |= 1 << (bc[0] % 64)
	}
	return nil
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Mean is the average, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / int64(h.n))
}

// Max is the largest value recorded.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the q-quantile (0 < q ≤ 1): the midpoint of the bucket holding it.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for ri, r := range h.rows {
		if r == nil {
			continue
		}
		for j, c := range r {
			seen += c
			if seen >= rank {
				i := ri<<4 | j
				lo, hi := histLower(i), histLower(i+1)
				return time.Duration(min((lo+hi)/2, h.max))
			}
		}
	}
	return time.Duration(h.max)
}

// Clone returns a copy of h that shares nothing with it. Copy a Histogram with
// Clone, not by value: its rows are pointers.
func (h *Histogram) Clone() *Histogram {
	c := &Histogram{n: h.n, sum: h.sum, max: h.max, dirty: h.dirty}
	for i, r := range h.rows {
		if r != nil {
			cp := *r
			c.rows[i] = &cp
		}
	}
	return c
}

// histBuckets is the number of buckets: 16 sub-buckets for each of 64 powers of two.
const histBuckets = 64 * 16

func (h *Histogram) get(i int) uint64 {
	if r := h.rows[i>>4]; r != nil {
		return r[i&15]
	}
	return 0
}

func (h *Histogram) set(i int, v uint64) {
	r := h.rows[i>>4]
	if r == nil {
		if v == 0 {
			return
		}
		r = new([16]uint64)
		h.rows[i>>4] = r
	}
	r[i&15] = v
}

// each calls fn for every non-empty bucket in increasing order.
func (h *Histogram) each(fn func(i int, c uint64)) {
	for ri, r := range h.rows {
		if r == nil {
			continue
		}
		for j, c := range r {
			if c != 0 {
				fn(ri<<4|j, c)
			}
		}
	}
}
