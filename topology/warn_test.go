package topology_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/clock"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// The example of docs/topologies.md (example_test.go) with each of the two faults issue 25 §3
// found silent, run on a fake clock with the engine's log captured: each must be
// reported at WARN, naming the component and what went wrong.

// splitTwo is the example's Split emitting two values where one field ("word") is
// declared: every emit is refused, Execute returns the error, and the line's tree
// fails and is replayed at once, for ever.
type splitTwo struct{ topology.BaseBasicBolt }

func (*splitTwo) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	for _, w := range strings.Fields(t.StringByField("line")) {
		if err := out.Emit(tuple.Values{w, 1}); err != nil {
			return err
		}
	}
	return nil
}

// countNoAck is the example's Count without c.Out.Ack(t): every tree waits out the
// message timeout and is replayed, for ever.
type countNoAck struct{ Count }

func (c *countNoAck) Execute(t *tuple.Tuple) {
	c.mu.Lock()
	c.counts[t.StringByField("word")]++
	c.mu.Unlock()
}

// logLines captures a JSON slog handler's lines; safe for the engine's concurrent
// writes.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find returns the lines whose attributes include every one of match (compared as
// printed), in order.
func (l *logLines) find(t *testing.T, match map[string]string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	text := l.buf.String()
	l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		ok := true
		for k, v := range match {
			if got, has := m[k]; !has || fmt.Sprint(got) != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// wait returns the first line matching, waiting for it (a generous bound turns a
// line never logged into a failure).
func (l *logLines) wait(t *testing.T, match map[string]string) map[string]any {
	t.Helper()
	var line map[string]any
	waitfor.Until(t, 20*time.Second, func() error {
		if ls := l.find(t, match); len(ls) > 0 {
			line = ls[0]
			return nil
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return fmt.Errorf("no log line with %v; the log:\n%s", match, l.buf.String())
	})
	return line
}

// runFault starts the example's topology with split and count in place of its own,
// on a fake clock, logging to a buffer; with lineage when lin. At the test's end the
// engine is stopped hard (a fake clock nobody advances never reaches a graceful
// stop's deadline): call the returned stop to do it earlier.
func runFault(t *testing.T, lines []string, split func() topology.BasicBolt, count func(*sync.Mutex, map[string]int) topology.Bolt, lin bool) (*engine.Runtime, *clock.Fake, *logLines, func()) {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return &LineSpout{lines: lines, done: make(chan struct{})} }, 1).
		Output("line")
	b.SetBasicBolt("split", split, 2).ShuffleGrouping("lines").Output("word")
	b.SetBolt("count", func() topology.Bolt { return count(&mu, counts) }, 2).FieldsGrouping("split", "word")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	fake := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := []engine.Option{engine.WithClock(fake)}
	if lin {
		rec, err := lineage.New(lineage.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, engine.WithLineage(rec))
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := engine.Start(ctx, topo, cfg, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stop := func() {
		cancel()
		select {
		case <-rt.Done():
		case <-time.After(10 * time.Second):
			t.Error("tasks still running after a hard stop")
		}
	}
	t.Cleanup(stop)
	return rt, fake, logs, stop
}

func exampleSplit() topology.BasicBolt { return &Split{} }
func exampleCount(mu *sync.Mutex, counts map[string]int) topology.Bolt {
	return &Count{mu: mu, counts: counts}
}

// Split emits two values where one field is declared: the refused emit and the
// error Split returns with it are logged once each (the fake clock stands still, so
// the 10 s never pass), with the error in full and the component; the trees failing
// at thousands a second are logged with their reason; at the stop, the number of
// refused emits and errors not logged since is.
func TestWarnSplitEmitsTwoValues(t *testing.T) {
	const refused = `gale: values do not match declared fields: stream "default" of "split" declares 1 fields [word], emit has 2 values`
	for _, lin := range []bool{false, true} {
		t.Run(fmt.Sprintf("lineage=%v", lin), func(t *testing.T) {
			_, _, logs, stop := runFault(t, []string{"the cat sat", "on the mat", "the end"},
				func() topology.BasicBolt { return &splitTwo{} }, exampleCount, lin)
			logs.wait(t, map[string]string{"level": "WARN", "msg": "emit refused", "component": "split",
				"kind": "refused-emit", "err": refused})
			logs.wait(t, map[string]string{"level": "WARN", "msg": "bolt returned an error: its input is failed",
				"component": "split", "kind": "bolt-error", "err": refused})
			trees := logs.wait(t, map[string]string{"level": "WARN", "component": "lines", "kind": "trees-failing"})
			if r := fmt.Sprint(trees["reasons"]); !strings.Contains(r, `bolt "split": `+refused) {
				t.Errorf("trees line's reasons %q lack the bolt's error", r)
			}
			if lin {
				if f := fmt.Sprint(trees["failed_by"]); !strings.HasPrefix(f, "split (") {
					t.Errorf("trees line's failed_by %q, want split", f)
				}
			} else if l := fmt.Sprint(trees["lineage"]); !strings.Contains(l, "engine.WithLineage") {
				t.Errorf("trees line's lineage %q does not say how to turn it on", l)
			}
			stop()
			for _, kind := range []string{"refused-emit", "bolt-error"} {
				lines := logs.find(t, map[string]string{"component": "split", "kind": kind})
				if len(lines) != 2 {
					t.Fatalf("%d lines of kind %s, want the first and one at the stop: %v", len(lines), kind, lines)
				}
				if n, _ := lines[1]["more_since_last_warning"].(float64); n < 1 || lines[1]["err"] != nil {
					t.Errorf("the stop's line %v, want the count of %s not logged since the first", lines[1], kind)
				}
			}
		})
	}
}

// Count does not ack: the trees wait out the message timeout (30 s of fake time)
// and time out together, which is logged with the reason and, with lineage on, the
// component holding them (count), or, with it off, how to turn it on. The example's
// three lines would time out at 3 per 37.5 s, below the 10 per second warned about:
// the input here is 200 lines.
func TestWarnCountDoesNotAck(t *testing.T) {
	lines := make([]string, 200)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d of the cat on the mat", i)
	}
	for _, lin := range []bool{false, true} {
		t.Run(fmt.Sprintf("lineage=%v", lin), func(t *testing.T) {
			rt, fake, logs, _ := runFault(t, lines, exampleSplit,
				func(mu *sync.Mutex, counts map[string]int) topology.Bolt {
					return &countNoAck{Count{mu: mu, counts: counts}}
				}, lin)
			// Every line's words reach count (and are held there), then the clock
			// moves a rotation (a quarter timeout) at a time until they time out.
			waitExecuted(t, rt, "count", 200*8)
			advanceUntilTimedOut(t, rt, fake, "lines", 200)
			trees := logs.wait(t, map[string]string{"level": "WARN", "component": "lines", "kind": "trees-failing"})
			if r := fmt.Sprint(trees["reasons"]); !strings.Contains(r, "message timeout: tree not complete after 30s (200)") {
				t.Errorf("trees line's reasons %q, want the 200 timeouts", r)
			}
			checkHeldByCount(t, trees, lin)
		})
	}
}

// The example's own three lines with Count not acking: they time out far below the
// rate warned about, but each is replayed and times out again, which is warned about
// whatever the rate, naming the component holding them (lineage on) or how to see it.
func TestWarnReplayTimesOutAgain(t *testing.T) {
	for _, lin := range []bool{false, true} {
		t.Run(fmt.Sprintf("lineage=%v", lin), func(t *testing.T) {
			rt, fake, logs, _ := runFault(t, []string{"the cat sat", "on the mat", "the end"}, exampleSplit,
				func(mu *sync.Mutex, counts map[string]int) topology.Bolt {
					return &countNoAck{Count{mu: mu, counts: counts}}
				}, lin)
			// Two rounds: the three trees time out, are replayed, and time out again.
			for round := uint64(1); round <= 2; round++ {
				waitExecuted(t, rt, "count", 8*round)
				advanceUntilTimedOut(t, rt, fake, "lines", 3*round)
				if round == 1 && !lin {
					// Three timeouts, none a replay's: below the rate, nothing to say
					// yet (without lineage the check runs as the spout counts them).
					if ls := logs.find(t, map[string]string{"component": "lines"}); len(ls) > 0 {
						t.Errorf("a warning after three first timeouts: %v", ls)
					}
				}
			}
			trees := logs.wait(t, map[string]string{"level": "WARN", "component": "lines", "kind": "trees-failing",
				"msg": "replayed trees timing out again: their messages never complete"})
			if n, _ := trees["timed_out_again"].(float64); n < 1 {
				t.Errorf("trees line %v lacks timed_out_again", trees)
			}
			if r := fmt.Sprint(trees["reasons"]); !strings.Contains(r, "message timeout: tree not complete after 30s") {
				t.Errorf("trees line's reasons %q, want the timeouts", r)
			}
			checkHeldByCount(t, trees, lin)
		})
	}
}

// idSpout emits n tuples whose message ids mk makes, replaying a failed one with
// the same id.
type idSpout struct {
	topology.BaseSpout
	mk      func(i int) any
	n, next int
}

func (s *idSpout) NextTuple() {
	if s.next < s.n {
		_ = s.Out.Emit(tuple.Values{fmt.Sprint(s.next)}, s.mk(s.next))
		s.next++
	}
}
func (s *idSpout) Fail(msgID any) { _ = s.Out.Emit(tuple.Values{"again"}, msgID) }

// holdBolt never acks.
type holdBolt struct{ topology.BaseBolt }

func (*holdBolt) Execute(*tuple.Tuple) {}

// A replay that times out again is warned about whatever its message id: one that
// cannot be a map key (a slice, a map, a struct holding a slice) is known by its
// printed value (the break-it pass found these silent).
func TestWarnReplayTimesOutAgainAnyID(t *testing.T) {
	for name, mk := range map[string]func(int) any{
		"slice":  func(i int) any { return []int{i} },
		"map":    func(i int) any { return map[string]int{"i": i} },
		"struct": func(i int) any { return struct{ s []int }{[]int{i}} },
	} {
		t.Run(name, func(t *testing.T) {
			b := topology.NewBuilder()
			b.SetSpout("s", func() topology.Spout { return &idSpout{mk: mk, n: 3} }, 1).Output("line")
			b.SetBolt("b", func() topology.Bolt { return &holdBolt{} }, 2).ShuffleGrouping("s")
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			logs := &logLines{}
			cfg := topology.DefaultConfig()
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			fake := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
			ctx, cancel := context.WithCancel(context.Background())
			rt, err := engine.Start(ctx, topo, cfg, engine.WithClock(fake))
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); <-rt.Done() })
			advanceUntilTimedOut(t, rt, fake, "s", 6)
			logs.wait(t, map[string]string{"level": "WARN", "component": "s",
				"msg": "replayed trees timing out again: their messages never complete"})
		})
	}
}

// waitExecuted waits until bolt comp has executed at least n tuples.
func waitExecuted(t *testing.T, rt *engine.Runtime, comp string, n uint64) {
	t.Helper()
	waitfor.Until(t, 20*time.Second, func() error {
		if got := rt.Stats().Components[comp].Executed; got < n {
			return fmt.Errorf("%s executed %d tuples, want %d", comp, got, n)
		}
		return nil
	})
}

// advanceUntilTimedOut moves the fake clock a rotation (a quarter timeout) at a time
// until n trees of spout comp have timed out: a timeout's worth of rotations each
// time it looks, each once the timers the last one fired are armed again (the
// engine has handled it).
func advanceUntilTimedOut(t *testing.T, rt *engine.Runtime, fake *clock.Fake, comp string, n uint64) {
	t.Helper()
	waitfor.Until(t, 20*time.Second, func() error {
		for range 4 {
			if rt.Stats().Components[comp].TimedOut >= n {
				return nil
			}
			armed := fake.Waiters()
			fake.Advance(rt.Config().MessageTimeout / 4)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := fake.BlockUntil(ctx, armed)
			cancel()
			if err != nil {
				return fmt.Errorf("%d timers armed again of the %d before a rotation: %w", fake.Waiters(), armed, err)
			}
		}
		return fmt.Errorf("%d trees of %s timed out after %v, want %d", rt.Stats().Components[comp].TimedOut, comp, fake.Since(rt.Started()), n)
	})
}

// checkHeldByCount checks a trees line names count as holding them (lineage on),
// or says how to turn lineage on.
func checkHeldByCount(t *testing.T, trees map[string]any, lin bool) {
	t.Helper()
	if lin {
		if h := fmt.Sprint(trees["held_by"]); !strings.HasPrefix(h, "count (") {
			t.Errorf("trees line's held_by %q, want count", h)
		}
	} else if l := fmt.Sprint(trees["lineage"]); !strings.Contains(l, "engine.WithLineage") {
		t.Errorf("trees line's lineage %q does not say how to turn it on", l)
	}
}
