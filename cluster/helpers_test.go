package cluster

import (
	"context"
	"fmt"
	"github.com/gale-stream/gale/internal/natstest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/internal/leaktest"
)

// TestMain fails the run if goroutines outlive the tests (servers, connections,
// watchers, heartbeats and schedulers are all stopped by the tests' cleanups).
func TestMain(m *testing.M) { leaktest.Main(m) }

// runServer starts an embedded NATS server with JetStream on a random loopback
// port, its store in a temporary directory, shut down when the test ends.
func runServer(t testing.TB, opts ...func(*server.Options)) *server.Server {
	t.Helper()
	return natstest.Run(t, append([]func(*server.Options){natstest.JetStream(t, "")}, opts...)...)
}

// connect opens a connection to url (a comma-separated list for a cluster) that
// reconnects at once and for ever, closed when the test ends.
func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, url)
}

var prefixes atomic.Int64

// newPrefix returns a bucket prefix no other test of this binary uses.
func newPrefix() string { return fmt.Sprintf("t%d", prefixes.Add(1)) }

// testTTL is the heartbeat and lease TTL of the tests: the server's minimum.
const testTTL = time.Second

// openStore opens the cluster's buckets on its own connection to url (as each
// worker process would), with TTLs of testTTL unless cfg says otherwise.
func openStore(t testing.TB, url string, cfg Config) *Store {
	t.Helper()
	s, _ := openStoreConn(t, url, cfg)
	return s
}

// openStoreConn is openStore, returning the connection too (closing it cuts the
// "process" off, as a crash or a partition would).
func openStoreConn(t testing.TB, url string, cfg Config) (*Store, *nats.Conn) {
	t.Helper()
	if cfg.HeartbeatTTL == 0 {
		cfg.HeartbeatTTL = testTTL
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = testTTL
	}
	nc := connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, nc
}

// goRun runs f in a goroutine until the test ends (or stop is called): then it
// cancels f's context and waits for it to return. f's error fails the test.
func goRun(t testing.TB, f func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var stopped atomic.Bool
	stop = func() {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// heartbeat starts worker name's heartbeat on store s until the test ends.
func heartbeat(t testing.TB, s *Store, name string, slots int) (*Heartbeat, func()) {
	t.Helper()
	h, err := s.NewHeartbeat(WorkerInfo{Name: name, Host: "127.0.0.1", PID: os.Getpid(), Started: time.Now(), Slots: slots, Module: "(test)"})
	if err != nil {
		t.Fatal(err)
	}
	return h, goRun(t, h.Run)
}

// ctxT returns a context ending after d, cancelled when the test ends.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
