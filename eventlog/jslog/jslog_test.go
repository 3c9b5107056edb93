package jslog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func openJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// readTo reads from seq from on, n records a call, until it has read the record
// at seq last or Read fails; between calls it waits for the reader (bounded).
func readTo(t *testing.T, l *Log, from, last uint64, n int) ([]event.Record, error) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	var out []event.Record
	for {
		recs, err := l.Read(from, n)
		if len(recs) > n {
			t.Fatalf("Read(%d, %d): %d records", from, n, len(recs))
		}
		out = append(out, recs...)
		if len(recs) > 0 {
			from = recs[len(recs)-1].Seq + 1
		}
		if err != nil || from > last {
			return out, err
		}
		select {
		case <-l.readWake():
		case <-deadline.C:
			t.Fatalf("reading to seq %d: stuck at seq %d for 10s", last, from)
		}
	}
}

func rec(id string, gen uint32, payload string) *event.Record {
	e := event.Event{ID: id, Source: "orders", Type: "order_line", Payload: []byte(payload)}
	return &event.Record{ReceivedAt: time.Now().UnixNano(), Generation: gen, Hash: e.Hash(), Event: e}
}

func open(t *testing.T, js jetstream.JetStream) *Log {
	t.Helper()
	l, err := Open(context.Background(), Config{JS: js, Prefix: "t", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// The log's contract as ingest.Service uses it: seqs from 1 in order, the dedupe
// entry of a stored id, a second record of an id refused (ErrExists) while a next
// generation is taken, reads by range and by seq, documents and the committed
// offset kept across a reopen.
func TestLogContract(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	var _ ingest.Log = l
	ctx := context.Background()
	a, b, c := rec("a", 0, `{"n":1}`), rec("b/é ü", 0, `{"n":2}`), rec("c", 0, `{"n":3}`)
	if err := l.Append(ctx, a, b, c); err != nil {
		t.Fatal(err)
	}
	if a.Seq != 1 || b.Seq != 2 || c.Seq != 3 || l.Durable() != 3 {
		t.Fatalf("seqs %d %d %d, durable %d; want 1 2 3, 3", a.Seq, b.Seq, c.Seq, l.Durable())
	}
	e, ok, err := l.Lookup("b/é ü")
	if err != nil || !ok || e.Seq != 2 || e.Hash != b.Hash || e.Generation != 0 || e.ReceivedAt != b.ReceivedAt {
		t.Fatalf("Lookup(b): %+v %v %v", e, ok, err)
	}
	if _, ok, err := l.Lookup("nope"); ok || err != nil {
		t.Fatalf("Lookup(nope): %v %v", ok, err)
	}
	// The same id again (another serve, or a resend whose answer was lost).
	err = l.Append(ctx, rec("a", 0, `{"n":1}`))
	if !errors.Is(err, ErrExists) {
		t.Fatalf("a second record of a: %v, want ErrExists", err)
	}
	// Its next generation (a :retry) is taken.
	a1 := rec("a", 1, `{"n":1}`)
	if err := l.Append(ctx, a1); err != nil || a1.Seq != 4 {
		t.Fatalf("generation 1 of a: seq %d, %v", a1.Seq, err)
	}
	if e, _, _ := l.Lookup("a"); e.Seq != 4 || e.Generation != 1 {
		t.Fatalf("Lookup(a) after generation 1: %+v", e)
	}
	recs, err := readTo(t, l, 1, 4, 10)
	if err != nil || len(recs) != 4 {
		t.Fatalf("Read(1, 10): %d records, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
	if recs[1].Event.ID != "b/é ü" || string(recs[1].Event.Payload) != `{"n":2}` || recs[3].Generation != 1 {
		t.Errorf("records read: %+v", recs)
	}
	if recs, err := readTo(t, l, 3, 3, 1); err != nil || len(recs) != 1 || recs[0].Event.ID != "c" {
		t.Fatalf("Read(3, 1): %+v %v", recs, err)
	}
	// Past the end: nothing, before and after the reader's consumer is made.
	if recs, err := l.Read(5, 10); err != nil || len(recs) != 0 {
		t.Fatalf("Read past the end: %+v %v", recs, err)
	}
	select {
	case <-l.readWake():
	case <-time.After(10 * time.Second):
		t.Fatal("the reader at seq 5 was not made in 10s")
	}
	if recs, err := l.Read(5, 10); err != nil || len(recs) != 0 {
		t.Fatalf("Read past the end, with its consumer made: %+v %v", recs, err)
	}
	if r, ok, err := l.ReadSeq(2); err != nil || !ok || r.Event.ID != "b/é ü" || r.Seq != 2 {
		t.Fatalf("ReadSeq(2): %+v %v %v", r, ok, err)
	}

	var w eventlog.Write
	w.Set(eventlog.Status, "a", []byte(`{"status":"PROCESSED"}`))
	w.Set(eventlog.DeadLetter, "b/é ü", []byte(`{"error":"boom"}`))
	w.Set(eventlog.DeadLetter, "c", []byte(`{"error":"bang"}`))
	w.Committed = 3
	if err := l.Apply(&w); err != nil {
		t.Fatal(err)
	}
	var d eventlog.Write
	d.Delete(eventlog.DeadLetter, "c")
	if err := l.Apply(&d); err != nil {
		t.Fatal(err)
	}
	l2 := open(t, js)
	if l2.Committed() != 3 || l2.Durable() != 4 {
		t.Fatalf("reopened: committed %d durable %d, want 3 and 4", l2.Committed(), l2.Durable())
	}
	if doc, ok, err := l2.Get(eventlog.Status, "a"); err != nil || !ok || string(doc) != `{"status":"PROCESSED"}` {
		t.Fatalf("Get(status a): %s %v %v", doc, ok, err)
	}
	var dead []string
	if err := l2.Scan(eventlog.DeadLetter, func(id string, doc []byte) bool { dead = append(dead, id+"="+string(doc)); return true }); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0] != `b/é ü={"error":"boom"}` {
		t.Fatalf("dead letters after the delete: %v", dead)
	}
}

// Two writers of the same ids at once (two serve processes): each id is stored
// once; every other attempt is ErrExists.
func TestConcurrentWritersStoreAnIDOnce(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	l1, l2 := open(t, openJS(t, url)), open(t, openJS(t, url))
	const n = 200
	var wg sync.WaitGroup
	errs := make([][]error, 2)
	for w, l := range []*Log{l1, l2} {
		errs[w] = make([]error, n)
		wg.Go(func() {
			for i := range n {
				errs[w][i] = l.Append(context.Background(), rec(fmt.Sprintf("e%d", i), 0, `{}`))
			}
		})
	}
	wg.Wait()
	for i := range n {
		ok := 0
		for w := range 2 {
			switch err := errs[w][i]; {
			case err == nil:
				ok++
			case !errors.Is(err, ErrExists):
				t.Fatalf("e%d on writer %d: %v", i, w+1, err)
			}
		}
		if ok != 1 {
			t.Fatalf("e%d stored by %d writers, want 1", i, ok)
		}
	}
	info, err := l1.stream.Info(context.Background())
	if err != nil || info.State.Msgs != n || info.State.LastSeq != n {
		t.Fatalf("stream: %+v %v, want %d records", info.State, err, n)
	}
}

// ackSink acks every input and counts each event id it saw.
type ackSink struct {
	out  topology.OutputCollector
	mu   sync.Mutex
	seen map[string]int
}

func (b *ackSink) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *ackSink) Cleanup() error { return nil }
func (b *ackSink) Execute(in *tuple.Tuple) {
	b.mu.Lock()
	b.seen[in.StringByField("event_id")]++
	b.mu.Unlock()
	_ = b.out.Ack(in)
}

// ingest.Service on the JetStream log: events answered PROCESSED, a resend a
// duplicate with nothing appended, statuses read back, and a second Service on the
// same stream (a restarted serve) resumes at the committed offset.
func TestServiceOnTheJetStreamLog(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	svc, err := ingest.New(ingest.Config{Log: l, FlushEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sink := &ackSink{seen: map[string]int{}}
	b := topology.NewBuilder()
	b.SetSpout("log", svc.Spout(), 1).Output(ingest.SpoutFields...)
	b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var evs []event.Event
	for i := range 50 {
		evs = append(evs, event.Event{ID: fmt.Sprintf("o%d", i), Source: "orders", Type: "order_line", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	for i, r := range svc.Submit(ctx, evs, ingest.LevelProcessed, 20*time.Second) {
		if r.Err != nil || r.Status.Status != ingest.Processed || r.Status.Seq != uint64(i+1) || r.Duplicate {
			t.Fatalf("event %d: %+v", i, r)
		}
	}
	again := svc.Submit(ctx, evs[:5], ingest.LevelProcessed, 20*time.Second)
	for i, r := range again {
		if r.Err != nil || r.Status.Status != ingest.Processed || !r.Duplicate || r.Status.Seq != uint64(i+1) {
			t.Fatalf("resend %d: %+v", i, r)
		}
	}
	if l.Durable() != 50 {
		t.Fatalf("durable %d after the resends, want 50 (nothing appended)", l.Durable())
	}
	if st, err := svc.Status("o7"); err != nil || st.Status != ingest.Processed || st.Seq != 8 {
		t.Fatalf("Status(o7): %+v %v", st, err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	for id, n := range sink.seen {
		if n != 1 {
			t.Errorf("%s executed %d times", id, n)
		}
	}
	if len(sink.seen) != 50 {
		t.Errorf("sink saw %d events, want 50", len(sink.seen))
	}
	// A restarted serve: the committed offset is past every event, and the statuses
	// are there for a new Service.
	l2 := open(t, js)
	if l2.Committed() != 51 {
		t.Fatalf("committed offset after the run: %d, want 51", l2.Committed())
	}
	svc2, err := ingest.New(ingest.Config{Log: l2})
	if err != nil {
		t.Fatal(err)
	}
	defer svc2.Close()
	if st, err := svc2.Status("o42"); err != nil || st.Status != ingest.Processed {
		t.Fatalf("Status(o42) from a new service: %+v %v", st, err)
	}
}

// MayContain's negative cache: false right after a Lookup found no record, true
// again once this process submits the id, or while a Lookup it raced with was
// running, or past absentTTL. A stale false (another process stored the id) is
// caught by the stream: the publish is refused with ErrExists, nothing is stored
// twice.
func TestMayContainNegativeCache(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l, other := open(t, js), open(t, js)
	ctx := context.Background()
	if !l.MayContain("x") {
		t.Fatal("MayContain(x) false before any Lookup")
	}
	if _, ok, err := l.Lookup("x"); ok || err != nil {
		t.Fatalf("Lookup(x): %v %v", ok, err)
	}
	if l.MayContain("x") {
		t.Fatal("MayContain(x) true right after a Lookup found no record")
	}
	if err := l.Append(ctx, rec("x", 0, `{}`)); err != nil {
		t.Fatal(err)
	}
	if !l.MayContain("x") {
		t.Fatal("MayContain(x) false after this process stored x")
	}
	if _, ok, _ := l.Lookup("x"); !ok || !l.MayContain("x") {
		t.Fatalf("Lookup(x) after its append: %v, MayContain %v", ok, l.MayContain("x"))
	}

	// Another serve process stores y after this one found it absent: the stale
	// absence costs a refused publish, never a second record.
	if _, ok, err := l.Lookup("y"); ok || err != nil {
		t.Fatalf("Lookup(y): %v %v", ok, err)
	}
	if err := other.Append(ctx, rec("y", 0, `{}`)); err != nil {
		t.Fatal(err)
	}
	if l.MayContain("y") {
		t.Fatal("expected the stale absence of y (the other process is not seen)")
	}
	if err := l.Append(ctx, rec("y", 0, `{}`)); !errors.Is(err, ErrExists) {
		t.Fatalf("a second record of y: %v, want ErrExists", err)
	}
	if !l.MayContain("y") {
		t.Fatal("MayContain(y) false after a refused publish of y")
	}
	info, err := l.Stream().Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %v records (%v), want 2", info.State.Msgs, err)
	}

	// A Lookup that ran while this process submitted (or was acknowledged for) the
	// id answers nothing for MayContain: its "absent" may predate the record.
	tok := l.lookupStarts("z")
	l.forgetAbsent("z") // Submit of z, or its acknowledgement
	l.lookupEnds("z", tok, true)
	if !l.MayContain("z") {
		t.Fatal("an absence seen across a Submit of z was kept")
	}
	// A newer Lookup of the same id supersedes an older one.
	old := l.lookupStarts("w")
	tok = l.lookupStarts("w")
	l.lookupEnds("w", old, true)
	if !l.MayContain("w") {
		t.Fatal("an older Lookup's absence was kept over a newer one in progress")
	}
	l.lookupEnds("w", tok, true)
	if l.MayContain("w") {
		t.Fatal("the newer Lookup's absence was not kept")
	}
	// Past absentTTL the absence is not trusted.
	l.nmu.Lock()
	l.absent["w"] = absence{tok: tok, at: time.Now().Add(-absentTTL)}
	l.nmu.Unlock()
	if !l.MayContain("w") {
		t.Fatal("an absence older than absentTTL was trusted")
	}
}

// Resends racing their first copy in one process, with the negative cache: each
// id is stored once, and every answer is PERSISTED, the copies duplicates, never a
// refused publish (the cache forgets an id as soon as this process submits it).
func TestServiceConcurrentResendsOnTheJetStreamLog(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	svc, err := ingest.New(ingest.Config{Log: l})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	const ids, copies = 40, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := map[string]int{}
	for c := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				id := fmt.Sprintf("r%d", (i+c)%ids)
				ev := event.Event{ID: id, Source: "orders", Type: "order_line", Payload: []byte(`{"n":1}`)}
				r := svc.Submit(context.Background(), []event.Event{ev}, ingest.LevelPersisted, 0)[0]
				if r.Err != nil || r.Status.Status != ingest.Persisted {
					t.Errorf("%s: %+v", id, r)
					continue
				}
				if !r.Duplicate {
					mu.Lock()
					fresh[id]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		if id := fmt.Sprintf("r%d", i); fresh[id] != 1 {
			t.Errorf("%s answered new %d times", id, fresh[id])
		}
	}
	if l.Durable() != ids {
		t.Errorf("%d records stored, want %d", l.Durable(), ids)
	}
}

// Lookup says when the record was stored: the stored message's timestamp, after
// its receipt and no later than the acknowledgement, the same after a reopen
// (issue 25 §4: an event's history rebuilt from the log showed its receipt time).
func TestLookupSaysWhenStored(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := open(t, js)
	ctx := context.Background()
	a := rec("a", 0, `{"n":1}`)
	if err := l.Append(ctx, a); err != nil {
		t.Fatal(err)
	}
	acked := time.Now().UnixNano()
	m, err := l.Stream().GetMsg(ctx, a.Seq)
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := l.Lookup("a")
	if err != nil || !ok {
		t.Fatalf("Lookup(a): %v %v", ok, err)
	}
	if e.PersistedAt != m.Time.UnixNano() || e.PersistedAt <= a.ReceivedAt || e.PersistedAt > acked {
		t.Fatalf("Lookup(a).PersistedAt = %d; want the stored message's time %d, after the receipt %d and no later than the ack %d",
			e.PersistedAt, m.Time.UnixNano(), a.ReceivedAt, acked)
	}
	_ = l.Close()
	l2 := open(t, js)
	if e2, _, err := l2.Lookup("a"); err != nil || e2.PersistedAt != e.PersistedAt {
		t.Fatalf("after a reopen: PersistedAt %d, %v; was %d", e2.PersistedAt, err, e.PersistedAt)
	}
}

// switchableSink is an ingest.SinkHealth the test turns on and off.
type switchableSink struct{ down atomic.Bool }

func (s *switchableSink) Err() error {
	if s.down.Load() {
		return errors.New("sink down")
	}
	return nil
}
func (s *switchableSink) Outages() uint64 { return 0 }

// An event's history on the JetStream log (issue 25 §4): persisted after
// received and no later than started, at the stored message's time once the
// event is out of memory, and the same from a second service (a restart).
func TestHistoryOnTheJetStreamLog(t *testing.T) {
	u := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	health := &switchableSink{}
	health.down.Store(true)
	a, rta := startServeWith(t, openLeased(t, u, "a"), ingest.Config{FlushEvery: 5 * time.Millisecond, Sink: health}, &ackSink{seen: map[string]int{}})
	ctx := context.Background()
	r := a.Submit(ctx, orderEvents(0, 1), ingest.LevelPersisted, 0)[0]
	if r.Err != nil || r.Status.Status != ingest.Persisted {
		t.Fatalf("o0: %+v", r)
	}
	m, err := openLeased(t, u, "reader").Stream().GetMsg(ctx, r.Status.Seq)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(st ingest.EventStatus) map[ingest.Step]ingest.Transition {
		out := map[ingest.Step]ingest.Transition{}
		for _, tr := range st.Transitions {
			out[tr.Step] = tr
		}
		return out
	}
	st, err := a.Status("o0") // not started (the sink is down): rebuilt from the stream
	s := steps(st)
	if err != nil || s[ingest.StepPersisted].At != m.Time.UnixNano() || s[ingest.StepPersisted].Approximate ||
		s[ingest.StepPersisted].At <= s[ingest.StepReceived].At {
		t.Fatalf("o0 out of memory: %+v %v; want persisted at the stored time %d, after received", st, err, m.Time.UnixNano())
	}
	persisted := s[ingest.StepPersisted].At
	health.down.Store(false)
	waitfor.Until(t, 10*time.Second, func() error {
		if st, _ = a.Status("o0"); st.Status != ingest.Processed {
			return fmt.Errorf("o0 not processed: %+v", st)
		}
		return nil
	})
	s = steps(st)
	if s[ingest.StepPersisted].At != persisted || s[ingest.StepStarted].At < persisted {
		t.Fatalf("o0 processed: %+v; want persisted still at %d, started no earlier", st, persisted)
	}
	_ = rta.Stop(ctx)
	_ = a.Close()
	b, _ := startServe(t, openLeased(t, u, "b"))
	st, err = b.Status("o0")
	if s := steps(st); err != nil || st.Status != ingest.Processed || s[ingest.StepPersisted].At != persisted {
		t.Fatalf("o0 from a second service: %+v %v; want persisted at %d", st, err, persisted)
	}
}
