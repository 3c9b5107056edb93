package natstransport_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
	"github.com/gale-stream/gale/transport/transporttest"
)

// Attacks on the transport that found nothing: each test pins the behaviour that
// held.

// awaitControl waits for one control message at in.
func awaitControl(t *testing.T, in transport.Inbox) *transport.Message {
	t.Helper()
	deadline := time.NewTimer(transporttest.Timeout)
	defer deadline.Stop()
	for {
		if got := in.TakeControl(nil); len(got) > 0 {
			return got[0]
		}
		select {
		case <-in.Signal():
		case <-deadline.C:
			t.Fatal("the message never arrived")
		}
	}
}

// splitFrame is a split frame as a foreign client could publish it: the marker,
// part and parts as given, then m's encoding.
func splitFrame(t *testing.T, part, parts uint64, m *transport.Message) []byte {
	t.Helper()
	f := binary.AppendUvarint(binary.AppendUvarint([]byte{0xF7}, part), parts)
	f, err := codec.AppendMessage(f, m, codec.NewStreams(batchTopology()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Malformed frames on an endpoint's subjects, published by a foreign client, are
// each counted as an error, none panics, nothing of them is delivered, and the
// next good message arrives.
func TestHostileFramesAreCountedHeld(t *testing.T) {
	p := newPair(t)
	streams := codec.NewStreams(batchTopology())
	data, ctl := p.rcv.Subjects(2)
	raw := connect(t, p.url)
	b := batch(1, 3, 8)
	toOther := batch(1, 3, 8)
	toOther.To = 1
	acks := &transport.Message{Kind: transport.KindAcks, From: 1, To: 2, Seq: 1, Acks: []acker.Msg{{Root: 1}}}
	encode := func(m *transport.Message) []byte {
		f, err := codec.AppendMessage(nil, m, streams)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	overflow := append([]byte{0xF7, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
	bad := []struct {
		subj  string
		frame []byte
	}{
		{data, nil},
		{data, []byte{0xF7}},
		{data, []byte{0xF7, 0x80}},
		{data, overflow},
		{data, splitFrame(t, 2, 2, b)},      // part past parts
		{data, splitFrame(t, 0, 1, b)},      // one part is not split
		{data, splitFrame(t, 0, 2, b)[:20]}, // truncated encoding
		{ctl, splitFrame(t, 0, 2, acks)},    // split on the control lane
		{data, splitFrame(t, 0, 2, acks)},   // a split control message
		{data, encode(toOther)},             // another endpoint's message
		{ctl, encode(b)},                    // data on the control lane
		{data, encode(acks)},                // control on the data lane
		{data, append([]byte{codec.Magic, codec.Version}, 0xff, 0xff, 0xff)},
	}
	for _, f := range bad {
		if err := raw.Publish(f.subj, f.frame); err != nil {
			t.Fatal(err)
		}
	}
	// A good message on each lane after them: frames of one publisher on one subject
	// are handled in order, so once both arrive every bad frame has been handled.
	if err := raw.Publish(data, encode(batch(9, 2, 8))); err != nil {
		t.Fatal(err)
	}
	good := *acks
	good.Seq = 9
	if err := raw.Publish(ctl, encode(&good)); err != nil {
		t.Fatal(err)
	}
	got := p.take(t, 1)
	if len(got) != 1 || got[0].Seq != 9 || len(got[0].Tuples) != 2 {
		t.Fatalf("got %d messages (first seq %d), want only seq 9", len(got), got[0].Seq)
	}
	if m := awaitControl(t, p.in); m.Seq != 9 {
		t.Fatalf("control lane delivered seq %d, want only the good seq 9", m.Seq)
	}
	if s := p.rcv.Stats(); s.Errors != uint64(len(bad)) || s.Delivered != 2 || s.Dropped != 0 {
		t.Fatalf("receiver stats %+v, want %d errors, 2 delivered", s, len(bad))
	}
}

// A frame claiming 2^63 parts (clamped) starts a partial that holds nothing back:
// the link's next real split message replaces it (one drop counted) and arrives
// whole.
func TestHugePartCountHeld(t *testing.T) {
	p := newPair(t)
	data, _ := p.rcv.Subjects(2)
	raw := connect(t, p.url)
	hostile := batch(99, 2, 8)
	if err := raw.Publish(data, splitFrame(t, 0, 1<<63, hostile)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Publish(data, splitFrame(t, 1, 1<<63, hostile)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.snd.Send(batch(1, 300, 40)); err != nil {
		t.Fatal(err)
	}
	got := p.take(t, 1)
	if len(got) != 1 || got[0].Seq != 1 || len(got[0].Tuples) != 300 {
		t.Fatalf("got seq %d with %d tuples", got[0].Seq, len(got[0].Tuples))
	}
	if s := p.rcv.Stats(); s.Dropped != 1 || s.Delivered != 1 {
		t.Fatalf("receiver stats %+v, want the hostile partial dropped once", s)
	}
}

// Split messages from two senders on two connections, sent at once to one endpoint,
// interleave frame by frame on its subject; each arrives whole, in its sender's
// order, nothing dropped.
func TestSplitFramesOfTwoSendersInterleaveHeld(t *testing.T) {
	p := newPair(t)
	other := newTransportOf(t, p.url, p.snd.Prefix(), codec.NewStreams(batchTopology()))
	const each = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, tr := range []*natstransport.Transport{p.snd, other} {
		wg.Go(func() {
			for seq := uint64(1); seq <= each; seq++ {
				m := batch(seq, 200, 40)
				m.From = 1 + 2*i // 1 and 3
				if err := tr.Send(m); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := p.take(t, 2*each)
	next := map[int]uint64{1: 1, 3: 1}
	for _, m := range got {
		if m.Seq != next[m.From] || len(m.Tuples) != 200 {
			t.Fatalf("from %d: seq %d with %d tuples, want seq %d with 200", m.From, m.Seq, len(m.Tuples), next[m.From])
		}
		for i, tu := range m.Tuples {
			if want := fmt.Sprintf("%d-%d-", m.Seq, i); tu.StringByField("word")[:len(want)] != want {
				t.Fatalf("from %d seq %d tuple %d is %q", m.From, m.Seq, i, tu.StringByField("word"))
			}
		}
		next[m.From]++
	}
	if s := p.rcv.Stats(); s.Dropped != 0 || s.Errors != 0 || s.Delivered != 2*each {
		t.Fatalf("receiver stats %+v", s)
	}
}

// With local delivery, endpoints registered and unregistered while senders run
// (and Stats read) race on nothing (go test -race), and every Send is either
// delivered or an error: Sent == Delivered + Errors, exactly. (Close is left out:
// see TestSendRacingCloseIsDeliveredOrClosed.)
func TestLocalDeliveryChurnKeepsStatsExactHeld(t *testing.T) {
	url := runServer(t).ClientURL()
	tr := newTransport(t, url, newPrefix(), natstransport.WithLocalDelivery())
	if _, err := tr.Register(2); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var senders, others sync.WaitGroup
	for range 4 {
		senders.Go(func() {
			for seq := uint64(1); seq <= 2000; seq++ {
				err := tr.Send(ackMsg(seq))
				if err != nil && !errors.Is(err, transport.ErrUnknownEndpoint) && !errors.Is(err, transport.ErrClosed) {
					if s := err.Error(); len(s) < 30 || s[:30] != "natstransport: deliver acks fr" {
						t.Errorf("Send: %v", err)
						return
					}
				}
			}
		})
	}
	others.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tr.Unregister(2)
			if _, err := tr.Register(2); err != nil && !errors.Is(err, transport.ErrClosed) {
				t.Errorf("Register: %v", err)
				return
			}
		}
	})
	others.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = tr.Stats()
			}
		}
	})
	senders.Wait()
	close(stop)
	others.Wait()
	_ = tr.Close()
	if s := tr.Stats(); s.Sent != 4*2000 || s.Delivered+s.Errors != s.Sent || s.Dropped != 0 {
		t.Fatalf("stats %+v: want Sent 8000 = Delivered + Errors", s)
	}
	if err := tr.Send(ackMsg(1)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if _, err := tr.Register(3); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Register after Close: %v", err)
	}
}

// Close while a sender publishes and the receiver decodes: no panic, no race, a Send
// after Close fails with ErrClosed, and nothing is left running (TestMain counts
// goroutines).
func TestCloseDuringSendAndReceiveHeld(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	snd, rcv := newTransport(t, url, prefix), newTransport(t, url, prefix)
	in, err := rcv.Register(2)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for seq := uint64(1); seq <= 5000; seq++ {
			_ = snd.Send(ackMsg(seq)) // racing Close: see TestSendRacingCloseIsDeliveredOrClosed
		}
	})
	wg.Go(func() {
		for range 50 {
			in.TakeControl(nil)
		}
		_ = rcv.Close()
	})
	wg.Go(func() {
		for range 100 {
			in.TakeControl(nil)
		}
		_ = snd.Close()
	})
	wg.Wait()
	if s := snd.Stats(); s.Sent != 5000 {
		t.Fatalf("sender stats %+v", s)
	}
	if err := snd.Send(ackMsg(1)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// Prefixes that nest in one another ("gale", "gale.ep", "gale.ep.7", ...) never
// share a subject: an endpoint's subjects have the prefix's tokens then exactly
// three more, and the directory's one, so no transport under one prefix hears
// another's messages or notices.
func TestNestedPrefixesShareNoSubjectHeld(t *testing.T) {
	nc := connect(t, runServer(t).ClientURL())
	owner := map[string]string{}
	for _, prefix := range []string{"gale", "gale.ep", "gale.ep.7", "gale.ep.h1", "gale.dir", "gale.ep.7.d", "gale.ep.ep", "ep", "gale.ep.1.ep"} {
		tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		subjects := []string{prefix + ".dir"}
		for ep := -3; ep <= 12; ep++ {
			if ep == 0 {
				continue
			}
			d, c := tr.Subjects(ep)
			subjects = append(subjects, d, c)
		}
		_ = tr.Close()
		for _, s := range subjects {
			if o, ok := owner[s]; ok && o != prefix {
				t.Errorf("subject %s is under prefix %q and %q", s, o, prefix)
			}
			owner[s] = prefix
		}
	}
}
