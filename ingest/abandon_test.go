package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// holdBolt takes its inputs and never acks them: their trees stay in flight, as
// when a worker running part of them is lost.
type holdBolt struct {
	mu   sync.Mutex
	got  map[string]bool
	seen chan struct{}
	want int
}

func (b *holdBolt) Prepare(context.Context, topology.TaskContext, topology.OutputCollector) error {
	return nil
}
func (b *holdBolt) Cleanup() error { return nil }
func (b *holdBolt) Execute(t *tuple.Tuple) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got[t.StringByField("event_id")] = true
	if len(b.got) == b.want {
		close(b.seen)
	}
}

// ackBolt acks everything.
type ackBolt struct{ out topology.OutputCollector }

func (b *ackBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *ackBolt) Cleanup() error         { return nil }
func (b *ackBolt) Execute(t *tuple.Tuple) { _ = b.out.Ack(t) }

// A log spout cut off with trees in flight (its engine's context cancelled, as a
// cluster generation is when a worker is lost) leaves them to ChargeAbandoned: each
// is charged one attempt with the reason, the next spout emits them again, and an
// event out of attempts is dead-lettered instead. ReleaseAbandoned (a stop) gives
// the attempt back.
func TestChargeAbandoned(t *testing.T) {
	l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	svc, err := New(Config{Log: l, Logger: quiet(), FlushEvery: 5 * time.Millisecond,
		Tracker: TrackerConfig{MaxAttempts: 2, BackoffBase: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	run := func(bolt topology.Bolt) (*engine.Runtime, context.CancelFunc) {
		b := topology.NewBuilder()
		b.SetSpout("log", svc.Spout(), 1).Output(SpoutFields...)
		b.SetBolt("sink", func() topology.Bolt { return bolt }, 1).ShuffleGrouping("log")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		tc := topology.DefaultConfig()
		tc.Logger = quiet()
		ctx, cancel := context.WithCancel(context.Background())
		rt, err := engine.Start(ctx, topo, tc)
		if err != nil {
			t.Fatal(err)
		}
		return rt, cancel
	}
	srv := httptest.NewServer(svc.Handler(HTTPOptions{MaxEventBytes: 4096}))
	defer srv.Close()
	post := func(id string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/events?ack=persisted", "application/json", strings.NewReader(ev(id, `{"qty":1}`)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"PERSISTED"`) {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, b)
		}
	}
	cutOff := func(ids ...string) {
		t.Helper()
		hold := &holdBolt{got: map[string]bool{}, seen: make(chan struct{}), want: len(ids)}
		rt, cancel := run(hold)
		select {
		case <-hold.seen:
		case <-time.After(10 * time.Second):
			t.Fatalf("the bolt got %v, want %v", hold.got, ids)
		}
		cancel()
		<-rt.Done()
	}

	post("a")
	post("b")
	cutOff("a", "b")
	if n, dead := svc.ChargeAbandoned("worker w1 lost"); n != 2 || dead != 0 {
		t.Fatalf("charged %d, dead-lettered %d; want 2 and 0", n, dead)
	}
	if n, _ := svc.ChargeAbandoned("again"); n != 0 {
		t.Fatalf("charged %d twice", n)
	}
	for _, id := range []string{"a", "b"} {
		st, err := svc.Status(id)
		if err != nil || st.Attempts != 1 || st.LastError != "worker w1 lost" || st.Status != Persisted {
			t.Fatalf("%s after one lost worker: %+v %v", id, st, err)
		}
	}
	// The second loss spends the last attempt: dead-lettered, not emitted again.
	cutOff("a", "b")
	if n, dead := svc.ChargeAbandoned("worker w2 lost"); n != 2 || dead != 2 {
		t.Fatalf("charged %d, dead-lettered %d; want 2 and 2", n, dead)
	}
	for _, id := range []string{"a", "b"} {
		if st := waitStatus(t, svc, id, FailedFinal); st.Attempts != 2 || st.LastError != "worker w2 lost" {
			t.Fatalf("%s after two lost workers: %+v", id, st)
		}
	}
	// A cut-off released (a stop) costs nothing: c is processed later in one
	// attempt, the one that completed.
	post("c")
	cutOff("c")
	if n := svc.ReleaseAbandoned("stopped"); n != 1 {
		t.Fatalf("released %d, want 1", n)
	}
	rt, cancel := run(&ackBolt{})
	defer func() { cancel(); <-rt.Done() }()
	if st := waitStatus(t, svc, "c", Processed); st.Attempts != 1 {
		t.Fatalf("c processed after a released cut-off with %d attempts, want 1", st.Attempts)
	}
}

// waitStatus waits until event id's status is want (the status document has no
// watch: it is polled briefly).
func waitStatus(t *testing.T, svc *Service, id string, want Status) EventStatus {
	t.Helper()
	var st EventStatus
	waitfor.Until(t, 10*time.Second, func() error {
		var err error
		if st, err = svc.Status(id); err != nil || st.Status != want {
			return fmt.Errorf("%s: %+v %v, want %v", id, st, err, want)
		}
		return nil
	})
	return st
}
