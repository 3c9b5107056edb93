package jslog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
)

func openLeased(t *testing.T, url, holder string) *Log {
	t.Helper()
	l, err := Open(context.Background(), Config{JS: openJS(t, url), Prefix: "t", Timeout: 5 * time.Second,
		Holder: holder, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// waitHolding waits, bounded, until l holds the lease, and returns its term.
func waitHolding(t *testing.T, l *Log, within time.Duration) uint64 {
	t.Helper()
	var epoch uint64
	waitfor.True(t, within, l.cfg.Holder+" to hold the lease", func() (ok bool) {
		epoch, ok = l.Holding()
		return ok
	})
	return epoch
}

func committedValue(t *testing.T, l *Log) uint64 {
	t.Helper()
	e, err := l.docs.Get(context.Background(), committedKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// One holder at a time: the first process holds the lease when Open returns, a
// second waits. When the holder stops renewing (paused, cut off) the second takes
// over only once the first no longer counts itself holder, and the first's later
// offset writes are fenced off: the offset stays the new holder's.
func TestLeaseOneHolderAndFence(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	a := openLeased(t, url, "a")
	b := openLeased(t, url, "b")
	ea, ok := a.Holding()
	if !ok || ea == 0 {
		t.Fatalf("a does not hold the lease after Open (term %d)", ea)
	}
	if _, ok := b.Holding(); ok {
		t.Fatal("b holds the lease while a does")
	}
	if li, err := b.Lease(context.Background()); err != nil || li == nil || li.Holder != "a" {
		t.Fatalf("lease as b reads it: %+v %v", li, err)
	}
	if err := a.Apply(&eventlog.Write{Committed: 7}); err != nil {
		t.Fatal(err)
	}
	if c := committedValue(t, b); c != 7 {
		t.Fatalf("committed %d, want a's 7", c)
	}
	// b has no say on the offset while a holds the lease.
	if err := b.writeCommitted(context.Background(), 9); !errors.Is(err, ErrFenced) {
		t.Fatalf("b's offset write: %v, want ErrFenced", err)
	}

	a.lease.paused.Store(true) // a goes on running but stops renewing
	eb := waitHolding(t, b, 15*time.Second)
	if _, ok := a.Holding(); ok {
		t.Fatal("a and b both count themselves holder")
	}
	if eb <= ea {
		t.Fatalf("b's term %d is not after a's %d", eb, ea)
	}
	if b.Committed() != 7 {
		t.Fatalf("b took over at offset %d, want 7", b.Committed())
	}
	// a comes back and tries to move the offset: refused, and said so.
	if err := a.writeCommitted(context.Background(), 12); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's offset write after the takeover: %v, want ErrFenced", err)
	}
	if err := a.Apply(&eventlog.Write{Committed: 13}); err != nil {
		t.Fatalf("a's Apply (documents stored, offset fenced): %v", err)
	}
	if a.Fenced() != 2 {
		t.Fatalf("a fenced %d times, want 2", a.Fenced())
	}
	if err := b.Apply(&eventlog.Write{Committed: 10}); err != nil {
		t.Fatal(err)
	}
	if c := committedValue(t, a); c != 10 {
		t.Fatalf("committed %d, want b's 10", c)
	}
	// a resumes renewing: its renewal is refused, it does not take the lease back.
	a.lease.paused.Store(false)
	a.tryLease()
	if _, ok := a.Holding(); ok {
		t.Fatal("a holds the lease again while b does")
	}
	if _, ok := b.Holding(); !ok {
		t.Fatal("b lost the lease to a's renewal")
	}
}

// Close gives the lease back at once (the key is deleted), rather than leaving
// the log unread for a TTL.
func TestLeaseCloseGivesItBack(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	a := openLeased(t, url, "a")
	b := openLeased(t, url, "b")
	if _, ok := a.Holding(); !ok {
		t.Fatal("a does not hold the lease")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if li, err := b.Lease(context.Background()); err != nil || li != nil {
		t.Fatalf("lease after the holder's Close: %+v %v, want none", li, err)
	}
	b.tryLease()
	if _, ok := b.Holding(); !ok {
		t.Fatal("b did not take the lease a gave back")
	}
}

// A TTL other than the bucket's is refused with a message that says so: two
// processes with different TTLs would not agree on when a lease ends.
func TestLeaseTTLMismatch(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	openLeased(t, url, "a")
	_, err := Open(context.Background(), Config{JS: openJS(t, url), Prefix: "t", LeaseTTL: 3 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "lease TTL of 1s, this process asks for 3s") {
		t.Fatalf("Open with another TTL: %v", err)
	}
	if _, err := Open(context.Background(), Config{JS: openJS(t, url), Prefix: "u", LeaseTTL: 10 * time.Millisecond}); err == nil {
		t.Fatal("a 10ms lease TTL was taken")
	}
}

// OnStatusChange tells of status documents another process stores.
func TestOnStatusChange(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	a := openLeased(t, url, "a")
	b := openLeased(t, url, "b")
	var mu sync.Mutex
	got := map[string]int{}
	changed := make(chan struct{}, 16)
	b.OnStatusChange(func(id string) {
		mu.Lock()
		got[id]++
		mu.Unlock()
		select { // fn must not block the watch
		case changed <- struct{}{}:
		default:
		}
	})
	// The watch starts in the background: write until b hears of a first document.
	waitfor.Until(t, 10*time.Second, func() error {
		select {
		case <-changed:
			return nil
		default:
		}
		var w eventlog.Write
		w.Set(eventlog.Status, "warm-up/é", []byte(`{}`))
		if err := a.Apply(&w); err != nil {
			t.Fatal(err)
		}
		return errors.New("b heard of no status document")
	})
	var w eventlog.Write
	w.Set(eventlog.Status, "o1", []byte(`{"status":"PROCESSED"}`))
	w.Set(eventlog.DeadLetter, "o2", []byte(`{}`)) // not a status: not told
	if err := a.Apply(&w); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for told := false; !told; {
		select {
		case <-changed:
			mu.Lock()
			told = got["o1"] > 0
			mu.Unlock()
		case <-time.After(time.Until(deadline)):
			t.Fatal("b was not told of o1")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got["o1"] != 1 || got["o2"] != 0 || got["warm-up/é"] == 0 {
		t.Fatalf("told of %v", got)
	}
}

// startServe is one serve process's ingest service and topology (log spout, a
// sink that acks) on l.
func startServe(t *testing.T, l *Log) (*ingest.Service, *ackSink) {
	t.Helper()
	sink := &ackSink{seen: map[string]int{}}
	svc, _ := startServeWith(t, l, ingest.Config{FlushEvery: 5 * time.Millisecond}, sink)
	return svc, sink
}

func orderEvents(from, to int) []event.Event {
	var evs []event.Event
	for i := from; i < to; i++ {
		evs = append(evs, event.Event{ID: fmt.Sprintf("o%d", i), Source: "orders", Type: "order_line", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	return evs
}

// Two serve processes on one log: each takes events in and answers PROCESSED for
// events the other's spout processed (the status watch wakes its waiters), and
// when the holder stops renewing the lease the other takes over the log spout at
// the committed offset: every event is processed once across the two.
func TestTwoServicesShareTheLog(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	la := openLeased(t, url, "a")
	lb := openLeased(t, url, "b")
	a, sa := startServe(t, la)
	b, sb := startServe(t, lb)
	ctx := context.Background()
	check := func(who string, rs []ingest.Result, from int) {
		t.Helper()
		for i, r := range rs {
			if r.Err != nil || r.Status.Status != ingest.Processed || r.Duplicate {
				t.Fatalf("%s, o%d: %+v", who, from+i, r)
			}
		}
	}
	// b takes them in; a's spout processes them; b answers PROCESSED.
	check("b", b.Submit(ctx, orderEvents(0, 40), ingest.LevelProcessed, 20*time.Second), 0)
	// a answers for an event b took in, as a duplicate.
	if r := a.Submit(ctx, orderEvents(3, 4), ingest.LevelProcessed, 20*time.Second)[0]; r.Err != nil || !r.Duplicate || r.Status.Status != ingest.Processed {
		t.Fatalf("a, resend of o3: %+v", r)
	}
	if st, err := b.Status("o17"); err != nil || st.Status != ingest.Processed {
		t.Fatalf("b's Status(o17): %+v %v", st, err)
	}
	// a stops renewing (idle: nothing in flight); b takes the log spout over.
	la.lease.paused.Store(true)
	waitHolding(t, lb, 15*time.Second)
	check("a", a.Submit(ctx, orderEvents(40, 80), ingest.LevelProcessed, 20*time.Second), 40)
	sa.mu.Lock()
	sb.mu.Lock()
	defer sa.mu.Unlock()
	defer sb.mu.Unlock()
	for i := range 80 {
		id := fmt.Sprintf("o%d", i)
		na, nb := sa.seen[id], sb.seen[id]
		if na+nb != 1 {
			t.Errorf("%s processed %d times by a, %d by b", id, na, nb)
		}
		if i < 40 && na != 1 || i >= 40 && nb != 1 {
			t.Errorf("%s processed by a %d, b %d: want the lease holder of its time", id, na, nb)
		}
	}
}
