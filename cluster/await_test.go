package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type awaited struct {
	rec *Record
	err error
}

// goAwait runs AwaitRunning in the background; its answer comes on the channel.
func goAwait(ctx context.Context, s *Store, rec *Record, o AwaitOptions) <-chan awaited {
	ch := make(chan awaited, 1)
	go func() {
		r, err := s.AwaitRunning(ctx, rec, o)
		ch <- awaited{r, err}
	}()
	return ch
}

func answer(t *testing.T, ch <-chan awaited, what string) awaited {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer in 20s", what)
		return awaited{}
	}
}

func pending(t *testing.T, ch <-chan awaited, what string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s answered %+v, %v too soon", what, a.rec, a.err)
	default:
	}
}

// seeBeat waits until the workers' watch shows worker name running topo at
// generation gen (0: refusing it).
func seeBeat(t *testing.T, beats <-chan MemberEvent, name, topo string, gen uint64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-beats:
			w := ev.Worker
			if w.Name != name || ev.Kind == Left {
				continue
			}
			if _, refused := w.Refused[topo]; (gen == 0 && refused) || (gen != 0 && w.Running[topo] == gen) {
				return
			}
		case <-timeout:
			t.Fatalf("no heartbeat of %s with %s at generation %d in 10s", name, topo, gen)
		}
	}
}

// TestAwaitRunning: a wait ends only once every worker of the generation says it
// runs it, following the scheduler's new generation after a worker refuses (told
// once); with Next, only a generation above the record's will do. A record that
// stays placed but not running ends at the deadline, a refusal by the scheduler
// and a kill at once.
func TestAwaitRunning(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	client := openStore(t, url, Config{Prefix: prefix})
	beats, err := client.WatchWorkers(ctxT(t, 90*time.Second), true)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := scheduler(t, openStore(t, url, Config{Prefix: prefix}), "s1")
	ev.wait(t, 5*time.Second, "election", kind(Elected, ""))
	w1 := startWorker(t, url, prefix, "w1", 1)
	w2 := startWorker(t, url, prefix, "w2", 1)
	w3 := startWorker(t, url, prefix, "w3", 1)
	waitWorkers(t, ev, 3)
	ctx := ctxT(t, 60*time.Second)
	spec := wcSpec(t, "wc", 2)
	rec1, err := client.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec1.Assignment.Workers, []string{"w1", "w2"}) {
		t.Fatalf("placed on %v", rec1.Assignment.Workers)
	}

	var mu sync.Mutex
	var told []string
	a := goAwait(ctx, client, rec1, AwaitOptions{Refused: func(w string, r Refusal) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, w+": "+r.Reason)
	}})
	b := goAwait(ctx, client, rec1, AwaitOptions{Next: true})
	w1.h.SetRunning(map[string]uint64{"wc": 1}, nil)
	seeBeat(t, beats, "w1", "wc", 1)
	pending(t, a, "a wait with w2 not running")
	pending(t, b, "a wait for the next generation")

	// w2 refuses: its tasks go to w3 under generation 2, which the waits follow.
	refusal := map[string]Refusal{"wc": {Fingerprint: spec.Fingerprint.String(), Reason: "not in this build"}}
	w2.h.SetRunning(nil, refusal)
	ev.wait(t, 10*time.Second, "wc moved off w2", kind(Wrote, "wc"))
	seeBeat(t, beats, "w2", "wc", 0)
	pending(t, a, "a wait with generation 2 running nowhere")
	w1.h.SetRunning(map[string]uint64{"wc": 2}, nil)
	w3.h.SetRunning(map[string]uint64{"wc": 2}, nil)
	var rec2 *Record
	for _, ch := range []<-chan awaited{a, b} {
		got := answer(t, ch, "generation 2 running")
		if got.err != nil || got.rec.Generation() != 2 || !slices.Equal(got.rec.Assignment.Workers, []string{"w1", "w3"}) {
			t.Fatalf("answered %+v, %v; want generation 2 on w1 and w3", got.rec, got.err)
		}
		rec2 = got.rec
	}
	mu.Lock()
	if !slices.Equal(told, []string{"w2: not in this build"}) {
		t.Errorf("refusals told %q, want w2's once", told)
	}
	mu.Unlock()

	// wc2 on w2, the one free slot, where it does not start: the deadline says
	// what was placed; then w2 refuses it too, and with no other slot the scheduler
	// refuses it.
	rec, err := client.Submit(ctx, wcSpec(t, "wc2", 1))
	if err != nil || !slices.Equal(rec.Assignment.Workers, []string{"w2"}) {
		t.Fatalf("wc2: %+v, %v", rec, err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = client.AwaitRunning(short, rec, AwaitOptions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "topology wc2 placed (generation 1) but not running on every worker") {
		t.Errorf("at the deadline: %v", err)
	}
	c := goAwait(ctx, client, rec, AwaitOptions{})
	refusal["wc2"] = Refusal{Fingerprint: rec.Fingerprint.String(), Reason: "fingerprint differs"}
	w2.h.SetRunning(nil, refusal)
	if got := answer(t, c, "wc2 refused"); !errors.Is(got.err, ErrRefused) || !strings.Contains(got.err.Error(), "refused by w2: fingerprint differs") {
		t.Errorf("refused: %+v, %v", got.rec, got.err)
	}

	// Running everywhere, generation 2 answers at once; with Next, only the
	// rebalance's generation 3 does, once it runs.
	if got, err := client.AwaitRunning(ctx, rec2, AwaitOptions{}); err != nil || got.Generation() != 2 {
		t.Fatalf("generation 2 running: %+v, %v", got, err)
	}
	d := goAwait(ctx, client, rec2, AwaitOptions{Next: true})
	rec3, err := client.Rebalance(ctx, "wc", 1)
	if err != nil || rec3.Generation() != 3 || len(rec3.Assignment.Workers) != 1 {
		t.Fatalf("rebalance: %+v, %v", rec3, err)
	}
	pending(t, d, "a wait for the generation after 2")
	for _, w := range []*worker{w1, w3} {
		if w.name == rec3.Assignment.Workers[0] {
			w.h.SetRunning(map[string]uint64{"wc": 3}, nil)
		}
	}
	if got := answer(t, d, "generation 3 running"); got.err != nil || got.rec.Generation() != 3 {
		t.Errorf("answered %+v, %v; want generation 3", got.rec, got.err)
	}

	// A killed topology is not waited for.
	killed, err := client.Kill(ctx, "wc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.AwaitRunning(ctx, killed, AwaitOptions{}); err == nil || !strings.Contains(err.Error(), "topology wc was killed while starting") {
		t.Errorf("killed: %v", err)
	}
}
