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
	ended   map[int]bool  // acked or failed at least once
	settled chan struct{} // closed once every input was acked or failed
}

func newTxnStats(n int) *txnStats {
	return &txnStats{n: n, acked: map[int]int{}, done: make(chan struct{}), ended: map[int]bool{}, settled: make(chan struct{})}
}

func (st *txnStats) endedLocked(i int) {
	if !st.ended[i] {
		st.ended[i] = true
		if len(st.ended) == st.n {
			close(st.settled)
		}
	}
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
// i, and emits a failed input again (as a replaying source would) unless noReplay.
type replaySpout struct {
	topology.BaseSpout
	st       *txnStats
	noReplay bool
	next     int
	retry    []int
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
	st.endedLocked(id.(int))
}

func (s *replaySpout) Fail(id any) { s.FailReason(id, "") }

func (s *replaySpout) FailReason(id any, reason string) {
	s.st.mu.Lock()
	s.st.fails++
	s.st.reasons = append(s.st.reasons, reason)
	s.st.endedLocked(id.(int))
	s.st.mu.Unlock()
	if !s.noReplay {
		s.retry = append(s.retry, id.(int))
	}
}

// startSinkTopology runs a replaySpout into sink with the given task count.
func startSinkTopology(t *testing.T, sink *Sink, st *txnStats, tasks int, noReplay ...bool) *engine.Runtime {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("list", func() topology.Spout { return &replaySpout{st: st, noReplay: len(noReplay) > 0 && noReplay[0]} }, 1).Output("key", "value")
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
	const n = 60
	cl, reasons := runTxnUnderFault(t, n, kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 1,
		When: func(r kmsg.Request) bool { return r.(*kmsg.EndTxnRequest).Commit }}, "the failed commit")
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

// holdCommits holds every EndTxn commit at the broker until release is called
// (at the latest when the test ends, before the cluster closes); held gets a
// signal as a commit is held.
func holdCommits(t *testing.T, cl *kfake.Cluster) (held <-chan struct{}, release func()) {
	var holding atomic.Bool
	holding.Store(true)
	h := make(chan struct{}, 1)
	wake := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { holding.Store(false); close(wake) }) }
	t.Cleanup(release)
	cl.ControlKey(int16(kmsg.EndTxn), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if r.(*kmsg.EndTxnRequest).Commit && holding.Load() {
			select {
			case h <- struct{}{}:
			default:
			}
			cl.SleepControl(func() { <-wake })
		}
		return nil, nil, false // then answered as usual
	})
	return h, release
}

func waitHeld(t *testing.T, held <-chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no commit reached the broker")
	}
}

// TestSinkTransactionAcksAfterCommit: two sink tasks (transactional ids
// gale-out-0 and gale-out-1), every commit held at the broker until the test
// lets it go. While held: no input is acked or failed, and the records already
// written are past no partition's last stable offset (what a read_committed
// consumer reads up to). Once the commits go through, every input is acked
// once, none failed, and a read_committed consumer sees each record exactly once.
func TestSinkTransactionAcksAfterCommit(t *testing.T) {
	cl := newCluster(t, 1, "out")
	held, releaseAll := holdCommits(t, cl)
	sink, err := NewSink(cl.ListenAddrs(), "out", WithTransactions("gale-out", 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	st := newTxnStats(n)
	rt := startSinkTopology(t, sink, st, 2)
	defer stop(t, rt)
	waitHeld(t, held)
	if acked, fails := st.counts(); acked != 0 || fails != 0 {
		t.Errorf("while the commit is held: %d acked, %d failed; want none", acked, fails)
	}
	var written int64
	for _, p := range cl.PartitionInfos("out") {
		written += p.HighWatermark
		if p.LastStableOffset != 0 {
			t.Errorf("partition %d: last stable offset %d before any commit, want 0", p.Partition, p.LastStableOffset)
		}
	}
	if written == 0 {
		t.Error("nothing written before the commit")
	}
	releaseAll()
	st.waitAcked(t)
	if _, fails := st.counts(); fails != 0 {
		t.Errorf("%d inputs failed", fails)
	}
	checkOnce(t, readTopic(t, cl, "out", kgo.ReadCommitted()), n)
}

// TestSinkTransactionFailedProduce: the broker refuses one produce for good
// (INVALID_RECORD, not retried). The transaction holding it is aborted and its
// inputs failed with that error; their replays commit in a later transaction,
// and a read_committed consumer sees each record exactly once.
func TestSinkTransactionFailedProduce(t *testing.T) {
	const n = 60
	cl, reasons := runTxnUnderFault(t, n, kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: 1},
		"the aborted transaction")
	for _, r := range reasons {
		if !strings.Contains(r, "transaction aborted") || !strings.Contains(r, kerr.InvalidRecord.Message) {
			t.Errorf("an input failed with %q, want the aborted transaction's produce error", r)
		}
	}
	checkOnce(t, readTopic(t, cl, "out", kgo.ReadCommitted()), n)
}

// TestSinkTransactionFenced: while a sink task's commit is held at the broker, a
// new producer with the task's transactional id (gale-out-0, as a restarted task
// would have) starts. Its InitProducerID fences the task and aborts the open
// transaction: none of its records is ever visible to a read_committed
// consumer, and the fenced task fails its inputs, never acks them (every input
// after it too: a fenced producer cannot begin another transaction, so a topology
// must not run two tasks with one transactional id).
func TestSinkTransactionFenced(t *testing.T) {
	cl := newCluster(t, 1, "out")
	held, releaseAll := holdCommits(t, cl)
	sink, err := NewSink(cl.ListenAddrs(), "out", WithTransactions("gale-out", 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	st := newTxnStats(n)
	rt := startSinkTopology(t, sink, st, 1, true)
	defer stop(t, rt)
	waitHeld(t, held)

	next, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.TransactionalID("gale-out-0"))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := next.BeginTransaction(); err != nil { // InitProducerID: fences gale-out-0's open transaction
		t.Fatal(err)
	}
	var written int64
	for _, p := range cl.PartitionInfos("out") {
		written += p.HighWatermark
		if p.LastStableOffset != p.HighWatermark {
			t.Errorf("partition %d: last stable offset %d, high watermark %d: the fenced transaction is still open", p.Partition, p.LastStableOffset, p.HighWatermark)
		}
	}
	if written == 0 {
		t.Error("nothing written by the fenced transaction")
	}
	releaseAll()
	select {
	case <-st.settled:
	case <-time.After(30 * time.Second):
		acked, fails := st.counts()
		t.Fatalf("%d acked and %d failed of %d inputs", acked, fails, n)
	}
	if acked, fails := st.counts(); acked != 0 || fails != n {
		t.Errorf("%d acked and %d failed of %d inputs; want every one failed", acked, fails, n)
	}
	if got := readTopic(t, cl, "out", kgo.ReadCommitted()); len(got) != 0 {
		t.Errorf("a read_committed consumer read %d keys of the fenced task, want none", len(got))
	}
	if err := next.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Error(err)
	}
}

// runTxnUnderFault sends n inputs through a transactional sink (two tasks) on a
// one-broker cluster that answers fault once, until every input is acked, and
// returns the cluster and the reasons the failed inputs were given. That the
// fault struck exactly once, and that some input failed (the inputs of what the
// fault struck were not acked), are checked here.
func runTxnUnderFault(t *testing.T, n int, fault kfake.Fault, what string) (*kfake.Cluster, []string) {
	t.Helper()
	cl := newCluster(t, 1, "out")
	h := cl.Fault(fault)
	sink, err := NewSink(cl.ListenAddrs(), "out", WithTransactions("gale-out", 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	st := newTxnStats(n)
	rt := startSinkTopology(t, sink, st, 2)
	st.waitAcked(t)
	stop(t, rt)
	if got := h.Hits(); got != 1 {
		t.Errorf("the fault answered %d requests, want 1", got)
	}
	st.mu.Lock()
	fails, reasons := st.fails, st.reasons
	st.mu.Unlock()
	if fails == 0 {
		t.Errorf("no input failed: %s's inputs were acked", what)
	}
	return cl, reasons
}
