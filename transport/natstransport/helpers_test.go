package natstransport_test

import (
	"errors"
	"fmt"
	"github.com/gale-stream/gale/internal/natstest"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
	"github.com/gale-stream/gale/transport/transporttest"
)

// runServer starts an embedded NATS server on a random loopback port, without logs,
// shut down when the test ends.
func runServer(t testing.TB, opts ...func(*server.Options)) *server.Server {
	t.Helper()
	return natstest.Run(t, opts...)
}

// maxPayload sets the server's max_payload.
func maxPayload(n int32) func(*server.Options) {
	return func(o *server.Options) { o.MaxPayload = n }
}

// port returns the port a server listens on.
func port(s *server.Server) int { return s.Addr().(*net.TCPAddr).Port }

// connect opens a connection to url that reconnects at once and for ever, closed when
// the test ends.
func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, url, append([]nats.Option{nats.ReconnectWait(5 * time.Millisecond)}, opts...)...)
}

var prefixes atomic.Int64

// newPrefix returns a subject prefix no other transport of this test binary uses.
func newPrefix() string { return fmt.Sprintf("gale.test%d", prefixes.Add(1)) }

// suiteEndpoints are the endpoints the conformance suite uses: producers and tasks 1
// to 8, consumers 101 to 108, hosts 1 to 3.
func suiteEndpoints(ep int) bool {
	return (ep >= 1 && ep <= 8) || (ep >= 101 && ep <= 108) || (ep <= -1 && ep >= -3)
}

var suiteStreams = codec.NewStreams(transporttest.Topology())

// newTransport returns a transport for the suite's endpoints and streams on its own
// connection to url, closed (with its connection) when the test ends.
func newTransport(t testing.TB, url, prefix string, opts ...natstransport.Option) *natstransport.Transport {
	t.Helper()
	return newTransportOf(t, url, prefix, suiteStreams, append([]natstransport.Option{natstransport.WithEndpoints(suiteEndpoints)}, opts...)...)
}

// newTransportOf is newTransport for a topology's streams.
func newTransportOf(t testing.TB, url, prefix string, streams *codec.Streams, opts ...natstransport.Option) *natstransport.Transport {
	t.Helper()
	nc := connect(t, url)
	opts = append([]natstransport.Option{natstransport.WithPrefix(prefix), natstransport.WithOwnedConn()}, opts...)
	tr, err := natstransport.New(nc, streams, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// cluster is the suite's endpoints split over several processes: one Transport (and
// one connection) per process, endpoint ep living in process place(ep). A message is
// sent by the process of its sender. Unregister and Register wait until every other
// process has the endpoint's notice: in a real cluster a sender learns of it when the
// notice arrives (until then its messages to an unregistered endpoint are published
// and lost unseen, and those to an endpoint registered again are refused).
type cluster struct {
	t       testing.TB
	procs   []*natstransport.Transport
	noticed []chan struct{}
}

func newCluster(t testing.TB, url string, n int, opts ...natstransport.Option) *cluster {
	c := &cluster{t: t}
	prefix := newPrefix()
	for range n {
		ch := make(chan struct{}, 1)
		hook := natstransport.WithNoticeHook(func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		})
		c.procs = append(c.procs, newTransport(t, url, prefix, append([]natstransport.Option{hook}, opts...)...))
		c.noticed = append(c.noticed, ch)
	}
	return c
}

func (c *cluster) place(ep int) int {
	if ep < 0 {
		return (-ep - 1) % len(c.procs)
	}
	return ep % len(c.procs)
}

// Register registers ep in its process and, as Unregister, waits until no other
// process still refuses it as gone (an endpoint registered again).
func (c *cluster) Register(ep int) (transport.Inbox, error) {
	p := c.place(ep)
	in, err := c.procs[p].Register(ep)
	if err == nil {
		c.await(p, ep, "registered again", func(tr *natstransport.Transport) bool { return !tr.KnowsGone(ep) })
	}
	return in, err
}

func (c *cluster) Unregister(ep int) {
	p := c.place(ep)
	c.procs[p].Unregister(ep)
	c.await(p, ep, "unregistered", func(tr *natstransport.Transport) bool { return tr.KnowsGone(ep) })
}

// await waits until every process but p knows what p said of ep.
func (c *cluster) await(p, ep int, what string, knows func(*natstransport.Transport) bool) {
	deadline := time.NewTimer(transporttest.Timeout)
	defer deadline.Stop()
	for i, tr := range c.procs {
		for i != p && !knows(tr) {
			select {
			case <-c.noticed[i]:
			case <-deadline.C:
				c.t.Fatalf("process %d never heard that endpoint %d was %s", i, ep, what)
			}
		}
	}
}

func (c *cluster) Send(m *transport.Message) error { return c.procs[c.place(m.From)].Send(m) }

func (c *cluster) Features() transport.Features { return c.procs[0].Features() }

func (c *cluster) Stats() transport.Stats {
	var s transport.Stats
	var last []string
	for _, tr := range c.procs {
		ps := tr.Stats()
		s.Sent += ps.Sent
		s.Delivered += ps.Delivered
		s.Dropped += ps.Dropped
		s.Errors += ps.Errors
		if ps.LastError != "" {
			last = append(last, ps.LastError)
		}
	}
	s.LastError = strings.Join(last, "; ")
	return s
}

func (c *cluster) Close() error {
	var errs []error
	for _, tr := range c.procs {
		errs = append(errs, tr.Close())
	}
	return errors.Join(errs...)
}
