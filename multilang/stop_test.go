package multilang_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// pidLog records every program started, never blocking OnStart.
type pidLog struct {
	mu   sync.Mutex
	pids []int
}

func (l *pidLog) add(_ topology.TaskContext, pid int) {
	l.mu.Lock()
	l.pids = append(l.pids, pid)
	l.mu.Unlock()
}

func (l *pidLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.pids...)
}

// An input that kills every program it is sent to, during the stop: each program
// restarted after the first dies on the re-send. The stop still ends, at its
// deadline (its context ended) or at a hard stop (Start's context ended), the
// inputs abandoned (neither acked nor failed), the restarts paced by the pause and
// ended by Cleanup or the hard stop, and no program outlives the run.
func TestBoltProgramsDyingThroughoutTheStop(t *testing.T) {
	need(t, "python3")
	const n = 5
	for _, hard := range []bool{false, true} {
		t.Run(map[bool]string{false: "deadline", true: "hard"}[hard], func(t *testing.T) {
			cfg, lb := config(t)
			var pids pidLog
			var inner topology.Bolt
			wrapped := &drainSeen{drained: make(chan struct{})}
			spout := &numSpout{n: n, done: make(chan struct{})}
			b := topology.NewBuilder()
			b.SetSpout("nums", func() topology.Spout { return spout }, 1).Output("n")
			shell := multilang.ShellBolt([]string{"python3", "stopdie.py"}, "testdata",
				multilang.Env("GALE_MODE=poison", "GALE_MARKER="+filepath.Join(t.TempDir(), "m")),
				multilang.StopGrace(200*time.Millisecond), multilang.OnStart(pids.add))
			b.SetBolt("hold", func() topology.Bolt {
				inner = shell()
				wrapped.Bolt = inner
				return wrapped
			}, 1).ShuffleGrouping("nums")
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			startCtx, cancelStart := context.WithCancel(context.Background())
			defer cancelStart()
			rt, err := engine.Start(startCtx, topo, cfg, engine.WithSerialization())
			if err != nil {
				t.Fatal(err)
			}
			held := inner.(interface{ Held() int })
			restarts := inner.(interface{ Restarts() int64 })
			waitfor.True(t, time.Minute, "every input held by the first program", func() bool { return held.Held() == n })
			// The stop's end (its context's, as at its deadline, or Start's) comes
			// once the programs started during it have died on the inputs.
			stopCtx, endStop := context.WithCancel(context.Background())
			defer endStop()
			stopped := make(chan error, 1)
			go func() { stopped <- rt.Stop(stopCtx) }()
			wait(t, wrapped.drained, "the stop to reach the bolt")
			if err := syscall.Kill(pids.get()[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitfor.True(t, time.Minute, "two poisoned programs to die", func() bool { return restarts.Restarts() >= 3 })
			if hard {
				cancelStart()
			} else {
				endStop()
			}
			select {
			case err = <-stopped:
			case <-time.After(2 * time.Minute):
				t.Fatal("Stop did not return")
			}
			if !errors.Is(err, engine.ErrShutdownTimeout) || !strings.Contains(err.Error(), "5 trees") {
				t.Errorf("Stop: %v, want %v for 5 trees", err, engine.ErrShutdownTimeout)
			}
			select {
			case <-rt.Done():
			case <-time.After(2 * time.Minute):
				t.Fatal("the runtime did not end")
			}
			c := rt.Stats().Components["nums"]
			if c.Acked != 0 || c.Failed != 0 || c.Abandoned != n {
				t.Errorf("spout acked %d, failed %d, abandoned %d; want 0, 0 and %d", c.Acked, c.Failed, c.Abandoned, n)
			}
			r := restarts.Restarts()
			if !strings.Contains(lb.String(), "poisoned by 1") {
				t.Errorf("no program logged its poisoning")
			}
			for _, pid := range pids.get() {
				if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
					t.Errorf("pid %d still exists after the run (%v)", pid, err)
				}
			}
			if got := int64(len(pids.get())); got != r && got != r+1 {
				t.Errorf("%d programs started for %d restarts", got, r)
			}
		})
	}
}

// bigSpout emits n tuples of one large string each, and tells when its stop began
// (Deactivate).
type bigSpout struct {
	topology.BaseSpout
	n, next     int
	size        int
	deactivated chan struct{}
}

func (s *bigSpout) NextTuple() {
	if s.next < s.n {
		_ = s.Out.Emit(tuple.Values{strings.Repeat("x", s.size)}, s.next)
		s.next++
	}
}

func (s *bigSpout) Activate()   {}
func (s *bigSpout) Deactivate() { close(s.deactivated) }

// execProbe counts the Execute calls entered.
type execProbe struct {
	drainSeen
	entered atomic.Int64
}

func (p *execProbe) Execute(t *tuple.Tuple) {
	p.entered.Add(1)
	p.Bolt.Execute(t)
}

// A stop that finds the bolt's task inside Execute, waiting on a program that does
// not read (its pipe full), cannot call Drain. A program that ends then ends
// during the stop all the same: it charges nothing.
func TestBoltEndingDuringTheStopBeforeAnyDrain(t *testing.T) {
	need(t, "python3")
	const n = 4
	cfg, lb := config(t)
	var pids pidLog
	var inner topology.Bolt
	probe := &execProbe{drainSeen: drainSeen{drained: make(chan struct{})}}
	// One message is more than the pipe and the program's read buffer hold.
	spout := &bigSpout{n: n, size: 256 << 10, deactivated: make(chan struct{})}
	b := topology.NewBuilder()
	b.SetSpout("big", func() topology.Spout { return spout }, 1).Output("s")
	shell := multilang.ShellBolt([]string{"python3", "stopdie.py"}, "testdata",
		multilang.Env("GALE_MODE=deaf", "GALE_MARKER="+filepath.Join(t.TempDir(), "m")),
		multilang.OnStart(pids.add))
	b.SetBolt("deaf", func() topology.Bolt {
		inner = shell()
		probe.Bolt = inner
		return probe
	}, 1).ShuffleGrouping("big")
	rt := run(t, b, cfg)
	held := inner.(interface{ Held() int })
	// The writer is stuck sending the first input; Execute of the second waits on it.
	waitfor.True(t, time.Minute, "Execute to wait on the deaf program", func() bool {
		return held.Held() == 1 && probe.entered.Load() == 2
	})
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped <- rt.Stop(ctx)
	}()
	wait(t, spout.deactivated, "the stop to begin")
	select {
	case <-probe.drained:
		t.Fatal("Drain was called: the scenario is a task stuck in Execute")
	default:
	}
	if err := syscall.Kill(pids.get()[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Stop did not return")
	}
	<-rt.Done()
	c := rt.Stats().Components["big"]
	if c.Acked != n || c.Failed != 0 {
		t.Errorf("spout acked %d, failed %d; want %d and 0", c.Acked, c.Failed, n)
	}
	if want := "ended during the stop: restarted"; !strings.Contains(lb.String(), want) {
		t.Errorf("the log does not say %q", want)
	}
}

// heldSink hands its inputs to the test, which acks them.
type heldSink struct {
	topology.BaseBolt
	in chan *tuple.Tuple
}

func (s *heldSink) Execute(t *tuple.Tuple) { s.in <- t }

// A spout program that dies at its activate is restarted and activated before its
// first next; one that dies at (or never answers) its deactivate does not hold the
// stop up past the timeout, and charges nothing: the trees in flight are acked, and
// the program started for their acks is neither activated nor asked for a next.
func TestSpoutProgramDyingAtActivateOrDeactivate(t *testing.T) {
	need(t, "python3")
	const n = 3
	for _, mode := range []string{"activate", "deactivate", "deaf"} {
		t.Run(mode, func(t *testing.T) {
			cfg, lb := config(t)
			var inner topology.Spout
			shell := multilang.ShellSpout([]string{"python3", "actspout.py"}, "testdata",
				multilang.Env("GALE_BAD="+mode, "GALE_MARKER="+filepath.Join(t.TempDir(), "m"), "GALE_N=3"),
				multilang.Timeout(time.Second))
			sink := &heldSink{in: make(chan *tuple.Tuple, n)}
			b := topology.NewBuilder()
			b.SetSpout("nums", func() topology.Spout { inner = shell(); return inner }, 1).Output("n")
			b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("nums")
			rt := run(t, b, cfg)
			var ins []*tuple.Tuple
			for range n {
				select {
				case in := <-sink.in:
					ins = append(ins, in)
				case <-time.After(2 * time.Minute):
					t.Fatal("the inputs did not come")
				}
			}
			stopped := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				stopped <- rt.Stop(ctx)
			}()
			restarts := inner.(interface{ Restarts() int64 })
			if mode != "activate" {
				// The trees stay in flight until the deactivate has killed the program.
				waitfor.True(t, time.Minute, "the program killed at its deactivate", func() bool { return restarts.Restarts() == 1 })
			}
			for _, in := range ins {
				_ = sink.Out.Ack(in)
			}
			select {
			case err := <-stopped:
				if err != nil {
					t.Errorf("Stop: %v", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("Stop did not return")
			}
			<-rt.Done()
			c := rt.Stats().Components["nums"]
			if c.Acked != n || c.Failed != 0 || c.Abandoned != 0 {
				t.Errorf("spout acked %d, failed %d, abandoned %d; want %d, 0, 0", c.Acked, c.Failed, c.Abandoned, n)
			}
			log := lb.String()
			if r := restarts.Restarts(); r != 1 {
				t.Errorf("%d restarts, want 1", r)
			}
			if strings.Contains(log, "next while not active") {
				t.Errorf("a program was asked for a next while not active")
			}
			wantActive, wantInactive := 1, 0 // the second program, or the first
			if mode == "activate" {
				wantInactive = 1
			}
			if a, i := strings.Count(log, "state active"), strings.Count(log, "state inactive"); a != wantActive || i != wantInactive {
				t.Errorf("activated %d, deactivated %d times; want %d and %d", a, i, wantActive, wantInactive)
			}
			if mode != "activate" && strings.Count(log, "acked ") != n {
				t.Errorf("the program started for the acks logged %d of them, want %d", strings.Count(log, "acked "), n)
			}
		})
	}
}
