package jslog

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
)

// jsCounts is the server's own count of consumers and of JetStream API requests
// (and of those answered with an error).
type jsCounts struct {
	consumers   int
	api, errors uint64
}

func countsOf(t *testing.T, s *server.Server) jsCounts {
	t.Helper()
	jsz, err := s.Jsz(&server.JSzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return jsCounts{consumers: jsz.Consumers, api: jsz.API.Total, errors: jsz.API.Errors}
}

// advisories counts the consumers the server says it created and deleted.
func advisories(t *testing.T, url string) (created, deleted *atomic.Int64) {
	t.Helper()
	nc := natstest.Connect(t, url)
	created, deleted = new(atomic.Int64), new(atomic.Int64)
	for subj, n := range map[string]*atomic.Int64{
		"$JS.EVENT.ADVISORY.CONSUMER.CREATED.>": created,
		"$JS.EVENT.ADVISORY.CONSUMER.DELETED.>": deleted,
	} {
		if _, err := nc.Subscribe(subj, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return created, deleted
}

// levelLines keeps the messages logged at or above a level.
type levelLines struct {
	min   slog.Level
	mu    *sync.Mutex
	lines *[]string
}

func (h levelLines) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }
func (h levelLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}
func (h levelLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelLines) WithGroup(string) slog.Handler      { return h }

// idleFor is how long the idle serve is watched: the idleness is what is under
// test, so this window is wall time on purpose; the assertions are on counts.
const idleFor = 10 * time.Second

// An idle serve (its log spout calling Read every few milliseconds, the stream at
// its end) costs the server a handful of JetStream API requests, makes no new
// consumer and logs no error; once closed it leaves no consumer behind. Each Read
// used to be a FetchNoWait on an ordered consumer, which deletes the server's
// consumer and creates a new one every call (and orphans it on an error): the
// consumers piled up and the API ran at hundreds of requests a second.
func TestIdleServeDoesNotChurnConsumers(t *testing.T) {
	srv := natstest.Run(t, natstest.JetStream(t, ""))
	created, deleted := advisories(t, srv.ClientURL())
	var mu sync.Mutex
	var warned []string
	logger := slog.New(levelLines{min: slog.LevelWarn, mu: &mu, lines: &warned})
	l, err := Open(context.Background(), Config{JS: openJS(t, srv.ClientURL()), Prefix: "t", Timeout: 5 * time.Second, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	svc, err := ingest.New(ingest.Config{Log: l, FlushEvery: 5 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	b := topology.NewBuilder()
	b.SetSpout("log", svc.Spout(), 1).Output(ingest.SpoutFields...)
	b.SetBolt("sink", func() topology.Bolt { return &ackSink{seen: map[string]int{}} }, 1).ShuffleGrouping("log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tc := topology.DefaultConfig()
	tc.Logger = logger
	rt, err := engine.Start(context.Background(), topo, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	// A load that finished: the spout read to the stream's end and waits there.
	ctx := context.Background()
	for i, r := range svc.Submit(ctx, orderEvents(0, 5), ingest.LevelProcessed, 20*time.Second) {
		if r.Err != nil || r.Status.Status != ingest.Processed {
			t.Fatalf("event %d: %+v", i, r)
		}
	}

	before, c0, d0 := countsOf(t, srv), created.Load(), deleted.Load()
	time.Sleep(idleFor) // the idleness under test: a window of wall time (see idleFor)
	idle, c1, d1 := countsOf(t, srv), created.Load(), deleted.Load()
	t.Logf("idle %v: consumers %d -> %d (%d created, %d deleted), %d API requests (%d errors)",
		idleFor, before.consumers, idle.consumers, c1-c0, d1-d0, idle.api-before.api, idle.errors-before.errors)

	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	end := countsOf(t, srv)
	t.Logf("closed: %d consumers left", end.consumers)

	// The lease loop looks at the stream every LeaseTTL/3: three or four
	// requests in 10 s; the reader's own cost is its pull requests.
	const handful = 10
	if n := idle.api - before.api; n > handful {
		t.Errorf("%d JetStream API requests in %v of idleness, want at most %d", n, idleFor, handful)
	}
	if n := idle.errors - before.errors; n != 0 {
		t.Errorf("%d JetStream API errors in %v of idleness, want none", n, idleFor)
	}
	if idle.consumers > before.consumers {
		t.Errorf("consumers went from %d to %d in %v of idleness", before.consumers, idle.consumers, idleFor)
	}
	if end.consumers != 0 {
		t.Errorf("%d consumers left on the server after the log was closed, want none", end.consumers)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, line := range warned {
		t.Errorf("logged while idle: %s", line)
	}
}

// consumerNames lists the consumers of stream t-log.
func consumerNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), "t-log")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	lister := s.ConsumerNames(context.Background())
	for n := range lister.Name() {
		names = append(names, n)
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// The server loses the reader's consumer (a restarted node loses its memory
// consumers; an operator deletes it): the reader makes a new one where the last
// stopped, and there is still one.
func TestReaderRemakesALostConsumer(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	appendN(t, l, 1, 3)
	if recs, err := readTo(t, l, 1, 3, 10); err != nil || len(recs) != 3 {
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	names := consumerNames(t, js)
	if len(names) != 1 {
		t.Fatalf("consumers %v, want the reader's", names)
	}
	if err := js.DeleteConsumer(context.Background(), "t-log", names[0]); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 4, 2)
	if recs, err := readTo(t, l, 4, 5, 10); err != nil || len(recs) != 2 || recs[0].Seq != 4 {
		t.Fatalf("read after the loss: %+v, %v", recs, err)
	}
	if now := consumerNames(t, js); len(now) != 1 || now[0] == names[0] {
		t.Fatalf("consumers %v after the loss of %s, want one new one", now, names[0])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left := consumerNames(t, js); len(left) != 0 {
		t.Fatalf("consumers %v left after Close", left)
	}
}

// A record that does not decode stops Read there, call after call, at no cost to
// the server: the reader keeps it, and neither moves past it nor makes its
// consumer again (each call used to make one).
func TestReadStopsAtABadRecordWithoutChurn(t *testing.T) {
	srv := natstest.Run(t, natstest.JetStream(t, ""))
	js := openJS(t, srv.ClientURL())
	l := open(t, js)
	appendN(t, l, 1, 2)
	if _, err := js.Publish(context.Background(), "t.log.YmFk", []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 4, 1)
	recs, err := readTo(t, l, 1, 4, 10)
	if err == nil || !strings.Contains(err.Error(), "seq 3") || len(recs) != 2 {
		t.Fatalf("read: %d records, %v; want 2 and an error at seq 3", len(recs), err)
	}
	before := countsOf(t, srv)
	for range 100 {
		if recs, err := l.Read(3, 10); err == nil || len(recs) != 0 || !strings.Contains(err.Error(), "seq 3") {
			t.Fatalf("Read(3) again: %d records, %v", len(recs), err)
		}
	}
	if after := countsOf(t, srv); after.api != before.api || after.consumers != before.consumers {
		t.Fatalf("100 Reads at the bad record: %d API requests, consumers %d -> %d; want none, and no change",
			after.api-before.api, before.consumers, after.consumers)
	}
}

// The server restarts under an idle reader: its memory consumer is gone, and the
// reader makes a new one once reconnected (not only when it has missed two
// heartbeats), reads on from where it stopped, and there is one consumer, none
// once closed.
func TestReaderAfterARestartedServer(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.Run(t, natstest.JetStream(t, dir))
	port := srv.Addr().(*net.TCPAddr).Port
	js := openJS(t, srv.ClientURL())
	l := open(t, js)
	appendN(t, l, 1, 2)
	if recs, err := readTo(t, l, 1, 2, 10); err != nil || len(recs) != 2 {
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	srv = natstest.Run(t, natstest.JetStream(t, dir), natstest.Port(port))
	waitfor.Until(t, time.Minute, func() error { // until the stream is back
		return l.Append(context.Background(), rec("e3", 0, `{}`))
	})
	if recs, err := readTo(t, l, 3, 3, 10); err != nil || len(recs) != 1 || recs[0].Event.ID != "e3" {
		t.Fatalf("read after the restart: %+v, %v", recs, err)
	}
	if c := countsOf(t, srv).consumers; c != 1 {
		t.Fatalf("%d consumers after the restart, want the reader's", c)
	}
	if err := l.Close(); err != nil { // before the server's cleanup stops it
		t.Fatal(err)
	}
	if c := countsOf(t, srv).consumers; c != 0 {
		t.Fatalf("%d consumers left after Close", c)
	}
}
