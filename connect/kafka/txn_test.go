package kafka

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// The tests of the transactional sink (WithTransactions) against what the package
// doc claims: inputs are acked only after their transaction commits, a read_committed
// consumer sees each acked record exactly once, and a transaction that fails (a
// produce, or the commit itself) is aborted: its records stay invisible to
// read_committed consumers and its inputs are failed, then replayed by the spout.

// txnStats is what a replaySpout saw: acks per input and the fails.
type txnStats struct {
	mu      sync.Mutex
	n       int
	acked   map[int]int
	fails   int
	reasons []string
	done    chan struct{} // closed once every input was acked
}

func newTxnStats(n int) *txnStats {
	return &txnStats{n: n, acked: map[int]int{}, done: make(chan struct{})}
}

func (st *txnStats) counts() (acked, fails int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.acked), st.fails
}

// waitAcked waits until every input was acked, then checks each was acked once.
func (st *txnStats) waitAcked(t *testing.T) {
	t.Helper()
	select {
	case <-st.done:
	case <-time.After(30 * time.Second):
		acked, fails := st.counts()
		t.Fatalf("%d of %d inputs acked (%d fails)", acked, st.n, fails)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, a := range st.acked {
		if a != 1 {
			t.Errorf("input %d acked %d times", i, a)
		}
	}
}

// replaySpout emits inputs 0..n-1 as (key "k<i>", value "v<i>") with message id
// i, and emits a failed input again (as a replaying source would).
type replaySpout struct {
	topology.BaseSpout
	st    *txnStats
	next  int
	retry []int
}

func (s *replaySpout) NextTuple() {
	var i int
	switch {
	case len(s.retry) > 0:
		i, s.retry = s.retry[0], s.retry[1:]
	case s.next < s.st.n:
		i = s.next
		s.next++
	default:
		return
	}
	if err := s.Out.Emit(tuple.Values{fmt.Sprint("k", i), fmt.Sprint("v", i)}, i); err != nil {
		s.retry = append(s.retry, i)
	}
}

func (s *replaySpout) Ack(id any) {
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.acked[id.(int)]++
	if len(st.acked) == st.n && st.acked[id.(int)] == 1 {
		close(st.done)
	}
}

func (s *replaySpout) Fail(id any) { s.FailReason(id, "") }

func (s *replaySpout) FailReason(id any, reason string) {
	s.st.mu.Lock()
	s.st.fails++
	s.st.reasons = append(s.st.reasons, reason)
	s.st.mu.Unlock()
	s.retry = append(s.retry, id.(int))
}

// startSinkTopology runs a replaySpout into sink with the given task count.
func startSinkTopology(t *testing.T, sink *Sink, st *txnStats, tasks int) *engine.Runtime {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("list", func() topology.Spout { return &replaySpout{st: st} }, 1).Output("key", "value")
	b.SetBolt("sink", sink.Bolt(), tasks).ShuffleGrouping("list")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

var sentinels atomic.Int64

// readTopic reads topic from its start with isolation level iso, until it read a
// sentinel record produced now (not transactionally) to every partition: so
// everything before the sentinels, and only that, was read. It returns how many
// records it read per key, sentinels left out.
func readTopic(t *testing.T, cl *kfake.Cluster, topic string, iso kgo.IsolationLevel) map[string]int {
	t.Helper()
	const prefix = "sentinel/"
	mine := fmt.Sprint(prefix, sentinels.Add(1))
	pr, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(mine)})
	}
	if err := pr.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	counts := map[string]int{}
	seen := map[int32]bool{}
	for len(seen) < partitions {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the sentinels of %d of %d partitions read", len(seen), partitions)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("reading %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			switch k := string(r.Key); {
			case k == mine:
				seen[r.Partition] = true
			case !strings.HasPrefix(k, prefix):
				counts[k]++
			}
		})
	}
	return counts
}

// checkOnce checks that counts has each input's key exactly once.
func checkOnce(t *testing.T, counts map[string]int, n int) {
	t.Helper()
	if len(counts) != n {
		t.Errorf("%d distinct keys read, want %d", len(counts), n)
	}
	for i := 0; i < n; i++ {
		if c := counts[fmt.Sprint("k", i)]; c != 1 {
			t.Errorf("key k%d read %d times, want once", i, c)
		}
	}
}

// TestSinkTransactionFailedCommit: the broker fails one commit (an error that
// leaves its outcome unknown, as a coordinator failing over mid-commit does).
// The transaction's inputs are failed, not acked; the sink aborts it and goes on,
// so the replays commit in a later transaction; a read_committed consumer sees
// each input's record exactly once, while the failed transaction's records are
// in the log (a read_uncommitted consumer sees them).
func TestSinkTransactionFailedCommit(t *testing.T) {
	cl := newCluster(t, 1, "out")
	h := cl.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 1,
		When: func(r kmsg.Request) bool { return r.(*kmsg.EndTxnRequest).Commit }})
	sink, err := NewSink(cl.ListenAddrs(), "out", WithTransactions("gale-out", 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	st := newTxnStats(n)
	rt := startSinkTopology(t, sink, st, 2)
	st.waitAcked(t)
	stop(t, rt)
	if got := h.Hits(); got != 1 {
		t.Errorf("the commit fault answered %d commits, want 1", got)
	}
	st.mu.Lock()
	fails, reasons := st.fails, st.reasons
	st.mu.Unlock()
	if fails == 0 {
		t.Error("no input failed: the failed commit's inputs were acked")
	}
	for _, r := range reasons {
		if !strings.Contains(r, kerr.UnknownServerError.Message) {
			t.Errorf("an input failed with %q, want the commit's error", r)
		}
	}
	checkOnce(t, readTopic(t, cl, "out", kgo.ReadCommitted()), n)
	var all int
	for _, c := range readTopic(t, cl, "out", kgo.ReadUncommitted()) {
		all += c
	}
	if all <= n {
		t.Errorf("%d records in the log, want more than %d (the failed transaction's, aborted)", all, n)
	}
}
