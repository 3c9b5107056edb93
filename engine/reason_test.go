package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// reasonSpout is a listSpout that records FailReason calls.
type reasonSpout struct {
	listSpout
	mu      sync.Mutex
	reasons map[any]string
}

func (s *reasonSpout) FailReason(id any, reason string) {
	s.mu.Lock()
	s.reasons[id] = reason
	s.mu.Unlock()
	s.listSpout.Fail(id)
}

func (s *reasonSpout) get(id any) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reasons[id]
	return r, ok
}

// The reason a bolt gives reaches a ReasonedSpout: from FailWith two tuples down the
// tree, from a BasicBolt's error, and "message timeout" when nobody acks.
func TestFailReasonReachesSpout(t *testing.T) {
	rec := newRecorder()
	sp := &reasonSpout{listSpout: listSpout{rec: rec, n: 3}, reasons: map[any]string{}}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return sp }, 1).Output("id")
	b.SetBolt("pass", passOn, 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("judge", bolt(func(bl *fnBolt, t *tuple.Tuple) {
		switch t.Value(0).(int) {
		case 0:
			_ = bl.out.FailWith(t, fmt.Errorf("row 0: %w", errors.New("bad quantity")))
		case 1:
			_ = bl.out.Fail(t)
		case 2: // never acked: times out
		}
	}), 1).ShuffleGrouping("pass")
	cfg := quietConfig()
	cfg.MessageTimeout = 300 * time.Millisecond
	f := startFake(t, mustBuild(t, b), cfg) // the timeout passes when the test says
	rec.waitFor(t, "2 fails", func(_, fails int) bool { return fails == 2 })
	for range rotationsPerTimeout + 1 {
		f.rotate()
	}
	if _, fails := rec.counts(); fails != 3 {
		t.Fatalf("%d fails after 1.25 timeouts, want 3", fails)
	}
	for id, want := range map[int]string{0: "row 0: bad quantity", 1: "", 2: "message timeout: tree not complete after 300ms"} {
		got, ok := sp.get(id)
		if !ok || got != want {
			t.Errorf("FailReason(%d) = %q (called %v), want %q", id, got, ok, want)
		}
	}
}

// basicFn is a BasicBolt made of its Execute.
type basicFn func(*tuple.Tuple, topology.BasicCollector) error

func (basicFn) Prepare(context.Context, topology.TaskContext) error { return nil }
func (f basicFn) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	return f(t, out)
}
func (basicFn) Cleanup() error { return nil }

func TestBasicBoltErrorIsTheReason(t *testing.T) {
	rec := newRecorder()
	sp := &reasonSpout{listSpout: listSpout{rec: rec, n: 1}, reasons: map[any]string{}}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return sp }, 1).Output("id")
	b.SetBasicBolt("check", func() topology.BasicBolt {
		return basicFn(func(*tuple.Tuple, topology.BasicCollector) error {
			return errors.New("customer unknown")
		})
	}, 1).ShuffleGrouping("s")
	start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "1 fail", func(_, fails int) bool { return fails == 1 })
	if got, _ := sp.get(0); !strings.Contains(got, `bolt "check": customer unknown`) {
		t.Fatalf("reason = %q", got)
	}
}
