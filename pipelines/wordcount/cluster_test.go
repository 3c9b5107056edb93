package wordcount

import (
	"context"
	"errors"
	"fmt"
	"github.com/gale-stream/gale/internal/natstest"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// TestMain fails the run if goroutines outlive the tests: the cluster tests start
// NATS servers, connections, engines, committers and flushers, and stop them all.
func TestMain(m *testing.M) { leaktest.Main(m) }

// runNATS starts an embedded NATS server with JetStream on a random loopback port,
// its store in dir (a new temporary directory if ""), shut down when the test ends
// (as cluster's runServer).
func runNATS(t testing.TB, port int, dir string) *server.Server {
	t.Helper()
	return natstest.Run(t, natstest.JetStream(t, dir), natstest.Port(port))
}

// connectJS opens a connection to url that reconnects at once and for ever, closed
// when the test ends, and returns its JetStream context.
func connectJS(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// testCtx returns a context ending after d, cancelled when the test ends.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// clusterState starts a server and makes the state of bucket in it.
func clusterState(t testing.TB, bucket string) (*server.Server, jetstream.JetStream) {
	t.Helper()
	s := runNATS(t, 0, "")
	js := connectJS(t, s.ClientURL())
	if err := EnsureClusterState(testCtx(t, 10*time.Second), js, bucket, 1); err != nil {
		t.Fatal(err)
	}
	return s, js
}

// absFiles makes the test books' paths absolute, as cluster mode wants them.
func absFiles(t testing.TB, files []string) []string {
	t.Helper()
	out := make([]string, len(files))
	for i, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

func clusterConfig() topology.Config {
	cfg := quiet()
	cfg.Ackers = 2
	return cfg
}

// startCluster starts a new cluster topology for o with engine.Start, under a
// context of its own: cancel is the hard stop of a dead worker.
func startCluster(t *testing.T, o ClusterOptions) (rt *engine.Runtime, cancel context.CancelFunc) {
	t.Helper()
	topo, err := NewClusterTopology(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt, err = engine.Start(ctx, topo, o.Config)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-rt.Done() })
	return rt, cancel
}

// stopCluster stops rt gracefully and checks that nothing was misused.
func stopCluster(t *testing.T, rt *engine.Runtime) engine.Stats {
	t.Helper()
	if err := rt.Stop(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("stop: %v", err)
	}
	<-rt.Done()
	st := rt.Stats()
	if st.MisuseTotal() != 0 {
		t.Fatalf("misuse: %d", st.MisuseTotal())
	}
	return st
}

// checkCounts compares a cluster run's counts with the independent count of files.
func checkCounts(t *testing.T, got ClusterCounts, files []string) {
	t.Helper()
	want := referenceCount(t, files)
	var total uint64
	for _, n := range want {
		total += n
	}
	if d := diffCounts(got.Counts, want); d != "" || len(got.Counts) != len(want) || got.Words != total {
		t.Fatalf("%d words (%d distinct), want %d (%d distinct); counts differ:\n%s", got.Words, len(got.Counts), total, len(want), d)
	}
	if got.Counts["the"] == 0 {
		t.Fatal("no \"the\" in the books")
	}
}

// Word count in cluster mode over every book with 5% injected failures: the
// spout's commit ends done at the end of the input, and the counts read back from
// the changelogs equal the independent count, with no occurrence stored twice.
func TestClusterWordCountExact(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	files := absFiles(t, testio.Books(t))
	o := ClusterOptions{Files: files, FailRate: 0.05, Seed: 5, Config: clusterConfig(), JS: js,
		Bucket: "gale-wordcount", Run: "exact"}
	ctx := testCtx(t, 2*time.Minute)
	start := time.Now()
	rt, _ := startCluster(t, o)
	commit, err := WaitClusterDone(ctx, js, o.Bucket, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	st := stopCluster(t, rt)
	got, err := ReadClusterCounts(ctx, js, o.Bucket, o.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, got, files)
	if got.Duplicates != 0 || got.Messages == 0 {
		t.Fatalf("%d duplicates in %d changelog messages", got.Duplicates, got.Messages)
	}
	final, err := ClusterProgress(ctx, js, o.Bucket, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []ClusterCommit{commit, final} {
		if !c.Done || c.Low != OccurrenceID(len(files), 0) || c.Files != len(files) || c.Incarnations != 1 || c.Resumes != 0 || c.Start != 0 {
			t.Fatalf("commit %+v", c)
		}
	}
	if final.Lines != 97639 || final.Acked != final.Lines || final.Replays == 0 || final.Lost != 0 {
		t.Fatalf("final commit %+v", final)
	}
	if e := st.Components["count"]; e.Errors != 0 {
		t.Fatalf("count errors %d: %s", e.Errors, e.LastError)
	}
	t.Logf("%d words in %d changelog messages, %d replays, %v", got.Words, got.Messages, final.Replays, time.Since(start))
}

// A worker dies mid-run: its engine is cut off (the Open context cancelled, the
// trees in flight abandoned, held occurrences never written) once the committed low
// has passed the first book. A new engine with a new topology for the same run
// resumes from the committed low, restores the count tasks from their changelogs,
// and the counts are exact.
func TestClusterWordCountMove(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	files := absFiles(t, testio.Books(t))
	files = []string{files[5], files[0]} // 244-0.txt, 105.txt: 770 KB
	o := ClusterOptions{Files: files, FailRate: 0.05, Seed: 9, Config: clusterConfig(), JS: js,
		Bucket: "gale-wordcount", Run: "move", CommitInterval: 20 * time.Millisecond}
	// Fewer lines in flight: the low stays close behind the lines read, and a good
	// part of the second book is left when it passes the first.
	o.Config.MaxSpoutPending = 500
	ctx := testCtx(t, 2*time.Minute)
	rt1, kill := startCluster(t, o)
	mark := OccurrenceID(1, 0)
	at, err := watchCommit(ctx, js, o.Bucket, o.Run, func(c ClusterCommit) bool { return c.Low >= mark })
	if err != nil {
		t.Fatal(err)
	}
	kill()
	<-rt1.Done()
	first, err := ClusterProgress(ctx, js, o.Bucket, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	if first.Done || first.Low < at.Low || first.Low >= OccurrenceID(1, 300_000) {
		t.Fatalf("after the kill: %+v (the watch saw low %d)", first, at.Low)
	}

	rt2, _ := startCluster(t, o)
	commit, err := WaitClusterDone(ctx, js, o.Bucket, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	stopCluster(t, rt2)
	got, err := ReadClusterCounts(ctx, js, o.Bucket, o.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, got, files)
	if commit.Incarnations != 2 || commit.Resumes < 1 || commit.Start == 0 || commit.Start != first.Low {
		t.Fatalf("second incarnation: %+v, the first committed %+v", commit, first)
	}
	t.Logf("killed at low %d:%d, resumed there; %d words, %d duplicates in the changelogs, %d lines read in all",
		first.Low>>40, first.Low&(1<<40-1), got.Words, got.Duplicates, commit.Lines)
}

// The stale-spout fence on the commit path: an incarnation that claimed the key
// first is refused once a newer one has claimed it, and refused again without a
// write; the newer one commits on.
func TestClusterStaleCommitRefused(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx := testCtx(t, 20*time.Second)
	kv, err := js.KeyValue(ctx, "gale-wordcount")
	if err != nil {
		t.Fatal(err)
	}
	key := spoutKey("stale")
	older := &spoutCommitter{kv: kv, key: key, files: 2, owner: "older"}
	if c, err := older.claim(ctx); err != nil || c.Start != 0 || c.Incarnations != 1 {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if err := older.commit(ctx, spoutCounts{low: 100, lines: 3, acked: 2}); err != nil {
		t.Fatal(err)
	}
	newer := &spoutCommitter{kv: kv, key: key, files: 2, owner: "newer"}
	c, err := newer.claim(ctx)
	if err != nil || c.Start != 100 || c.Resumes != 1 || c.Incarnations != 2 || c.Lines != 3 {
		t.Fatalf("newer claim: %+v %v", c, err)
	}
	for range 2 {
		if err := older.commit(ctx, spoutCounts{low: 200, lines: 5, acked: 4}); !errors.Is(err, ErrStaleSpout) {
			t.Fatalf("stale commit: %v", err)
		}
	}
	if err := newer.commit(ctx, spoutCounts{low: OccurrenceID(2, 0), lines: 10, acked: 10, replays: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := ClusterProgress(ctx, js, "gale-wordcount", "stale")
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "newer" || !got.Done || got.Lines != 13 || got.Acked != 12 || got.Replays != 1 || got.Resumes != 1 {
		t.Fatalf("final %+v", got)
	}
	// Committing nothing new writes nothing.
	if err := newer.commit(ctx, spoutCounts{low: OccurrenceID(2, 0), lines: 10, acked: 10, replays: 1}); err != nil || newer.rev != got.Revision {
		t.Fatalf("an unchanged commit: %v, revision %d, was %d", err, newer.rev, got.Revision)
	}
}

// spoutCollector records what a spout emits and reports.
type spoutCollector struct {
	emitted []*LinePos
	errs    []error
}

func (c *spoutCollector) Emit(values tuple.Values, msgID any) error {
	c.emitted = append(c.emitted, msgID.(*LinePos))
	return nil
}
func (c *spoutCollector) EmitTo(string, tuple.Values, any) error          { panic("EmitTo") }
func (c *spoutCollector) EmitDirect(int, string, tuple.Values, any) error { panic("EmitDirect") }
func (c *spoutCollector) ReportError(err error)                           { c.errs = append(c.errs, err) }
func (c *spoutCollector) Pending() int                                    { return 0 }

// A stale spout (its process paused while the task started elsewhere) has its next
// commit refused, reports it through the collector, and emits no more; the spout
// that took over resumes from the older one's commit.
func TestClusterStaleSpoutStops(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	files := absFiles(t, testio.Books(t)[5:6]) // 244-0.txt
	conf := &clusterConf{files: files, js: js, bucket: "gale-wordcount", run: "paused", commitInterval: time.Hour}
	ctx := testCtx(t, 20*time.Second)
	tc := topology.TaskContext{Component: "lines", TaskID: 1, Parallelism: 1}
	older, oc := &clusterSpout{conf: conf}, &spoutCollector{}
	if err := older.Open(ctx, tc, oc); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		older.NextTuple()
	}
	for _, id := range oc.emitted[:5] {
		older.Ack(id)
	}
	if err := older.commitNow(ctx); err != nil {
		t.Fatal(err)
	}
	low := oc.emitted[5].ID
	if c, err := ClusterProgress(ctx, js, conf.bucket, conf.run); err != nil || c.Low != low || c.Acked != 5 || c.Lines != 10 {
		t.Fatalf("older's commit: %+v %v, want low %d", c, err, low)
	}

	// The task moves: a new incarnation opens; the older one is paused meanwhile.
	newer, nc := &clusterSpout{conf: conf}, &spoutCollector{}
	if err := newer.Open(ctx, tc, nc); err != nil {
		t.Fatal(err)
	}
	newer.NextTuple()
	if len(nc.emitted) != 1 || nc.emitted[0].ID != low {
		t.Fatalf("the newer spout emitted %v first, want the older's low %d", nc.emitted, low)
	}

	// The older one resumes: its commit is refused, reported, and it emits no more.
	older.Ack(oc.emitted[5])
	if err := older.commitNow(ctx); !errors.Is(err, ErrStaleSpout) {
		t.Fatalf("stale commit: %v", err)
	}
	n := len(oc.emitted)
	older.NextTuple()
	older.NextTuple()
	if len(oc.emitted) != n || len(oc.errs) != 1 || !errors.Is(oc.errs[0], ErrStaleSpout) {
		t.Fatalf("stale spout: emitted %d more, reported %v", len(oc.emitted)-n, oc.errs)
	}
	if err := older.Close(); err != nil {
		t.Fatal(err)
	}
	if err := newer.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := ClusterProgress(ctx, js, conf.bucket, conf.run)
	if err != nil || c.Owner != newer.com.owner || c.Low != low || c.Resumes != 1 || len(nc.errs) != 0 {
		t.Fatalf("after both closed: %+v %v; newer reported %v", c, err, nc.errs)
	}
}

// countCollector records a bolt's acks and fails; safe for concurrent use (the
// count bolt's flusher acks too).
type countCollector struct {
	mu     sync.Mutex
	acked  []*tuple.Tuple
	failed []*tuple.Tuple
	errs   []error
}

func (c *countCollector) Emit(tuple.Values, ...*tuple.Tuple) error           { panic("Emit") }
func (c *countCollector) EmitTo(string, tuple.Values, ...*tuple.Tuple) error { panic("EmitTo") }
func (c *countCollector) EmitDirect(int, string, tuple.Values, ...*tuple.Tuple) error {
	panic("EmitDirect")
}
func (c *countCollector) Ack(t *tuple.Tuple) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked = append(c.acked, t)
	return nil
}
func (c *countCollector) Fail(t *tuple.Tuple) error { return c.FailWith(t, nil) }
func (c *countCollector) FailWith(t *tuple.Tuple, _ error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = append(c.failed, t)
	return nil
}
func (c *countCollector) ResetTimeout(*tuple.Tuple) error { return nil }
func (c *countCollector) ReportError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// take returns and forgets what was acked and failed.
func (c *countCollector) take() (acked, failed []*tuple.Tuple, errs []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	acked, failed, errs = c.acked, c.failed, c.errs
	c.acked, c.failed, c.errs = nil, nil, nil
	return
}

var splitSource = &tuple.Source{Component: "split", Stream: tuple.DefaultStream, Fields: tuple.NewFields(splitFields...)}

// wordTuple is split's tuple for the word at offset off of the line at id.
func wordTuple(word string, id uint64, off int) *tuple.Tuple {
	return tuple.New(splitSource, 2, tuple.Values{word, []uint64{id, 0}, off})
}

// A count task's changelog write is refused (a stale task of the same index wrote
// first): the batch's inputs fail, the state is dropped and rebuilt from the
// stream before the next input, so the replayed occurrences that the other writer
// stored are acked as duplicates and the rest applied once: the changelog holds
// every occurrence once. A task prepared again restores the same state.
func TestClusterCountWriteFailure(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	ctx := testCtx(t, 20*time.Second)
	conf := &clusterConf{files: []string{"/none"}, js: js, bucket: "gale-wordcount", run: "fail", flushInterval: time.Hour}
	tc := topology.TaskContext{Component: "count", TaskID: 4, TaskIndex: 0, Parallelism: 1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b, out := &changelogCount{conf: conf}, &countCollector{}
	if err := b.Prepare(ctx, tc, out); err != nil {
		t.Fatal(err)
	}
	defer b.Cleanup()
	words := []string{"a", "b", "c", "a", "b", "c", "d", "e"}
	tuples := make([]*tuple.Tuple, len(words))
	for i, w := range words {
		tuples[i] = wordTuple(w, 1000, 10*i) // occurrences 1000, 1010, ...
	}
	exec := func(ts ...*tuple.Tuple) {
		for _, t := range ts {
			b.Execute(t)
		}
	}
	exec(tuples[:3]...)
	exec(tuples[0]) // a duplicate whose first application is not stored yet: held
	if a, f, _ := out.take(); len(a)+len(f) != 0 {
		t.Fatalf("acked %d failed %d before the batch was written", len(a), len(f))
	}
	b.Drain()
	if a, f, errs := out.take(); len(a) != 4 || len(f) != 0 || len(errs) != 0 {
		t.Fatalf("after the write: acked %d failed %d, errors %v", len(a), len(f), errs)
	}
	exec(tuples[1]) // a duplicate of a stored occurrence: acked at once
	if a, _, _ := out.take(); len(a) != 1 {
		t.Fatalf("stored duplicate: acked %d", len(a))
	}

	// Another writer (a stale task 0) stores occurrences 3 and 4 first.
	var enc []byte = []byte{changelogVersion}
	enc = appendOccurrence(enc, 0, 1030, "a")
	enc = appendOccurrence(enc, 1030, 1040, "b")
	if _, err := js.Publish(ctx, changelogSubject(conf.bucket, conf.run, 0), enc); err != nil {
		t.Fatal(err)
	}
	exec(tuples[3:6]...)
	b.Drain()
	if a, f, errs := out.take(); len(a) != 0 || len(f) != 3 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "wrong last sequence") {
		t.Fatalf("refused write: acked %d failed %d, errors %v", len(a), len(f), errs)
	}
	// The lines replay: the state is rebuilt first.
	exec(tuples[3:]...)
	if a, f, _ := out.take(); len(a) != 2 || len(f) != 0 || a[0] != tuples[3] || a[1] != tuples[4] {
		t.Fatalf("replay: acked %v failed %d: want the two the other writer stored", a, len(f))
	}
	b.Drain()
	if a, f, _ := out.take(); len(a) != 3 || len(f) != 0 {
		t.Fatalf("replay written: acked %d failed %d", len(a), len(f))
	}
	want := map[string]uint64{"a": 2, "b": 2, "c": 2, "d": 1, "e": 1}
	got, err := ReadClusterCounts(ctx, js, conf.bucket, conf.run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(got.Counts, want); d != "" || got.Words != 8 || got.Duplicates != 0 || got.Messages != 3 {
		t.Fatalf("changelog: %+v\n%s", got, d)
	}
	b.mu.Lock()
	applied := b.applied
	b.mu.Unlock()
	if applied != 8 {
		t.Fatalf("the task holds %d occurrences applied, want 8", applied)
	}

	// Prepared again (the task moved), it restores the same occurrences and sees every
	// occurrence as applied.
	b2, out2 := &changelogCount{conf: conf}, &countCollector{}
	if err := b2.Prepare(ctx, tc, out2); err != nil {
		t.Fatal(err)
	}
	defer b2.Cleanup()
	if b2.applied != 8 {
		t.Fatalf("restored %d distinct occurrences, want 8", b2.applied)
	}
	for _, tt := range tuples {
		b2.Execute(tt)
	}
	if a, f, _ := out2.take(); len(a) != len(tuples) || len(f) != 0 || b2.n != 0 {
		t.Fatalf("after the restore: acked %d failed %d, %d in the batch", len(a), len(f), b2.n)
	}
}

// The server goes away mid-run and comes back (same port, same store): the
// spout's commits and the count tasks' writes fail meanwhile (a write may also be
// stored with its answer lost), their lines replay, the tasks rebuild their state
// from the changelogs, and the counts are still exact.
func TestClusterWordCountServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := runNATS(t, 0, dir)
	port := s.Addr().(*net.TCPAddr).Port
	js := connectJS(t, s.ClientURL())
	ctx := testCtx(t, 2*time.Minute)
	if err := EnsureClusterState(ctx, js, "gale-wordcount", 1); err != nil {
		t.Fatal(err)
	}
	files := absFiles(t, testio.Books(t)) // all of them: a run long enough to be cut by the restart
	o := ClusterOptions{Files: files, Config: clusterConfig(), JS: js, Bucket: "gale-wordcount", Run: "restart",
		CommitInterval: 20 * time.Millisecond, opTimeout: 300 * time.Millisecond}
	o.Config.MessageTimeout = 5 * time.Second
	rt, _ := startCluster(t, o)
	if _, err := watchCommit(ctx, js, o.Bucket, o.Run, func(c ClusterCommit) bool { return c.Low > 30_000 }); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	// The outage outlasts a request's timeout: the count tasks' writes (every flush
	// interval, while their lines are in flight) fail, and it lasts until a commit
	// of the spout's (every commit interval) has timed out and been reported.
	waitfor.Until(t, time.Minute, func() error {
		if st := rt.Stats().Components; st["lines"].Errors == 0 {
			return fmt.Errorf("the server is down and the spout has reported no error yet (the count tasks %d)", st["count"].Errors)
		}
		return nil
	})
	runNATS(t, port, dir)
	commit, err := WaitClusterDone(ctx, js, o.Bucket, o.Run)
	if err != nil {
		t.Fatal(err)
	}
	st := stopCluster(t, rt)
	got, err := ReadClusterCounts(ctx, js, o.Bucket, o.Run, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, got, files)
	errs := st.Components["count"].Errors + st.Components["lines"].Errors
	if errs == 0 {
		t.Fatal("no task reported an error during the outage")
	}
	t.Logf("%d words, %d duplicates in the changelogs; %d replays; task errors: count %d (%s), lines %d (%s)",
		got.Words, got.Duplicates, commit.Replays, st.Components["count"].Errors, st.Components["count"].LastError,
		st.Components["lines"].Errors, st.Components["lines"].LastError)
}

// Options are checked when the topology is built, each error naming its field; the
// JetStream context is needed only by the tasks.
func TestClusterOptionsRefused(t *testing.T) {
	files := absFiles(t, testio.Books(t)[:1])
	good := func() ClusterOptions {
		return ClusterOptions{Files: files, Config: clusterConfig(), Bucket: "b", Run: "r"}
	}
	if _, err := NewClusterTopology(good()); err != nil {
		t.Fatalf("good options (no JS) refused: %v", err)
	}
	noAckers := good()
	noAckers.Config.Ackers = 0
	for _, tc := range []struct {
		name string
		mod  func(*ClusterOptions)
		want string
	}{
		{"no files", func(o *ClusterOptions) { o.Files = nil }, "ClusterOptions.Files"},
		{"relative", func(o *ClusterOptions) { o.Files = []string{"book.txt"} }, "ClusterOptions.Files[0]"},
		{"fail rate", func(o *ClusterOptions) { o.FailRate = 1 }, "ClusterOptions.FailRate"},
		{"fail rate NaN", func(o *ClusterOptions) { o.FailRate = math.NaN() }, "ClusterOptions.FailRate"},
		{"parallelism", func(o *ClusterOptions) { o.Parallelism = -1 }, "ClusterOptions.Parallelism"},
		{"ackers", func(o *ClusterOptions) { o.Config.Ackers = 0 }, "ClusterOptions.Config.Ackers"},
		{"config", func(o *ClusterOptions) { o.Config.MessageTimeout = 0 }, "ClusterOptions.Config"},
		{"bucket", func(o *ClusterOptions) { o.Bucket = "" }, "ClusterOptions.Bucket"},
		{"bucket dot", func(o *ClusterOptions) { o.Bucket = "a.b" }, "ClusterOptions.Bucket"},
		{"run", func(o *ClusterOptions) { o.Run = "" }, "ClusterOptions.Run"},
		{"run wildcard", func(o *ClusterOptions) { o.Run = "r*" }, "ClusterOptions.Run"},
		{"commit interval", func(o *ClusterOptions) { o.CommitInterval = -time.Second }, "ClusterOptions.CommitInterval"},
		{"flush interval", func(o *ClusterOptions) { o.FlushInterval = -time.Second }, "ClusterOptions.FlushInterval"},
	} {
		o := good()
		tc.mod(&o)
		if _, err := NewClusterTopology(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	// No JS: the spout's Open refuses (the first task the engine opens).
	topo, err := NewClusterTopology(good())
	if err != nil {
		t.Fatal(err)
	}
	if rt, err := engine.Start(context.Background(), topo, clusterConfig()); err == nil || !strings.Contains(err.Error(), "ClusterOptions.JS is nil") {
		if err == nil {
			_ = rt.Stop(context.Background())
		}
		t.Fatalf("Start without JS: %v", err)
	}
}

// The cluster topology has the local topology's shape, so the same fingerprint, for
// every parallelism; building it twice gives the same fingerprint too.
func TestClusterTopologyFingerprint(t *testing.T) {
	cfg := clusterConfig()
	for _, par := range []int{0, 1, 2, 3, 8} {
		j := &job{opts: Options{Files: []string{"/x"}, Parallelism: par, Config: cfg}}
		local, err := j.build()
		if err != nil {
			t.Fatal(err)
		}
		clus, err := NewClusterTopology(ClusterOptions{Files: []string{"/x"}, Parallelism: par, Config: cfg, Bucket: "b", Run: "r"})
		if err != nil {
			t.Fatal(err)
		}
		again, err := NewClusterTopology(ClusterOptions{Files: []string{"/y"}, Parallelism: par, Config: cfg, Bucket: "c", Run: "s", FailRate: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		want := cluster.FingerprintOf("wordcount", local, cfg)
		for _, topo := range []*topology.Topology{clus, again} {
			if got := cluster.FingerprintOf("wordcount", topo, cfg); got != want {
				t.Fatalf("parallelism %d: cluster %v, local %v", par, got, want)
			}
		}
	}
}
