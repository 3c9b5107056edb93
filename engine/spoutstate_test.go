package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/gale-stream/gale/acker"
)

// TestSpoutStateDataDriven replays the scripts in testdata/spoutstate/, whole
// interactions of a spout task with its timeouts and max spout pending:
//
//	new timeout=D [max-pending=N] [timeouts=false] [t=T]   (default: timeout=4s at t=0)
//	emit root=R [msg=M] t=T        ack root=R t=T       fail root=R [reason=X] t=T
//	reset root=R t=T               (the acker's Restarted outcome)
//	tick t=T                       ticks from=T to=T every=D   (a tick at each step)
//	full   pending   buckets   counters   abandon   interrupt
//
// Times (T, D) are durations from the epoch, as time.ParseDuration reads them; the
// output prints them so too.
func TestSpoutStateDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/spoutstate", func(t *testing.T, path string) {
		var s *spoutState
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			str := func(key, def string) string {
				if a, ok := d.Arg(key); ok {
					return a.Vals[0]
				}
				return def
			}
			dur := func(key, def string) int64 {
				v, err := time.ParseDuration(str(key, def))
				if err != nil {
					d.Fatalf(t, "%s: bad %s: %v", d.Cmd, key, err)
				}
				return int64(v)
			}
			root := func() uint64 {
				v, err := strconv.ParseUint(str("root", ""), 0, 64)
				if err != nil {
					d.Fatalf(t, "%s: bad root: %v", d.Cmd, err)
				}
				return v
			}
			if d.Cmd == "new" {
				mp, err := strconv.Atoi(str("max-pending", "0"))
				if err != nil {
					d.Fatalf(t, "bad max-pending: %v", err)
				}
				cfg := spoutConfig{MessageTimeout: time.Duration(dur("timeout", "4s")), MaxPending: mp,
					Timeouts: str("timeouts", "true") == "true"}
				s = newSpoutState(cfg, dur("t", "0"))
				return "next=" + fmtDeadline(s.NextDeadline())
			}
			if s == nil {
				s = newSpoutState(spoutConfig{MessageTimeout: 4 * time.Second, Timeouts: true}, 0)
			}
			outcome := func(r acker.Result) string {
				ev, ok := s.Outcome(dur("t", ""), acker.Outcome{Root: root(), Result: r, Reason: str("reason", "")})
				return fmt.Sprintf("%s deliver=%v pending=%d", fmtSpoutEvent(ev), ok, s.Pending())
			}
			switch d.Cmd {
			case "emit":
				r := root()
				s.Emit(dur("t", ""), r, str("msg", fmt.Sprintf("m%d", r)))
				return fmt.Sprintf("pending=%d full=%v", s.Pending(), s.Full())
			case "ack":
				return outcome(acker.Completed)
			case "fail":
				return outcome(acker.Failed)
			case "reset":
				return outcome(acker.Restarted)
			case "tick":
				return fmtTick(s, s.Tick(dur("t", "")), "")
			case "ticks":
				var b strings.Builder
				from, to, every := dur("from", ""), dur("to", ""), dur("every", "")
				for now := from; now <= to; now += every {
					if evs := s.Tick(now); len(evs) > 0 {
						b.WriteString(fmtTick(s, evs, "at "+time.Duration(now).String()+": "))
					}
				}
				fmt.Fprintf(&b, "next=%s pending=%d", fmtDeadline(s.NextDeadline()), s.Pending())
				return b.String()
			case "full":
				return fmt.Sprintf("%v pending=%d", s.Full(), s.Pending())
			case "pending":
				return strconv.Itoa(s.Pending())
			case "buckets":
				var b strings.Builder
				for i, bk := range s.buckets {
					roots := make([]uint64, 0, len(bk))
					for r := range bk {
						roots = append(roots, r)
					}
					slices.Sort(roots)
					fmt.Fprintf(&b, "%d:%v ", i, roots)
				}
				return strings.TrimSpace(b.String())
			case "counters":
				c := s.Counters()
				return fmt.Sprintf("acked=%d failed=%d timed-out=%d late=%d abandoned=%d restarts=%d pending=%d",
					c.Acked, c.Failed, c.TimedOut, c.Late, c.Abandoned, c.Restarts, s.Pending())
			case "abandon":
				n := s.Abandon()
				return fmt.Sprintf("abandoned=%d pending=%d", n, s.Pending())
			case "interrupt":
				s.Interrupt()
				return "ok"
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func fmtDeadline(t int64) string {
	if t == math.MaxInt64 {
		return "never"
	}
	return time.Duration(t).String()
}

func fmtSpoutEvent(ev spoutEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s root=%d", ev.Kind, ev.Root)
	if ev.Kind == spoutLate || ev.Kind == 0 {
		fmt.Fprintf(&b, " result=%s", ev.Result)
		return b.String()
	}
	fmt.Fprintf(&b, " msg=%v start=%s", ev.MsgID, time.Duration(ev.Start))
	if ev.Kind == spoutAcked {
		fmt.Fprintf(&b, " latency=%s", time.Duration(ev.Latency))
	}
	if ev.Kind == spoutFailed || ev.Kind == spoutTimedOut {
		fmt.Fprintf(&b, " reason=%q", ev.Reason)
	}
	return b.String()
}

func fmtTick(s *spoutState, evs []spoutEvent, prefix string) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(prefix + fmtSpoutEvent(ev) + "\n")
	}
	if prefix != "" {
		return b.String()
	}
	if len(evs) == 0 {
		b.WriteString("- ")
	}
	fmt.Fprintf(&b, "next=%s pending=%d", fmtDeadline(s.NextDeadline()), s.Pending())
	return b.String()
}

// TestSpoutStateMatchesModel drives spoutState with random interactions, as a run loop
// would (a tick at irregular times, stalls included; emits; outcomes), against a model
// written another way: rotation k happens at the first tick at or after the time
// rotation k-1 happened plus the interval, and a tree put (emitted or reset) after
// rotation k times out at rotation k+spoutBuckets. It also checks the bound the docs
// promise: a tree never times out before MessageTimeout after its last put, and,
// where the ticks are at most g apart, no later than 1.25 timeouts plus the delays
// the ticks add to the rotations (at most g each).
func TestSpoutStateMatchesModel(t *testing.T) {
	const timeout = 4 * time.Second
	every := int64(timeout / rotationsPerTimeout)
	r := rand.New(rand.NewPCG(11, 5))
	for trial := range 200 {
		maxGap := int64(1 + r.IntN(int(2*every))) // some trials stall for two intervals
		if trial%4 == 0 {
			maxGap = 1 + every/50 // frequent ticks: a tight upper bound
		}
		s := newSpoutState(spoutConfig{MessageTimeout: timeout, MaxPending: 1 + r.IntN(20), Timeouts: true}, 0)
		type tree struct {
			put      int64 // time of the emit or last reset
			putAfter int   // rotations done before that put
			emitted  int64
		}
		live := map[uint64]*tree{}
		rotations, lastRotation, nextRoot := 0, int64(0), uint64(1)
		now := int64(0)
		for range 400 {
			now += r.Int64N(maxGap + 1)
			// The run loop: outcomes, then the rotation, then emits while not full.
			for root, tr := range live {
				if r.IntN(30) != 0 {
					continue
				}
				res := []acker.Result{acker.Completed, acker.Failed, acker.Restarted}[r.IntN(3)]
				ev, ok := s.Outcome(now, acker.Outcome{Root: root, Result: res})
				switch res {
				case acker.Restarted:
					tr.put, tr.putAfter = now, rotations
					if ok || ev.Kind != spoutRestarted || ev.Start != tr.emitted {
						t.Fatalf("trial %d: reset of %d: %+v %v", trial, root, ev, ok)
					}
				case acker.Completed:
					delete(live, root)
					if !ok || ev.Kind != spoutAcked || ev.Latency != now-tr.emitted {
						t.Fatalf("trial %d: ack of %d: %+v %v", trial, root, ev, ok)
					}
				case acker.Failed:
					delete(live, root)
					if !ok || ev.Kind != spoutFailed {
						t.Fatalf("trial %d: fail of %d: %+v %v", trial, root, ev, ok)
					}
				}
			}
			evs := s.Tick(now)
			if now >= lastRotation+every { // lastRotation 0: the start
				rotations, lastRotation = rotations+1, now
			}
			var want []uint64
			for root, tr := range live {
				if tr.putAfter+spoutBuckets == rotations {
					want = append(want, root)
					age := now - tr.put
					if age < int64(timeout) {
						t.Fatalf("trial %d: tree %d timed out %v after its put, before the timeout", trial, root, time.Duration(age))
					}
					if bound := int64(timeout) + every + spoutBuckets*maxGap; age > bound {
						t.Fatalf("trial %d: tree %d timed out %v after its put, past %v", trial, root, time.Duration(age), time.Duration(bound))
					}
					delete(live, root)
				}
			}
			got := make([]uint64, len(evs))
			for i, ev := range evs {
				got[i] = ev.Root
				if ev.Kind != spoutTimedOut {
					t.Fatalf("trial %d: tick event %+v", trial, ev)
				}
			}
			slices.Sort(want) // roots are drawn in increasing order: emit order
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d at %v (rotation %d): timed out %v, want %v", trial, time.Duration(now), rotations, got, want)
			}
			for i := 0; i < 3 && !s.Full(); i++ {
				root := nextRoot
				nextRoot++
				s.Emit(now, root, root)
				live[root] = &tree{put: now, putAfter: rotations, emitted: now}
			}
			if s.Pending() != len(live) {
				t.Fatalf("trial %d: Pending %d, model %d", trial, s.Pending(), len(live))
			}
			if wantNext := lastRotation + every; s.NextDeadline() != wantNext {
				t.Fatalf("trial %d: NextDeadline %v, want %v", trial, time.Duration(s.NextDeadline()), time.Duration(wantNext))
			}
		}
		c := s.Counters()
		if int(c.Acked+c.Failed+c.TimedOut)+s.Pending() != int(nextRoot-1) {
			t.Fatalf("trial %d: counters %+v and %d pending do not add up to %d emits", trial, c, s.Pending(), nextRoot-1)
		}
	}
}
