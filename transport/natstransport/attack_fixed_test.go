package natstransport_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
	"github.com/gale-stream/gale/transport/transporttest"
)

// Attacks on the transport that found a fault: each test pins the fix.

// heardHook returns an option that reports each directory notice handled, and a
// wait for the next one.
func heardHook(t *testing.T) (natstransport.Option, func()) {
	ch := make(chan struct{}, 64)
	opt := natstransport.WithNoticeHook(func() { ch <- struct{}{} })
	return opt, func() {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(transporttest.Timeout):
			t.Fatal("no directory notice arrived")
		}
	}
}

// A task moved from process A to process B, B registering it before A unregisters
// it (notices of two processes are not ordered, so this is one order a move may
// take): A hears B's "up" while the task is still registered on A, and once A lets
// the task go, A's other tasks go on sending to it, on B. (A used to ignore
// notices of an endpoint registered here, then mark it gone for good on
// Unregister.)
func TestOldHostSendsToTheTaskItHandedOver(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	hook, heard := heardHook(t)
	a := newTransport(t, url, prefix, hook)
	b := newTransport(t, url, prefix)
	if _, err := a.Register(1); err != nil { // the sender stays on A
		t.Fatal(err)
	}
	if _, err := a.Register(2); err != nil {
		t.Fatal(err)
	}
	in, err := b.Register(2) // the new host takes task 2 over...
	if err != nil {
		t.Fatal(err)
	}
	heard()         // ...A has B's "up 2"...
	a.Unregister(2) // ...and the old host lets it go
	if a.KnowsGone(2) {
		t.Fatal("A refuses task 2, now on B")
	}
	if err := a.Send(ackMsg(1)); err != nil {
		t.Fatalf("A sends to task 2, now on B: %v", err)
	}
	if m := awaitControl(t, in); m.Seq != 1 {
		t.Fatalf("B got seq %d", m.Seq)
	}
}

// The same move seen by a process that started after both "up" notices: it never
// heard who hosts task 2, so the old host's "down" does not make it refuse task 2
// (an unheard process may host it, and here B does). (It used to take a "down" as
// final when it knew no host.)
func TestLateJoinerSendsToAMovedTask(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	mk := func() (*natstransport.Transport, func()) {
		nc := connect(t, url)
		tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(prefix), natstransport.WithEndpoints(suiteEndpoints))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr, func() {
			if err := nc.Flush(); err != nil { // the notices it published are out
				t.Fatal(err)
			}
		}
	}
	a, flushA := mk()
	b, flushB := mk()
	if _, err := a.Register(2); err != nil {
		t.Fatal(err)
	}
	in, err := b.Register(2)
	if err != nil {
		t.Fatal(err)
	}
	flushA()
	flushB()
	hook, heard := heardHook(t)
	c := newTransport(t, url, prefix, hook) // a process starting meanwhile
	a.Unregister(2)
	heard()
	if err := c.Send(ackMsg(1)); err != nil {
		t.Fatalf("C sends to task 2, hosted by B: %v", err)
	}
	if m := awaitControl(t, in); m.Seq != 1 {
		t.Fatalf("B got seq %d", m.Seq)
	}
}

// An endpoint hosted by two processes at once (a move under way) is gone for a
// third, which heard both announce it, only once both have let it go, in either
// order of their notices.
func TestEndpointIsGoneWhenItsLastHostLetsItGo(t *testing.T) {
	url := runServer(t).ClientURL()
	for _, first := range []int{0, 1} {
		prefix := newPrefix()
		hook, heard := heardHook(t)
		c := newTransport(t, url, prefix, hook)
		hosts := []*natstransport.Transport{newTransport(t, url, prefix), newTransport(t, url, prefix)}
		for _, h := range hosts {
			if _, err := h.Register(2); err != nil {
				t.Fatal(err)
			}
			heard()
		}
		hosts[first].Unregister(2)
		heard()
		if c.KnowsGone(2) {
			t.Fatalf("host %d let task 2 go: C refuses it, still on host %d", first, 1-first)
		}
		hosts[1-first].Unregister(2)
		heard()
		if !c.KnowsGone(2) {
			t.Fatal("both hosts let task 2 go: C still sends to it")
		}
	}
}

// Sends racing Close, with local delivery to an endpoint here (a race, so the test
// repeats it, bounded): each is delivered or fails with ErrClosed, and Sent ==
// Delivered + Errors. (A Send that passed its closed check just before Close used to
// find the endpoint table emptied, publish the message to a subscription Close had
// ended and return nil, or fail with "nats: connection closed", not ErrClosed.)
func TestSendRacingCloseIsDeliveredOrClosed(t *testing.T) {
	url := runServer(t).ClientURL()
	var lost, notClosed int
	var lastErr error
	var mu sync.Mutex
	for round := 0; round < 200 && lost+notClosed == 0; round++ {
		tr := newTransport(t, url, newPrefix(), natstransport.WithLocalDelivery())
		if _, err := tr.Register(2); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		started := make(chan struct{})
		once := sync.OnceFunc(func() { close(started) })
		for range 2 {
			wg.Go(func() {
				for seq := uint64(1); ; seq++ {
					err := tr.Send(ackMsg(seq))
					if seq == 100 {
						once()
					}
					if errors.Is(err, transport.ErrClosed) {
						return
					}
					if err != nil {
						mu.Lock()
						notClosed++
						lastErr = err
						mu.Unlock()
						return
					}
				}
			})
		}
		<-started
		_ = tr.Close()
		wg.Wait()
		if s := tr.Stats(); s.Sent != s.Delivered+s.Errors {
			lost++
			t.Logf("round %d: stats %+v: %d sends neither delivered nor failed", round, s, s.Sent-s.Delivered-s.Errors)
		}
	}
	if lost > 0 || notClosed > 0 {
		t.Fatalf("Send racing Close: %d rounds lost a message that Send reported sent; %d Sends failed with an error other than ErrClosed (%v)", lost, notClosed, lastErr)
	}
}
