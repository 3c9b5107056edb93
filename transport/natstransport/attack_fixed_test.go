package natstransport_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/internal/waitfor"
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

// With WithLocalDelivery, a Send that found its destination not registered here,
// the destination registering while the Send runs (held in WithEndpoints' function,
// which Send calls between its look and the publish), and the link's next message:
// both arrive, in order, as Features' Ordered says. (The first used to be published
// and arrive through the server after the second, handed over directly.)
func TestLocalDeliveryKeepsALinkInOrderWhenItsDestinationRegisters(t *testing.T) {
	url := runServer(t).ClientURL()
	// The message through the server usually takes longer than the direct one,
	// but not always: the scenario is repeated (bounded) until the order shows.
	for round := range 20 {
		entered, proceed := make(chan struct{}), make(chan struct{})
		var once sync.Once
		exists := func(ep int) bool {
			if ep == 2 {
				once.Do(func() { close(entered); <-proceed })
			}
			return ep == 1 || ep == 2
		}
		tr := newTransportOf(t, url, newPrefix(), codec.NewStreams(batchTopology()),
			natstransport.WithEndpoints(exists), natstransport.WithLocalDelivery())
		first := make(chan error, 1)
		go func() { first <- tr.Send(batch(1, 1, 8)) }()
		<-entered
		in, err := tr.Register(2)
		close(proceed)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := tr.Send(batch(2, 1, 8)); err != nil {
			t.Fatal(err)
		}
		var got []*transport.Message
		deadline := time.NewTimer(transporttest.Timeout)
		for len(got) < 2 {
			if got = in.TakeTuples(got); len(got) >= 2 {
				break
			}
			select {
			case <-in.Signal():
			case <-deadline.C:
				t.Fatalf("round %d: %d of 2 messages arrived", round, len(got))
			}
		}
		deadline.Stop()
		_ = tr.Close()
		if tr.Features().Ordered && (got[0].Seq != 1 || got[1].Seq != 2) {
			t.Fatalf("round %d: the data lane of link 1 -> 2 delivered seq %d then %d; Features says Ordered", round, got[0].Seq, got[1].Seq)
		}
	}
}

// With WithLocalDelivery, a message published while the connection is down, to an
// endpoint that then registers here, is sent from nats.go's reconnect buffer after
// the subscriptions when the connection is back: it would arrive after the link's
// next message, handed over directly. It is dropped and counted instead, and the
// next arrives.
func TestLocalDeliveryDropsItsOwnMessageFromBeforeTheSwitch(t *testing.T) {
	srv := runServer(t)
	p := port(srv)
	nc, back := conn(t, srv.ClientURL())
	tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(newPrefix()),
		natstransport.WithEndpoints(suiteEndpoints), natstransport.WithLocalDelivery())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	reconnecting := nc.StatusChanged(nats.RECONNECTING)
	defer nc.RemoveStatusListener(reconnecting)
	srv.Shutdown()
	srv.WaitForShutdown()
	select { // until then a publish may go to the dead socket
	case <-reconnecting:
	case <-time.After(transporttest.Timeout):
		t.Fatalf("connection status %v", nc.Status())
	}
	if err := tr.Send(ackMsg(1)); err != nil { // to task 2, elsewhere: into the reconnect buffer
		t.Fatal(err)
	}
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		// The restart comes once Register has subscribed, still disconnected: the
		// subscriptions wait in the reconnect buffer ahead of seq 1.
		if err := waitfor.Err(context.Background(), transporttest.Timeout, func() error {
			if !tr.Registered(2) {
				return errors.New("endpoint 2 not registered")
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		runServer(t, func(o *server.Options) { o.Port = p })
	}()
	in, err := tr.Register(2) // waits for the server (the flush), so for the restart
	<-restarted
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(ackMsg(2)); err != nil { // direct
		t.Fatal(err)
	}
	<-back
	waitfor.Until(t, transporttest.Timeout, func() error {
		if s := tr.Stats(); s.Dropped != 1 {
			return fmt.Errorf("stats %+v: seq 1 never came back", s)
		}
		return nil
	})
	got := in.TakeControl(nil)
	if len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("got %d control messages; want seq 2 alone", len(got))
	}
	if s := tr.Stats(); s.Sent != 2 || s.Delivered != 1 || s.Dropped != 1 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A split message whose last frame is lost, followed on its link by a whole message:
// the whole one says the last frame is not coming (frames of one link arrive in
// order), so the split one is counted dropped at once and its partial freed. (It
// used to be counted only when a later split message of the link replaced it.)
func TestLostLastFrameIsCountedWhenAWholeMessageFollows(t *testing.T) {
	drop := natstransport.WithFrameDrop(func(m *transport.Message, part, n int) bool {
		return m.Seq == 1 && part == n-1
	})
	p := newPair(t, drop)
	if err := p.snd.Send(batch(1, 300, 40)); err != nil { // split; its last frame lost
		t.Fatal(err)
	}
	if err := p.snd.Send(batch(2, 5, 40)); err != nil { // whole
		t.Fatal(err)
	}
	got := p.take(t, 1) // frames of one link arrive in order: seq 1's are all in
	if len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("got %d messages, first seq %d; want seq 2 alone", len(got), got[0].Seq)
	}
	if s := p.rcv.Stats(); s.Dropped != 1 {
		t.Fatalf("receiver stats %+v: seq 1 lost its last frame, want 1 dropped", s)
	}
	if n, bytes := p.rcv.Partials(2); n != 0 || bytes != 0 {
		t.Fatalf("the receiver holds %d partials of %d bytes", n, bytes)
	}
}

// A split message whose last frame is lost, the last message of its link: nothing
// comes to say the frame is lost, so the partial is dropped (counted, freed) once it
// has waited partialIdle for a frame; and so are the partials left when the
// endpoint is unregistered.
func TestLostLastFrameOfALinksLastMessageIsCounted(t *testing.T) {
	natstransport.SetPartialIdle(t, 50*time.Millisecond)
	drop := natstransport.WithFrameDrop(func(m *transport.Message, part, n int) bool {
		return part == n-1
	})
	p := newPair(t, drop)
	if err := p.snd.Send(batch(1, 300, 40)); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, transporttest.Timeout, func() error {
		if s := p.rcv.Stats(); s.Dropped != 1 {
			return fmt.Errorf("receiver stats %+v: seq 1 lost its last frame, never counted", s)
		}
		return nil
	})
	if n, bytes := p.rcv.Partials(2); n != 0 || bytes != 0 {
		t.Fatalf("the receiver holds %d partials of %d bytes", n, bytes)
	}

	natstransport.SetPartialIdle(t, time.Hour)
	p = newPair(t, drop)
	if err := p.snd.Send(batch(1, 300, 40)); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, transporttest.Timeout, "the first frames of seq 1", func() bool {
		n, _ := p.rcv.Partials(2)
		return n == 1
	})
	p.rcv.Unregister(2)
	if s := p.rcv.Stats(); s.Dropped != 1 {
		t.Fatalf("receiver stats %+v: unregistered while seq 1 was missing its last frame", s)
	}
}

// Frames that begin a split message from senders outside the topology (a foreign
// client, or garbage that decodes) are refused and counted, and keep nothing. (Each
// used to start a partial keyed by its claimed sender, uncounted, for the life of
// the registration.)
func TestForeignSplitFramesAreRefused(t *testing.T) {
	p := newPair(t)
	streams := codec.NewStreams(batchTopology())
	data, _ := p.rcv.Subjects(2)
	raw := connect(t, p.url)
	for i := range 100 {
		m := batch(1, 3, 40)
		m.From = 1000 + i // no such task (WithEndpoints(Endpoints(3, 1)))
		f := []byte{0xF7, 0, 2}
		f, err := codec.AppendMessage(f, m, streams)
		if err != nil {
			t.Fatal(err)
		}
		if err := raw.Publish(data, f); err != nil {
			t.Fatal(err)
		}
	}
	good, err := codec.AppendMessage(nil, batch(7, 1, 8), streams)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Publish(data, good); err != nil {
		t.Fatal(err)
	}
	got := p.take(t, 1)
	if len(got) != 1 || got[0].Seq != 7 {
		t.Fatalf("got %d messages", len(got))
	}
	if s := p.rcv.Stats(); s.Errors != 100 || s.Dropped != 0 || !strings.Contains(s.LastError, "not an endpoint of this topology") {
		t.Fatalf("receiver stats %+v after 100 split frames from senders outside the topology, want 100 errors", s)
	}
	if n, bytes := p.rcv.Partials(2); n != 0 || bytes != 0 {
		t.Fatalf("the receiver holds %d partials of %d bytes", n, bytes)
	}
}

// Without WithEndpoints any sender may be real, so the partials are bounded
// instead: at most MaxPartials senders, and a number of frame bytes; past either, the least recently advanced partial is dropped
// (counted), and a split message under way still arrives.
func TestPartialsAreBounded(t *testing.T) {
	srv := runServer(t, maxPayload(smallPayload))
	raw := connect(t, srv.ClientURL())
	streams := codec.NewStreams(batchTopology())
	begin := func(from int, seq uint64) *transport.Message {
		m := batch(seq, 60, 40)
		m.From = from
		return m
	}
	good, err := codec.AppendMessage(nil, batch(7, 1, 8), streams)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("senders", func(t *testing.T) {
		rcv := newTransportOf(t, srv.ClientURL(), newPrefix(), streams)
		in, err := rcv.Register(2)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := rcv.Subjects(2)
		const extra = 50
		for i := range natstransport.MaxPartials + extra {
			if err := raw.Publish(data, splitFrame(t, 0, 2, begin(1000+i, 1))); err != nil {
				t.Fatal(err)
			}
		}
		if err := raw.Publish(data, good); err != nil {
			t.Fatal(err)
		}
		awaitTuples(t, in, 1)
		if s := rcv.Stats(); s.Dropped != extra || s.Errors != 0 {
			t.Fatalf("stats %+v, want %d dropped", s, extra)
		}
		if n, _ := rcv.Partials(2); n != natstransport.MaxPartials {
			t.Fatalf("%d partials", n)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		const limit = 32 << 10
		natstransport.SetMaxPartialBytes(t, limit)
		rcv := newTransportOf(t, srv.ClientURL(), newPrefix(), streams)
		in, err := rcv.Register(2)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := rcv.Subjects(2)
		const senders = 40 // of frames over 2 KB: 80 KB and more
		for i := range senders {
			f := splitFrame(t, 0, 2, begin(1000+i, 1))
			if len(f) < 2<<10 || len(f) > smallPayload {
				t.Fatalf("a frame of %d bytes", len(f))
			}
			if err := raw.Publish(data, f); err != nil {
				t.Fatal(err)
			}
		}
		last := begin(1000+senders-1, 1) // the most recent: kept
		if err := raw.Publish(data, splitFrame(t, 1, 2, last)); err != nil {
			t.Fatal(err)
		}
		got := awaitTuples(t, in, 1)
		if got[0].From != last.From || len(got[0].Tuples) != 120 {
			t.Fatalf("from %d with %d tuples", got[0].From, len(got[0].Tuples))
		}
		s := rcv.Stats()
		n, bytes := rcv.Partials(2)
		if bytes > limit || s.Dropped == 0 || n != senders-1 {
			t.Fatalf("stats %+v, %d partials of %d bytes (limit %d)", s, n, bytes, limit)
		}
		t.Logf("stats %+v, %d partials of %d bytes", s, n, bytes)
	})
}

// awaitTuples waits for n data messages at in.
func awaitTuples(t *testing.T, in transport.Inbox, n int) []*transport.Message {
	t.Helper()
	deadline := time.NewTimer(transporttest.Timeout)
	defer deadline.Stop()
	var got []*transport.Message
	for {
		if got = in.TakeTuples(got); len(got) >= n {
			return got
		}
		select {
		case <-in.Signal():
		case <-deadline.C:
			t.Fatalf("%d of %d messages arrived", len(got), n)
		}
	}
}

// A prefix too long for the server's control line is refused by New (MaxPrefix),
// and the caller's connection, which the server would have closed on the
// subscription, still works; a prefix of MaxPrefix bytes works. (New used to accept
// any length and ignore that the server had closed the connection.)
func TestLongPrefixIsRefusedAndTheConnectionKept(t *testing.T) {
	url := runServer(t).ClientURL()
	nc := connect(t, url)
	tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(strings.Repeat("p", 5000)))
	if err == nil {
		_ = tr.Close()
		t.Fatal("New accepted a 5000-byte prefix")
	}
	if !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("New with a 5000-byte prefix: %v, want an error about the prefix", err)
	}
	if err := nc.Flush(); err != nil || nc.IsClosed() {
		t.Fatalf("the connection after New refused the prefix: %v (last error %v)", err, nc.LastError())
	}
	prefix := newPrefix()
	prefix += "." + strings.Repeat("p", natstransport.MaxPrefix-len(prefix)-1)
	a, b := newTransport(t, url, prefix), newTransport(t, url, prefix)
	in, err := b.Register(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ackMsg(1)); err != nil {
		t.Fatal(err)
	}
	if m := awaitControl(t, in); m.Seq != 1 {
		t.Fatalf("got seq %d", m.Seq)
	}
}

// New on a connection that the server closes on the directory's subscription (a
// server whose max_control_line is smaller than the prefix's subjects need) fails,
// saying why, instead of returning a transport on a closed connection.
func TestNewFailsWhenTheServerClosesTheConnection(t *testing.T) {
	nc := connect(t, runServer(t, func(o *server.Options) { o.MaxControlLine = 1024 }).ClientURL())
	tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(strings.Repeat("p", natstransport.MaxPrefix)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_ = tr.Close()
	nc = connect(t, runServer(t, func(o *server.Options) { o.MaxControlLine = 200 }).ClientURL())
	tr, err = natstransport.New(nc, suiteStreams, natstransport.WithPrefix(strings.Repeat("p", natstransport.MaxPrefix)))
	if err == nil {
		_ = tr.Close()
		t.Fatalf("New succeeded; the connection is closed: %v, last error %v", nc.IsClosed(), nc.LastError())
	}
	if !strings.Contains(err.Error(), "closed") || !nc.IsClosed() {
		t.Fatalf("New: %v; connection closed: %v", err, nc.IsClosed())
	}
	t.Log(err)
}
