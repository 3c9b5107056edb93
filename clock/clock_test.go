package clock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // synctest's bubble starts here too

// play runs a scenario: one step a line, each printing what it observed.
//
//	timer NAME D | ticker NAME D   create (D a time.ParseDuration string)
//	advance D                      move time forward
//	recv NAME                      non-blocking receive: the value's offset, or "none"
//	stop NAME | reset NAME D       print Stop's or Reset's result (none for a ticker's)
//
// advance is whatever moves c's time: Fake.Advance, or time.Sleep in a synctest bubble.
func play(t *testing.T, c Clock, advance func(time.Duration), script string) string {
	t.Helper()
	start := c.Now()
	timers := map[string]Timer{}
	tickers := map[string]Ticker{}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		f := strings.Fields(line)
		dur := func(i int) time.Duration {
			d, err := time.ParseDuration(f[i])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return d
		}
		res := ""
		switch f[0] {
		case "timer":
			timers[f[1]] = c.NewTimer(dur(2))
		case "ticker":
			tickers[f[1]] = c.NewTicker(dur(2))
		case "advance":
			advance(dur(1))
		case "recv":
			ch := func() <-chan time.Time {
				if tm, ok := timers[f[1]]; ok {
					return tm.C()
				}
				return tickers[f[1]].C()
			}()
			select {
			case v := <-ch:
				res = v.Sub(start).String()
			default:
				res = "none"
			}
		case "stop":
			if tm, ok := timers[f[1]]; ok {
				res = fmt.Sprint(tm.Stop())
			} else {
				tickers[f[1]].Stop()
			}
		case "reset":
			if tm, ok := timers[f[1]]; ok {
				res = fmt.Sprint(tm.Reset(dur(2)))
			} else {
				tickers[f[1]].Reset(dur(2))
			}
		default:
			t.Fatalf("bad step %q", line)
		}
		if res != "" {
			fmt.Fprintf(&out, "%s: %s\n", line, res)
		}
	}
	return out.String()
}

// scenarios hold the time package's behaviour, checked against both Real (in a
// synctest bubble, where time.Sleep moves a fake time) and Fake.
var scenarios = []struct{ name, script, want string }{
	{"fires at its deadline, not a nanosecond before", `
timer a 1s
advance 999999999ns
recv a
advance 1ns
recv a
recv a`, `
recv a: none
recv a: 1s
recv a: none`},
	{"stop before the deadline", `
timer a 1s
stop a
stop a
advance 2s
recv a`, `
stop a: true
stop a: false
recv a: none`},
	{"stop after the fire, value received", `
timer a 1s
advance 1s
recv a
stop a`, `
recv a: 1s
stop a: false`},
	{"stop after the fire, value not received: discarded", `
timer a 1s
advance 3s
stop a
recv a
stop a`, `
stop a: true
recv a: none
stop a: false`},
	{"reset an active timer moves its deadline", `
timer a 1s
advance 500ms
reset a 1s
advance 999ms
recv a
advance 1ms
recv a`, `
reset a 1s: true
recv a: none
recv a: 1.5s`},
	{"reset after the fire discards the stale value", `
timer a 1s
advance 2s
reset a 1s
recv a
advance 1s
recv a
reset a 1s`, `
reset a 1s: true
recv a: none
recv a: 3s
reset a 1s: false`},
	{"reset after a stop", `
timer a 1s
stop a
reset a 2s
advance 2s
recv a`, `
stop a: true
reset a 2s: false
recv a: 2s`},
	{"a timer of zero fires at once", `
timer a 0s
recv a
timer b -1s
stop b
recv b`, `
recv a: 0s
stop b: true
recv b: none`},
	{"timers due in one advance all fire, each with its deadline", `
timer late 3s
timer early 1s
advance 5s
recv early
recv late`, `
recv early: 1s
recv late: 3s`},
	{"a ticker drops the ticks of a slow receiver", `
ticker k 1s
advance 3500ms
recv k
recv k
advance 499ms
recv k
advance 1ms
recv k
recv k`, `
recv k: 1s
recv k: none
recv k: none
recv k: 4s
recv k: none`},
	{"a ticker's unreceived tick is discarded by Reset, and its phase restarts", `
ticker k 1s
advance 1s
reset k 2s
recv k
advance 1s
recv k
advance 1s
recv k`, `
recv k: none
recv k: none
recv k: 3s`},
	{"a stopped ticker sends nothing", `
ticker k 1s
advance 1s
stop k
recv k
advance 5s
recv k`, `
recv k: none
recv k: none`},
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios {
		want := strings.TrimPrefix(sc.want, "\n") + "\n"
		t.Run(sc.name, func(t *testing.T) {
			t.Run("fake", func(t *testing.T) {
				f := NewFake(epoch)
				if got := play(t, f, f.Advance, sc.script); got != want {
					t.Errorf("got\n%s\nwant\n%s", got, want)
				}
			})
			t.Run("real", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					if got := play(t, Real(), time.Sleep, sc.script); got != want { // time.Sleep moves the bubble's fake time
						t.Errorf("got\n%s\nwant\n%s", got, want)
					}
				})
			})
		})
	}
}

func TestFakeNowSince(t *testing.T) {
	f := NewFake(epoch)
	f.Advance(90 * time.Minute)
	if got := f.Now(); !got.Equal(epoch.Add(90 * time.Minute)) {
		t.Fatalf("Now = %v", got)
	}
	if got := f.Since(epoch.Add(time.Hour)); got != 30*time.Minute {
		t.Fatalf("Since = %v", got)
	}
	f.Advance(0)
	if got := f.Since(epoch); got != 90*time.Minute {
		t.Fatalf("Advance(0) moved time: Since = %v", got)
	}
}

// TestFakeDeadlineOrder: the timers due within one Advance all fire, each with its own
// deadline, and only those.
func TestFakeDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	var order []string
	timers := map[string]Timer{}
	for _, name := range []string{"c", "a", "b1", "b2"} {
		d := map[string]time.Duration{"a": time.Second, "b1": 2 * time.Second, "b2": 2 * time.Second, "c": 3 * time.Second}[name]
		timers[name] = f.NewTimer(d)
	}
	if n := f.Waiters(); n != 4 {
		t.Fatalf("Waiters = %d, want 4", n)
	}
	f.Advance(2 * time.Second)
	if n := f.Waiters(); n != 1 {
		t.Fatalf("after 2s: Waiters = %d, want 1", n)
	}
	for _, name := range []string{"a", "b1", "b2", "c"} {
		select {
		case v := <-timers[name].C():
			order = append(order, fmt.Sprintf("%s@%v", name, v.Sub(epoch)))
		default:
			order = append(order, name+":none")
		}
	}
	if got, want := strings.Join(order, " "), "a@1s b1@2s b2@2s c:none"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestFakeTickerEveryPeriod(t *testing.T) {
	f := NewFake(epoch)
	k := f.NewTicker(time.Second)
	defer k.Stop()
	var got []string
	for range 3 {
		f.Advance(time.Second)
		got = append(got, (<-k.C()).Sub(epoch).String())
	}
	if s := strings.Join(got, " "); s != "1s 2s 3s" {
		t.Fatalf("ticks %s", s)
	}
	k.Reset(500 * time.Millisecond)
	f.Advance(500 * time.Millisecond)
	if v := (<-k.C()).Sub(epoch); v != 3500*time.Millisecond {
		t.Fatalf("after Reset: tick at %v", v)
	}
}

func TestPanics(t *testing.T) {
	f := NewFake(epoch)
	for name, fn := range map[string]func(){
		"NewTicker(0)":      func() { f.NewTicker(0) },
		"Ticker.Reset(-1)":  func() { f.NewTicker(time.Second).Reset(-1) },
		"Advance(-1)":       func() { f.Advance(-1) },
		"Real NewTicker(0)": func() { Real().NewTicker(0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			fn()
		}()
	}
}

// TestBlockUntil: BlockUntil returns once the code under test has armed its timers,
// and with the context's error (leaving nothing behind) when they never come.
func TestBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	ctx := context.Background()
	if err := f.BlockUntil(ctx, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan time.Time)
	for range 2 {
		go func() {
			tm := f.NewTimer(time.Minute)
			done <- <-tm.C()
		}()
	}
	if err := f.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	for range 2 {
		if v := <-done; !v.Equal(epoch.Add(time.Minute)) {
			t.Fatalf("fired with %v", v)
		}
	}
	if n := f.Waiters(); n != 0 {
		t.Fatalf("Waiters = %d after the fire", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error)
	go func() { errc <- f.BlockUntil(cctx, 1) }()
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("BlockUntil after cancel: %v", err)
	}
	f.mu.Lock()
	left := len(f.blockers)
	f.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d blockers left after cancel", left)
	}

	// A stopped timer no longer counts.
	tm := f.NewTimer(time.Second)
	tm.Stop()
	if n := f.Waiters(); n != 0 {
		t.Fatalf("Waiters = %d after Stop", n)
	}
}

// TestFakeConcurrent exercises the clock from many goroutines at once for the race
// detector: each waits for its timer, the test advances until all have fired.
func TestFakeConcurrent(t *testing.T) {
	f := NewFake(epoch)
	const n = 32
	var wg sync.WaitGroup
	armed := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			tm := f.NewTimer(time.Duration(i+1) * time.Millisecond)
			k := f.NewTicker(time.Millisecond)
			defer k.Stop()
			armed <- struct{}{}
			v := <-tm.C()
			if want := epoch.Add(time.Duration(i+1) * time.Millisecond); v.Before(want) {
				t.Errorf("timer %d fired at %v, before %v", i, v, want)
			}
			tm.Reset(time.Millisecond)
			tm.Stop()
			_ = f.Since(v)
		})
	}
	for range n {
		<-armed
	}
	for range n {
		f.Advance(time.Millisecond)
	}
	wg.Wait()
	if w := f.Waiters(); w != 0 {
		t.Fatalf("Waiters = %d after all stopped", w)
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	before := time.Now()
	now := c.Now()
	if now.Before(before) || c.Since(before) < 0 {
		t.Fatal("Real runs backwards")
	}
	if now.Round(0) == now {
		t.Fatal("Real().Now has no monotonic reading")
	}
}
