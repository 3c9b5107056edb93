package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// activatingSpout emits n tracked tuples and records its calls, a run of NextTuple
// calls as one "next".
type activatingSpout struct {
	n, next int
	out     topology.SpoutCollector
	mu      *sync.Mutex
	calls   *[]string
}

func (s *activatingSpout) record(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == "next" && len(*s.calls) > 0 && (*s.calls)[len(*s.calls)-1] == "next" {
		return
	}
	*s.calls = append(*s.calls, c)
}

func (s *activatingSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	s.record("open")
	return nil
}

func (s *activatingSpout) NextTuple() {
	s.record("next")
	if s.next < s.n {
		_ = s.out.Emit(tuple.Values{s.next}, s.next)
		s.next++
	}
}

func (s *activatingSpout) Ack(any)      { s.record("ack") }
func (s *activatingSpout) Fail(any)     { s.record("fail") }
func (s *activatingSpout) Activate()    { s.record("activate") }
func (s *activatingSpout) Deactivate()  { s.record("deactivate") }
func (s *activatingSpout) Close() error { s.record("close"); return nil }

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func (l *callLog) spout(n int) func() topology.Spout {
	return func() topology.Spout { return &activatingSpout{n: n, mu: &l.mu, calls: &l.calls} }
}

// Activate comes after Open and before the first NextTuple; Deactivate once when the
// stop begins, after the last NextTuple, while the trees in flight still drain: their
// acks follow it, then Close.
func TestActivateAndDeactivateFrameTheRun(t *testing.T) {
	var log callLog
	held := make(chan *tuple.Tuple, 3)
	outs := make(chan topology.OutputCollector, 3)
	b := topology.NewBuilder()
	b.SetSpout("s", log.spout(3), 1).Output("id")
	b.SetBolt("h", holdBolt(held, outs), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 1
	rt := start(t, mustBuild(t, b), cfg)
	var ins []*tuple.Tuple
	var out topology.OutputCollector
	for range 3 {
		out = <-outs
		ins = append(ins, <-held)
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- rt.Stop(ctx)
	}()
	waitfor.True(t, 20*time.Second, "Deactivate", func() bool { return slices.Contains(log.get(), "deactivate") })
	for _, in := range ins {
		_ = out.Ack(in)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	<-rt.Done()
	if got, want := strings.Join(log.get(), " "), "open activate next deactivate ack ack ack close"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
}

// A hard stop (Start's context ended) abandons the trees: no Deactivate, which a
// shell spout would have to wait on its program for.
func TestNoDeactivateOnAHardStop(t *testing.T) {
	var log callLog
	held := make(chan *tuple.Tuple, 3)
	b := topology.NewBuilder()
	b.SetSpout("s", log.spout(3), 1).Output("id")
	b.SetBolt("h", holdBolt(held, nil), 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := Start(ctx, mustBuild(t, b), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-held
	}
	cancel()
	<-rt.Done()
	if got, want := strings.Join(log.get(), " "), "open activate next close"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
}
