package natsnode_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/cluster/natsnode"
)

// startNode starts a node on a random loopback port (unless cfg names one) in
// t.TempDir() (unless cfg names a directory), shut down when the test ends.
func startNode(t testing.TB, cfg natsnode.Config) *natsnode.Node {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Port == 0 {
		cfg.Port = -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := natsnode.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Shutdown()
		n.WaitForShutdown()
	})
	return n
}

// stop shuts a node down and waits until it has stopped.
func stop(n *natsnode.Node) {
	n.Shutdown()
	n.WaitForShutdown()
}

// ready waits (at most 60 s) until JetStream can serve requests on every node.
func ready(t testing.TB, nodes ...*natsnode.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.Ready(ctx); err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
	}
}

// connect connects to url with the credentials of dataDir, closed when the test
// ends.
func connect(t testing.TB, url, dataDir string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	base := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond),
		nats.NoCallbacksAfterClientClose(),
		// Errors a test causes (a node shut down under the connection) are expected;
		// without a handler nats.go logs them.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	nc, err := natsnode.Connect(url, dataDir, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// freePorts returns n loopback ports that were free a moment ago (a cluster's
// nodes must know each other's route ports before any starts).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// logCapture is a slog handler that keeps every record's level and message, and lets
// a test wait for one.
type logCapture struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // a token after each record
}

func newLogCapture() *logCapture { return &logCapture{changed: make(chan struct{}, 1)} }

func (c *logCapture) Logger() *slog.Logger { return slog.New(c) }

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	c.mu.Lock()
	c.lines = append(c.lines, b.String())
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return nil
}

// find returns the first line that has every one of parts.
func (c *logCapture) find(parts ...string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
next:
	for _, l := range c.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		return l, true
	}
	return "", false
}

// wait waits (at most 30 s) for a line that has every one of parts.
func (c *logCapture) wait(t testing.TB, parts ...string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		if l, ok := c.find(parts...); ok {
			return l
		}
		select {
		case <-c.changed:
		case <-timeout:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("no log line with %q in 30s; the logs:\n%s", parts, strings.Join(c.lines, "\n"))
		}
	}
}
