package natstransport_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
)

// Messages past a subscription's pending limits are dropped by the client as a slow
// consumer, and counted: with a byte limit below one message, every one.
func TestSlowConsumerDropsAreCounted(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	ncA, ncB := connect(t, url), connect(t, url)
	a, err := natstransport.New(ncA, suiteStreams, natstransport.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := natstransport.New(ncB, suiteStreams, natstransport.WithPrefix(prefix), natstransport.WithPendingLimits(-1, 10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.Register(2); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 100; seq++ {
		if err := a.Send(ackMsg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	// The sender's flush puts the messages at the server, the receiver's round trip
	// has its connection read them all.
	if err := ncA.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ncB.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Dropped != 100 || s.Delivered != 0 {
		t.Fatalf("receiver stats %+v, want 100 dropped", s)
	}
	b.Unregister(2) // the drops of a subscription that ended are kept
	if s := b.Stats(); s.Dropped != 100 {
		t.Fatalf("receiver stats after Unregister %+v, want 100 dropped", s)
	}
}

func TestNewChecksItsArguments(t *testing.T) {
	nc := connect(t, runServer(t).ClientURL())
	if _, err := natstransport.New(nil, suiteStreams); err == nil {
		t.Error("New with a nil connection succeeded")
	}
	if _, err := natstransport.New(nc, nil); err == nil {
		t.Error("New with no stream table succeeded")
	}
	for _, p := range []string{"", "a..b", "a.*", "gale.>", "has space", ".x", "x."} {
		if _, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(p)); err == nil || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("prefix %q: %v, want an error about the prefix", p, err)
		}
	}
	tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix("acme.prod"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for ep, want := range map[int][2]string{7: {"acme.prod.ep.7.d", "acme.prod.ep.7.c"}, -3: {"acme.prod.ep.h3.d", "acme.prod.ep.h3.c"}} {
		if d, c := tr.Subjects(ep); d != want[0] || c != want[1] {
			t.Errorf("Subjects(%d) = %s, %s; want %s, %s", ep, d, c, want[0], want[1])
		}
	}
}

// Without WithEndpoints a transport cannot tell an endpoint of another process from
// one that exists nowhere: the message is published (and lost, unseen). With it, the
// topology's endpoints are known and others refused.
func TestEndpointsOption(t *testing.T) {
	url := runServer(t).ClientURL()
	open := connect(t, url)
	tr, err := natstransport.New(open, suiteStreams, natstransport.WithPrefix(newPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Send(ackMsg(1)); err != nil {
		t.Fatalf("Send to an endpoint that may be elsewhere: %v", err)
	}
	eps := natstransport.Endpoints(10, 3)
	for ep, want := range map[int]bool{1: true, 10: true, 11: false, 0: false, -1: true, -3: true, -4: false} {
		if eps(ep) != want {
			t.Errorf("Endpoints(10, 3)(%d) = %v", ep, !want)
		}
	}
	strict, err := natstransport.New(open, suiteStreams, natstransport.WithPrefix(newPrefix()), natstransport.WithEndpoints(eps))
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	m := ackMsg(1)
	m.To = 11
	if err := strict.Send(m); !errors.Is(err, transport.ErrUnknownEndpoint) || !strings.Contains(err.Error(), "not an endpoint of this topology") {
		t.Fatalf("Send to endpoint 11 of a 10-task topology: %v", err)
	}
}
