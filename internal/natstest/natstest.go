// Package natstest starts embedded NATS servers and connections for tests: on a
// random loopback port, without logs, stopped when the test ends. One copy of what
// the tests of the transport, the cluster, the workers and word count's cluster
// mode all need.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Run starts an embedded NATS server on a random loopback port, without logs, with
// opts applied to its options, and shuts it down when the test ends.
func Run(t testing.TB, opts ...func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	for _, f := range opts {
		f(o)
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats server not ready in 10s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// JetStream enables JetStream with its store in dir (a new temporary directory if
// dir is "").
func JetStream(t testing.TB, dir string) func(*server.Options) {
	if dir == "" {
		dir = t.TempDir()
	}
	return func(o *server.Options) { o.JetStream, o.StoreDir = true, dir }
}

// Port listens on port (-1 or 0: a random one), to restart a server where it was.
func Port(port int) func(*server.Options) {
	if port == 0 {
		port = -1
	}
	return func(o *server.Options) { o.Port = port }
}

// Connect opens a connection to url (a comma-separated list for a cluster) that
// reconnects at once and for ever and keeps quiet about the errors a test causes (a
// server restarted under it), closed when the test ends. opts come after those.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	base := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond),
		nats.ReconnectJitter(0, 0), nats.NoCallbacksAfterClientClose(),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	nc, err := nats.Connect(url, append(base, opts...)...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
