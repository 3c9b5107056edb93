package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natsjs "github.com/gale-stream/gale/connect/jetstream"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// events emits n events (event_id "e-<i>", data "payload <i>") once each, released
// by gate when it is not nil (one event per value received). It records the acks and
// failures of their trees, and calls onAck with each ack.
type events struct {
	topology.BaseSpout
	n, next int
	gate    chan struct{}
	rec     *outcomes
}

type outcomes struct {
	mu     sync.Mutex
	acked  int
	failed []string
	onAck  func() error
	errs   []error
}

func (o *outcomes) get() (int, []string, []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.acked, append([]string(nil), o.failed...), append([]error(nil), o.errs...)
}

func (s *events) NextTuple() {
	if s.next >= s.n {
		return
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		default:
			return
		}
	}
	id := fmt.Sprintf("e-%d", s.next)
	_ = s.Out.Emit(tuple.Values{id, []byte("payload " + id)}, s.next)
	s.next++
}

func (s *events) Ack(any) {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	s.rec.acked++
	if s.rec.onAck != nil {
		if err := s.rec.onAck(); err != nil {
			s.rec.errs = append(s.rec.errs, err)
		}
	}
}

func (s *events) FailReason(id any, reason string) {
	s.rec.mu.Lock()
	s.rec.failed = append(s.rec.failed, fmt.Sprintf("%v: %s", id, reason))
	s.rec.mu.Unlock()
}

func sinkTopology(t *testing.T, spout func() topology.Spout, snk *natsjs.Sink) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("events", spout, 1).Output("event_id", "data")
	b.SetBolt("sink", snk.Bolt, 2).ShuffleGrouping("events")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func streamMsgs(t *testing.T, st jetstream.Stream) uint64 {
	t.Helper()
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Every input is acked only once the stream holds it; a replayed input with the same
// event id is stored once and counted as a duplicate.
func TestSinkAcksAfterPubAckAndDedupes(t *testing.T) {
	js := newJS(t)
	st := mustStream(t, js, "OUT", "out.events")
	snk, err := natsjs.NewSink(js, "out.events", natsjs.WithMaxInFlight(16))
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	cfg := testConfig(5 * time.Second)
	for run := range 2 { // the second run replays every event: same ids
		rec := &outcomes{}
		rec.onAck = func() error {
			info, err := st.Info(context.Background())
			if err != nil {
				return err
			}
			if int(info.State.Msgs) < min(rec.acked, n) && run == 0 {
				return fmt.Errorf("%d inputs acked with %d messages stored", rec.acked, info.State.Msgs)
			}
			return nil
		}
		rt := start(t, context.Background(), sinkTopology(t, func() topology.Spout { return &events{n: n, rec: rec} }, snk), cfg)
		waitfor.True(t, 30*time.Second, "every event acked", func() bool { a, _, _ := rec.get(); return a == n })
		stop(t, rt)
		if _, failed, errs := rec.get(); len(failed) > 0 || len(errs) > 0 {
			t.Fatalf("run %d: failed %v, ack checks %v", run, failed, errs)
		}
	}
	if got := streamMsgs(t, st); got != n {
		t.Errorf("stream holds %d messages, want %d (each event id once)", got, n)
	}
	s := snk.Stats()
	if s.Stored != 2*n || s.Duplicates != n || s.Failed != 0 || s.Outages != 0 {
		t.Errorf("stats %+v: want %d stored of which %d duplicates", s, 2*n, n)
	}
	m, err := st.GetMsg(context.Background(), 1)
	if err != nil || "payload "+m.Header.Get(jetstream.MsgIDHeader) != string(m.Data) {
		t.Errorf("first message %v %q (%v), want its event id as Nats-Msg-Id", m.Header, m.Data, err)
	}
}

// An input without a usable event id is failed: its own fault, with the reason.
func TestSinkFailsBadInput(t *testing.T) {
	js := newJS(t)
	mustStream(t, js, "OUT", "out.events")
	snk, err := natsjs.NewSink(js, "out.events", natsjs.WithEventIDField("data"), natsjs.WithDataField("event_id"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &outcomes{}
	rt := start(t, context.Background(), sinkTopology(t, func() topology.Spout { return &events{n: 1, rec: rec} }, snk), testConfig(5*time.Second))
	waitfor.True(t, 10*time.Second, "the input failed", func() bool { _, f, _ := rec.get(); return len(f) == 1 })
	stop(t, rt)
	_, failed, _ := rec.get()
	if !strings.Contains(failed[0], `field "data" (the event id) is []uint8`) {
		t.Errorf("failure %q, want one naming the field", failed[0])
	}
	if s := snk.Stats(); s.Failed != 1 || s.Published != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A sink whose subject no stream captures is refused at Prepare: Start fails.
func TestSinkNoStream(t *testing.T) {
	js := newJS(t)
	snk, err := natsjs.NewSink(js, "nowhere")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := startErr(sinkTopology(t, func() topology.Spout { return &events{rec: &outcomes{}} }, snk), testConfig(time.Second))
	if err == nil {
		stop(t, rt)
	}
	if !errors.Is(err, natsjs.ErrNoStream) || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Errorf("Start: %v, want ErrNoStream naming the subject", err)
	}
}

// The stream deleted mid-run (a publish to a stream that no longer exists): inputs
// are held, not failed, and stored once it is back.
func TestSinkHoldsWhileStreamMissing(t *testing.T) {
	js := newJS(t)
	mustStream(t, js, "OUT", "out.events")
	snk, err := natsjs.NewSink(js, "out.events", natsjs.WithPublishTimeout(time.Second),
		natsjs.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	gate := make(chan struct{}, n)
	rec := &outcomes{}
	rt := start(t, context.Background(), sinkTopology(t, func() topology.Spout { return &events{n: n, gate: gate, rec: rec} }, snk), testConfig(time.Second))
	for range n / 2 {
		gate <- struct{}{}
	}
	waitfor.True(t, 10*time.Second, "half acked", func() bool { a, _, _ := rec.get(); return a == n/2 })
	if err := js.DeleteStream(context.Background(), "OUT"); err != nil {
		t.Fatal(err)
	}
	for range n / 2 {
		gate <- struct{}{}
	}
	waitfor.True(t, 10*time.Second, "an outage seen", func() bool { return snk.Stats().Outages > 0 })
	// Held across several message timeouts (1 s): ResetTimeout keeps the trees alive.
	waitfor.True(t, 10*time.Second, "probes across 2 s", func() bool { return snk.Stats().Retries >= 20 })
	st := mustStream(t, js, "OUT", "out.events")
	waitfor.True(t, 20*time.Second, "every event acked", func() bool { a, _, _ := rec.get(); return a == n })
	stop(t, rt)
	if _, failed, _ := rec.get(); len(failed) > 0 {
		t.Errorf("inputs charged for the outage: %v", failed)
	}
	if got := streamMsgs(t, st); got != n/2 {
		t.Errorf("the new stream holds %d messages, want %d", got, n/2)
	}
}

// The server stopped mid-run and restarted on its port and store: no input is
// failed (an outage is not the events' fault), every event is stored once.
func TestSinkServerRestart(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.Run(t, natstest.JetStream(t, dir))
	port := srv.Addr().(*net.TCPAddr).Port
	js, err := jetstream.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	mustStream(t, js, "OUT", "out.events")
	snk, err := natsjs.NewSink(js, "out.events", natsjs.WithPublishTimeout(500*time.Millisecond),
		natsjs.WithRetryBackoff(20*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	gate := make(chan struct{}, n)
	rec := &outcomes{}
	rt := start(t, context.Background(), sinkTopology(t, func() topology.Spout { return &events{n: n, gate: gate, rec: rec} }, snk), testConfig(2*time.Second))
	for range n / 2 {
		gate <- struct{}{}
	}
	waitfor.True(t, 10*time.Second, "half acked", func() bool { a, _, _ := rec.get(); return a == n/2 })
	srv.Shutdown()
	srv.WaitForShutdown()
	for range n / 2 {
		gate <- struct{}{}
	}
	waitfor.True(t, 10*time.Second, "an outage seen", func() bool { return snk.Stats().Outages > 0 })
	natstest.Run(t, natstest.JetStream(t, dir), natstest.Port(port))
	waitfor.True(t, 30*time.Second, "every event acked", func() bool { a, _, _ := rec.get(); return a == n })
	stop(t, rt)
	if _, failed, _ := rec.get(); len(failed) > 0 {
		t.Errorf("inputs charged for the outage: %v", failed)
	}
	st, err := js.Stream(context.Background(), "OUT")
	if err != nil {
		t.Fatal(err)
	}
	if got := streamMsgs(t, st); got != n {
		t.Errorf("stream holds %d messages, want %d", got, n)
	}
	t.Logf("sink %+v", snk.Stats())
}

// Misuse: each bad argument or option is refused with an error that names it.
func TestSinkMisuse(t *testing.T) {
	js := newJS(t)
	for _, tc := range []struct {
		name    string
		js      jetstream.JetStream
		subject string
		opts    []natsjs.SinkOption
		want    string
	}{
		{"nil js", nil, "s", nil, "nil JetStream"},
		{"wildcard subject", js, "out.>", nil, `subject "out.>"`},
		{"empty subject", js, "", nil, `subject ""`},
		{"id field", js, "s", []natsjs.SinkOption{natsjs.WithEventIDField("")}, `WithEventIDField("")`},
		{"data field", js, "s", []natsjs.SinkOption{natsjs.WithDataField("")}, `WithDataField("")`},
		{"same field", js, "s", []natsjs.SinkOption{natsjs.WithDataField("event_id")}, `both field "event_id"`},
		{"in flight", js, "s", []natsjs.SinkOption{natsjs.WithMaxInFlight(0)}, "WithMaxInFlight(0)"},
		{"timeout", js, "s", []natsjs.SinkOption{natsjs.WithPublishTimeout(-time.Second)}, "WithPublishTimeout(-1s)"},
		{"backoff", js, "s", []natsjs.SinkOption{natsjs.WithRetryBackoff(0, time.Second)}, "WithRetryBackoff(0s, 1s)"},
		{"header", js, "s", []natsjs.SinkOption{natsjs.WithHeaderField("f", "Nats-Msg-Id")}, `WithHeaderField("f", "Nats-Msg-Id")`},
		{"nil option", js, "s", []natsjs.SinkOption{nil}, "nil option"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := natsjs.NewSink(tc.js, tc.subject, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, natsjs.ErrOption) {
				t.Errorf("error %v, want ErrOption containing %q", err, tc.want)
			}
		})
	}
}
