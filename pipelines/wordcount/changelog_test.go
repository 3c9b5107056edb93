package wordcount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// A changelog message decodes to the occurrences appended, in order, whatever the
// deltas' signs (a replayed line's occurrences come after later ones); a message
// that is not format 1, or is cut short, is refused.
func TestChangelogEncoding(t *testing.T) {
	type rec struct {
		occ  uint64
		word string
	}
	recs := []rec{{OccurrenceID(0, 3), "the"}, {OccurrenceID(2, 1<<39), "élan"}, {OccurrenceID(0, 7), "x"},
		{OccurrenceID(1<<24-1, 1<<40-1), strings.Repeat("a", 300)}, {0, ""}}
	enc := []byte{changelogVersion}
	var prev uint64
	for _, r := range recs {
		enc = appendOccurrence(enc, prev, r.occ, r.word)
		prev = r.occ
	}
	var got []rec
	if err := decodeChangelog(enc, func(occ uint64, word string) { got = append(got, rec{occ, word}) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("decoded %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Fatalf("record %d: %v, want %v", i, got[i], recs[i])
		}
	}
	for _, bad := range [][]byte{nil, {2}, enc[:len(enc)-1], append([]byte{changelogVersion}, 0x80)} {
		if err := decodeChangelog(bad, func(uint64, string) {}); err == nil {
			t.Errorf("%x accepted", bad)
		}
	}
}

// gatedPub stands between a count task and JetStream: each batch is published at
// once (so stored at once, unless told to fail), but its answer reaches the task
// only when the test releases it; with auto set, the answers pass straight
// through.
type gatedPub struct {
	t    *testing.T
	js   jetstream.JetStream
	mu   sync.Mutex
	auto bool
	fail map[int]error // publish i is not made, and answered with this error
	pubs []*gatedAnswer
}

type gatedAnswer struct {
	g        *gatedPub
	msg      *nats.Msg
	real     jetstream.PubAckFuture // nil if failed
	fail     error
	ok       chan *jetstream.PubAck
	err      chan error
	released bool // on g.mu: release was called
}

func (a *gatedAnswer) isReleased() bool {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	return a.released
}

func (a *gatedAnswer) Ok() <-chan *jetstream.PubAck { return a.ok }
func (a *gatedAnswer) Err() <-chan error            { return a.err }
func (a *gatedAnswer) Msg() *nats.Msg               { return a.msg }

func (g *gatedPub) publish(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.auto {
		return g.js.PublishMsgAsync(m, opts...)
	}
	a := &gatedAnswer{g: g, msg: m, fail: g.fail[len(g.pubs)], ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	if a.fail == nil {
		fut, err := g.js.PublishMsgAsync(m, opts...)
		if err != nil {
			return nil, err
		}
		a.real = fut
	}
	g.pubs = append(g.pubs, a)
	return a, nil
}

// published returns the number of publishes gated.
func (g *gatedPub) published() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pubs)
}

// answer returns publish i, waiting until it is made.
func (g *gatedPub) answer(i int) *gatedAnswer {
	g.t.Helper()
	waitfor.Until(g.t, 10*time.Second, func() error {
		if n := g.published(); n <= i {
			return fmt.Errorf("%d publishes made, waiting for publish %d", n, i)
		}
		return nil
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pubs[i]
}

// release hands publish i's answer to the task (the server's, once it has come).
func (g *gatedPub) release(i int) {
	g.t.Helper()
	a := g.answer(i)
	g.mu.Lock()
	a.released = true // before the answer is handed over: see settled
	g.mu.Unlock()
	if a.fail != nil {
		a.err <- a.fail
		return
	}
	select {
	case ack := <-a.real.Ok():
		a.ok <- ack
	case err := <-a.real.Err():
		a.err <- err
	case <-time.After(10 * time.Second):
		g.t.Fatalf("publish %d: no answer from the server in 10s", i)
	}
}

// fenced returns the last sequence publish i expected, or -1 if none.
func (g *gatedPub) fenced(i int) int {
	g.t.Helper()
	v := g.answer(i).msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader)
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		g.t.Fatalf("publish %d: %s %q", i, jetstream.ExpectedLastSubjSeqHeader, v)
	}
	return n
}

// collect takes from b's output until it has acked and failed at least the numbers
// given and b has nothing more to resolve by itself (settled), and returns all it took:
// more than the numbers given fails the test.
func collect(t *testing.T, b *changelogCount, acks, fails int) (acked, failed []*tuple.Tuple, errs []error) {
	t.Helper()
	out := b.out.(*countCollector)
	more := func() {
		a, f, e := out.take()
		acked, failed, errs = append(acked, a...), append(failed, f...), append(errs, e...)
	}
	waitfor.Until(t, 10*time.Second, func() error {
		more()
		switch {
		case len(acked) < acks || len(failed) < fails:
			return fmt.Errorf("acked %d failed %d, waiting for %d and %d", len(acked), len(failed), acks, fails)
		case !settled(b):
			return fmt.Errorf("acked %d failed %d; a batch whose answer came is still in flight", len(acked), len(failed))
		}
		return nil
	})
	more()
	if len(acked) != acks || len(failed) != fails {
		t.Fatalf("acked %d failed %d (errors %v), want %d and %d", len(acked), len(failed), errs, acks, fails)
	}
	return
}

// settled reports whether b would ack or fail nothing more unless the test acts:
// every batch in flight waits for an answer the test holds back (gatedPub), and
// not past its deadline. The acker resolves a batch, acking or failing its inputs,
// before it takes it out of flight.
func settled(b *changelogCount) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bt := range b.flight {
		a, gated := bt.fut.(*gatedAnswer)
		if !gated || bt.err != nil || a.isReleased() || !time.Now().Before(bt.deadline) {
			return false
		}
	}
	return true
}

// heldBack waits until a call of b's that runs in the background (done is closed
// when it returns) is held back on b's cond, and fails the test with what if the
// call returns instead.
func heldBack(t *testing.T, b *changelogCount, done <-chan struct{}, what string) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, func() error {
		select {
		case <-done:
			return nil
		default:
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.waiting == 0 {
			return errors.New("the call has neither returned nor been held back")
		}
		return nil
	})
	select {
	case <-done:
		t.Fatal(what)
	default:
	}
}

func sameTuples(got []*tuple.Tuple, want ...*tuple.Tuple) bool {
	if len(got) != len(want) {
		return false
	}
	in := map[*tuple.Tuple]int{}
	for _, t := range want {
		in[t]++
	}
	for _, t := range got {
		if in[t]--; in[t] < 0 {
			return false
		}
	}
	return true
}

// pipelineTask prepares a count task (task index 0 of run) with tiny batches, that
// publishes through g.
func pipelineTask(t *testing.T, ctx context.Context, js jetstream.JetStream, run string, batch, inFlight int, opTimeout time.Duration) (*changelogCount, *countCollector, *gatedPub) {
	t.Helper()
	conf := &clusterConf{files: []string{"/none"}, js: js, bucket: "gale-wordcount", run: run,
		flushInterval: time.Hour, opTimeout: opTimeout}
	tc := topology.TaskContext{Component: "count", TaskID: 4, TaskIndex: 0, Parallelism: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	g := &gatedPub{t: t, js: js}
	b, out := &changelogCount{conf: conf, publish: g.publish, batchMax: batch, inFlightMax: inFlight}, &countCollector{}
	if err := b.Prepare(ctx, tc, out); err != nil {
		t.Fatal(err)
	}
	return b, out, g
}

// occTuples returns one tuple per word, occurrences 1000, 1010, ...
func occTuples(words ...string) []*tuple.Tuple {
	ts := make([]*tuple.Tuple, len(words))
	for i, w := range words {
		ts[i] = wordTuple(w, 1000, 10*i)
	}
	return ts
}

// Batches are published without waiting for the answers, up to the bound in flight
// (then Execute waits: backpressure), and their inputs are acked as each answer
// comes, in publish order. A duplicate is acked at once if its first application
// is stored, else with a batch stored after it. Only a publish made with nothing in
// flight is fenced. Drain waits for every batch in flight.
func TestChangelogPipelined(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx := testCtx(t, time.Minute)
	b, out, g := pipelineTask(t, ctx, js, "pipe", 2, 2, 0)
	defer b.Cleanup()
	w := occTuples("a", "b", "c", "d", "e", "f", "g", "h")
	dup := func(i int) *tuple.Tuple { return wordTuple(w[i].Value(0).(string), 1000, 10*i) }

	for _, tt := range w[:4] {
		b.Execute(tt) // two batches published, none answered
	}
	d0 := dup(0)
	b.Execute(d0) // in flight: held with the last batch in flight
	b.Execute(w[4])
	d4 := dup(4)
	b.Execute(d4) // in the batch being filled: held with it
	if a, f, _ := out.take(); len(a)+len(f) != 0 || g.published() != 2 {
		t.Fatalf("before any answer: acked %d failed %d, %d published", len(a), len(f), g.published())
	}
	if g.fenced(0) != 0 || g.fenced(1) != -1 {
		t.Fatalf("fences %d %d: want the first publish (nothing in flight) to expect 0, the second none", g.fenced(0), g.fenced(1))
	}
	// The batch fills: its publish waits while two are in flight.
	done := make(chan struct{})
	go func() { b.Execute(w[5]); close(done) }()
	heldBack(t, b, done, "Execute published a third batch with two in flight")
	g.release(0)
	<-done
	if acked, _, _ := collect(t, b, 2, 0); !sameTuples(acked, w[0], w[1]) {
		t.Fatal("the first answer acked other inputs")
	}
	g.release(1)
	if acked, _, _ := collect(t, b, 3, 0); !sameTuples(acked, w[2], w[3], d0) {
		t.Fatal("the second answer acked other inputs")
	}
	d1 := dup(1)
	b.Execute(d1) // stored already: acked at once
	if a, _, _ := out.take(); !sameTuples(a, d1) {
		t.Fatalf("a duplicate of a stored occurrence: acked %d", len(a))
	}
	// Drain publishes nothing new and waits for the third batch.
	drained := make(chan struct{})
	go func() { b.Drain(); close(drained) }()
	heldBack(t, b, drained, "Drain returned with a batch in flight")
	g.release(2)
	<-drained
	if a, _, _ := out.take(); !sameTuples(a, w[4], w[5], d4) {
		t.Fatalf("after Drain: acked %d", len(a))
	}
	// The pipeline ran empty: the next publish is fenced on the last sequence stored.
	b.Execute(w[6])
	b.Execute(w[7])
	b.mu.Lock()
	lastSeq := b.lastSeq
	b.mu.Unlock()
	if g.fenced(3) != int(lastSeq) || lastSeq == 0 {
		t.Fatalf("publish after the pipeline ran empty expects %d, want %d", g.fenced(3), lastSeq)
	}
	g.release(3)
	b.Drain()
	collect(t, b, 2, 0)
	got, err := ReadClusterCounts(ctx, js, "gale-wordcount", "pipe", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Words != 8 || got.Duplicates != 0 || got.Messages != 4 || len(got.Counts) != 8 {
		t.Fatalf("changelog: %+v", got)
	}
}

// A batch in the middle of the pipeline fails: the batch before it is acked; its
// inputs, the next batch's (stored meanwhile) and the filling batch's are failed,
// and the error reported once. The next input waits until the batch in flight is
// answered, then the state is rebuilt from the stream: the replays of what the
// later batch stored are acked as duplicates, the rest applied once.
func TestChangelogPipelineFailure(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx := testCtx(t, time.Minute)
	b, out, g := pipelineTask(t, ctx, js, "fail", 2, 3, 0)
	defer b.Cleanup()
	g.fail = map[int]error{1: errors.New("injected: no stream")}
	w := occTuples("a", "b", "c", "d", "e", "f", "g")
	for _, tt := range w {
		b.Execute(tt) // publishes 0 (a b), 1 (c d: fails), 2 (e f: stored); g fills
	}
	d2 := wordTuple("c", 1000, 20)
	b.Execute(d2) // its first application is in publish 1: held with the filling batch
	g.release(0)
	if a, _, _ := collect(t, b, 2, 0); !sameTuples(a, w[0], w[1]) {
		t.Fatal("publish 0 acked other inputs")
	}
	g.release(1)
	_, failed, errs := collect(t, b, 0, 6)
	if !sameTuples(failed, w[2], w[3], w[4], w[5], w[6], d2) || len(errs) != 1 || !strings.Contains(errs[0].Error(), "injected") {
		t.Fatalf("failed %d, errors %v", len(failed), errs)
	}
	// The lines replay. The state is rebuilt once publish 2 is answered.
	done := make(chan struct{})
	go func() { b.Execute(w[4]); close(done) }()
	heldBack(t, b, done, "the state was rebuilt with a batch in flight")
	g.release(2)
	<-done
	if a, f, _ := out.take(); !sameTuples(a, w[4]) || len(f) != 0 {
		t.Fatalf("a replay of an occurrence stored after the failed batch: acked %d failed %d", len(a), len(f))
	}
	g.mu.Lock()
	g.auto = true
	g.mu.Unlock()
	for _, tt := range []*tuple.Tuple{w[2], w[3], w[5], w[6]} {
		b.Execute(tt)
	}
	b.Drain()
	if a, f, _ := collect(t, b, 4, 0); !sameTuples(a, w[2], w[3], w[5], w[6]) || len(f) != 0 {
		t.Fatal("replays")
	}
	want := map[string]uint64{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1}
	got, err := ReadClusterCounts(ctx, js, "gale-wordcount", "fail", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(got.Counts, want); d != "" || got.Words != 7 || got.Duplicates != 0 {
		t.Fatalf("changelog: %+v\n%s", got, d)
	}
	b.mu.Lock()
	applied := b.applied
	b.mu.Unlock()
	if applied != 7 {
		t.Fatalf("the task holds %d occurrences applied, want 7", applied)
	}
}

// A batch whose answer does not come within the operation timeout fails, with
// whatever came after it.
func TestChangelogPipelineTimeout(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx := testCtx(t, time.Minute)
	b, _, g := pipelineTask(t, ctx, js, "timeout", 2, 4, 100*time.Millisecond)
	defer b.Cleanup()
	w := occTuples("a", "b", "c")
	for _, tt := range w {
		b.Execute(tt)
	}
	start := time.Now()
	_, failed, errs := collect(t, b, 0, 3) // publish 0 is never released
	if el := time.Since(start); el > 5*time.Second || !sameTuples(failed, w...) || len(errs) != 1 || !strings.Contains(errs[0].Error(), "no PubAck") {
		t.Fatalf("after %v: failed %d, errors %v", el, len(failed), errs)
	}
	g.mu.Lock()
	g.auto = true
	g.mu.Unlock()
	for _, tt := range w {
		b.Execute(tt) // stored though unanswered: acked after the rebuild
	}
	b.Drain()
	if a, f, _ := collect(t, b, 3, 0); !sameTuples(a, w...) || len(f) != 0 {
		t.Fatal("replays after the timeout")
	}
}

// A hard stop (the Prepare context cancelled) with batches in flight, a publish
// waiting for room and a Drain waiting for answers: both return, Cleanup stops
// every goroutine, and no held input is acked or failed.
func TestChangelogPipelineHardStop(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx, cancel := context.WithCancel(testCtx(t, time.Minute))
	b, out, _ := pipelineTask(t, ctx, js, "hard", 1, 1, 0)
	w := occTuples("a", "b", "c")
	b.Execute(w[0]) // in flight, never answered
	done := make(chan struct{})
	go func() { b.Execute(w[1]); b.Execute(w[2]); close(done) }() // waits for room
	heldBack(t, b, done, "Execute published a second batch with one in flight")
	cancel()
	<-done
	b.Drain()
	if err := b.Cleanup(); err != nil {
		t.Fatal(err)
	}
	// Only the input executed after the stop fails (its state could not be rebuilt,
	// as before the pipeline); the inputs held are abandoned.
	if a, f, _ := out.take(); len(a) != 0 || len(f) > 1 || len(f) == 1 && f[0] != w[2] {
		t.Fatalf("after a hard stop: acked %d, failed %d", len(a), len(f))
	}
}

// Two incarnations of one count task write at once (the older one's process was
// paused while the task moved): the fence refuses the newer one's first write,
// made after the older one wrote, and the older one's next fenced write, made
// after the newer one wrote; their pipelined writes get through, and only add
// duplicates. The changelog still counts every occurrence once, and a third
// incarnation restores exact counts.
func TestChangelogStaleIncarnation(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx := testCtx(t, time.Minute)
	old, _, og := pipelineTask(t, ctx, js, "stale", 2, 4, 0)
	defer old.Cleanup()
	cur, _, cg := pipelineTask(t, ctx, js, "stale", 2, 4, 0) // restored: nothing yet
	defer cur.Cleanup()
	w := occTuples("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")

	old.Execute(w[0])
	old.Execute(w[1]) // old publish 0, fenced on 0: stored
	og.release(0)
	collect(t, old, 2, 0)
	for _, tt := range w[2:6] {
		old.Execute(tt) // old publishes 1 (fenced, stored, unanswered) and 2 (pipelined)
	}
	for _, tt := range w[2:6] {
		cur.Execute(tt) // cur publishes 0 (fenced on 0: refused) and 1 (pipelined: stored)
	}
	if cg.fenced(0) != 0 || cg.fenced(1) != -1 {
		t.Fatalf("cur's fences %d %d", cg.fenced(0), cg.fenced(1))
	}
	cg.release(0)
	cg.release(1)
	if _, _, errs := collect(t, cur, 0, 4); len(errs) != 1 || !strings.Contains(errs[0].Error(), "wrong last sequence") {
		t.Fatalf("cur's refused write: %v", errs)
	}
	cg.mu.Lock()
	cg.auto = true
	cg.mu.Unlock()
	for _, tt := range w[2:8] {
		cur.Execute(tt) // rebuilt with old's records: c..f are duplicates, g h applied
	}
	cur.Drain()
	collect(t, cur, 6, 0)

	og.release(1)
	og.release(2)
	collect(t, old, 4, 0)
	for _, tt := range w[6:10] {
		old.Execute(tt) // old publishes 3 (fenced on its own last: refused) and 4 (pipelined: stored)
	}
	if og.fenced(3) <= 0 || og.fenced(4) != -1 {
		t.Fatalf("old's fences %d %d", og.fenced(3), og.fenced(4))
	}
	og.release(3)
	og.release(4)
	if _, _, errs := collect(t, old, 0, 4); len(errs) != 1 || !strings.Contains(errs[0].Error(), "wrong last sequence") {
		t.Fatalf("old's refused write: %v", errs)
	}

	want := map[string]uint64{}
	for _, tt := range w {
		want[tt.Value(0).(string)] = 1
	}
	got, err := ReadClusterCounts(ctx, js, "gale-wordcount", "stale", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Stored: old a b | old c d, e f | cur e f (dup) | cur g h | old i j.
	if d := diffCounts(got.Counts, want); d != "" || got.Words != 10 || got.Duplicates != 2 || got.Messages != 6 {
		t.Fatalf("changelog: %+v\n%s", got, d)
	}
	third, _, _ := pipelineTask(t, ctx, js, "stale", 2, 4, 0)
	defer third.Cleanup()
	third.mu.Lock()
	applied := third.applied
	third.mu.Unlock()
	if applied != 10 {
		t.Fatalf("restored %d distinct occurrences, want 10", applied)
	}
}
