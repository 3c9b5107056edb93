package natstransport_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
)

// conn connects to url, reporting each reconnection on the returned channel.
func conn(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, chan struct{}) {
	back := make(chan struct{}, 8)
	nc := connect(t, url, append(opts, nats.ReconnectHandler(func(*nats.Conn) { back <- struct{}{} }))...)
	return nc, back
}

func ackMsg(seq uint64) *transport.Message {
	return &transport.Message{Kind: transport.KindAcks, From: 1, To: 2, Epoch: 9, Seq: seq,
		Acks: []acker.Msg{{Kind: acker.Ack, Root: seq, Val: seq}}}
}

// An endpoint registered before the server restarts receives again after it: nats.go
// re-subscribes, and the transport needs nothing registered again. While the server
// is down, small sends neither fail nor block: the connection buffers them (what
// was in its buffer when the socket died is lost, as the protocol allows).
func TestEndpointSurvivesAServerRestart(t *testing.T) {
	srv := runServer(t)
	p := port(srv)
	prefix := newPrefix()
	ncA, backA := conn(t, srv.ClientURL())
	ncB, backB := conn(t, srv.ClientURL())
	mk := func(nc *nats.Conn) *natstransport.Transport {
		tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(prefix), natstransport.WithEndpoints(suiteEndpoints))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	a, b := mk(ncA), mk(ncB)
	in, err := b.Register(2)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(seq uint64) {
		t.Helper()
		deadline := time.NewTimer(30 * time.Second)
		defer deadline.Stop()
		var got []*transport.Message
		for {
			for _, m := range in.TakeControl(got[:0]) {
				if m.Seq == seq {
					return
				}
			}
			select {
			case <-in.Signal():
			case <-deadline.C:
				t.Fatalf("seq %d never arrived; receiver %+v", seq, b.Stats())
			}
		}
	}
	if err := a.Send(ackMsg(1)); err != nil {
		t.Fatal(err)
	}
	wait(1)

	srv.Shutdown()
	srv.WaitForShutdown()
	for seq := uint64(2); seq <= 100; seq++ { // into the reconnect buffer, or lost
		if err := a.Send(ackMsg(seq)); err != nil {
			t.Fatalf("Send while the server is down: %v", err)
		}
	}
	runServer(t, func(o *server.Options) { o.Port = p })
	<-backA
	<-backB
	if err := ncB.Flush(); err != nil { // the server has B's subscriptions again
		t.Fatal(err)
	}
	if err := a.Send(ackMsg(101)); err != nil {
		t.Fatal(err)
	}
	wait(101)
	if s := b.Stats(); s.Errors != 0 || s.Delivered < 2 {
		t.Fatalf("receiver stats %+v", s)
	}
	if s := a.Stats(); s.Errors != 0 || s.Sent != 101 {
		t.Fatalf("sender stats %+v", s)
	}
}

// While the server is down, what does not fit in the connection's reconnect buffer
// is a Send error, counted, that says so.
func TestReconnectBufferOverflowIsAnError(t *testing.T) {
	srv := runServer(t)
	nc, _ := conn(t, srv.ClientURL(), nats.ReconnectBufSize(4096))
	tr, err := natstransport.New(nc, suiteStreams, natstransport.WithPrefix(newPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	srv.Shutdown()
	srv.WaitForShutdown()
	// Until the client notices the server is gone, sends may go to the dead socket
	// (and fail as a reset connection); then they fill the reconnect buffer.
	var sendErr error
	failed := uint64(0)
	for seq := uint64(1); seq <= 100000 && !errors.Is(sendErr, nats.ErrReconnectBufExceeded); seq++ {
		if sendErr = tr.Send(ackMsg(seq)); sendErr != nil {
			failed++
		}
	}
	if !errors.Is(sendErr, nats.ErrReconnectBufExceeded) {
		t.Fatalf("100000 sends of about 50 bytes into a 4 KiB reconnect buffer, the last: %v", sendErr)
	}
	if s := tr.Stats(); s.Errors != failed || !strings.Contains(s.LastError, nats.ErrReconnectBufExceeded.Error()) {
		t.Fatalf("stats %+v after %d failed sends", s, failed)
	}
	t.Logf("%d sends failed, the last: %v", failed, sendErr)
}
