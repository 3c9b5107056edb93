package jslog

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// cluster3 starts three JetStream servers routed on loopback and returns their
// client URLs, comma-separated, once a stream of three replicas can be made.
func cluster3(t *testing.T) string {
	t.Helper()
	var ports []int
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var urls []string
	for i, p := range ports {
		s := natstest.Run(t, natstest.JetStream(t, ""), func(o *server.Options) {
			o.ServerName = fmt.Sprintf("n%d", i)
			o.Cluster.Name, o.Cluster.Host, o.Cluster.Port = "t", "127.0.0.1", p
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		})
		urls = append(urls, s.ClientURL())
	}
	return strings.Join(urls, ",")
}

// A stream of three replicas stays at three when a tool that does not say how
// many (gale log salvage has no --replicas) or a serve process given another
// --replicas opens it: "an existing stream keeps its own" (Config.Replicas).
// Open updated the stream and the documents' bucket to the config it was given,
// so a salvage took a replicated log down to one copy.
func TestOpenKeepsTheReplicas(t *testing.T) {
	url := cluster3(t)
	js := openJS(t, url)
	ctx := context.Background()
	var l *Log
	waitfor.Until(t, 30*time.Second, func() (err error) { // the meta group forms
		if l, err = Open(ctx, Config{JS: js, Prefix: "t", Replicas: 3, Timeout: 5 * time.Second, LeaseTTL: time.Second}); err != nil {
			return fmt.Errorf("Open at 3 replicas: %w", err)
		}
		return nil
	})
	appendN(t, l, 1, 3)
	_ = l.Close()
	// A loaded machine's cluster may not answer every request at once: each
	// call is tried again for a while.
	again := func(what string, f func() error) {
		t.Helper()
		waitfor.Until(t, 30*time.Second, func() error {
			if err := f(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		})
	}
	replicas := func() (stream, docs int) {
		t.Helper()
		for _, name := range []string{"t-log", "KV_t-logdocs"} {
			var s jetstream.Stream
			again("stream "+name, func() (err error) {
				s, err = js.Stream(ctx, name)
				return err
			})
			n := s.CachedInfo().Config.Replicas
			if name == "t-log" {
				stream = n
			} else {
				docs = n
			}
		}
		return
	}
	again("salvage", func() error {
		_, err := Salvage(ctx, Config{JS: js, Prefix: "t", Timeout: 5 * time.Second}, false)
		return err
	})
	if s, d := replicas(); s != 3 || d != 3 {
		t.Fatalf("after a salvage: the stream has %d replicas, the documents' bucket %d; want 3 each", s, d)
	}
	again("Open at 1 replica", func() error {
		l2, err := Open(ctx, Config{JS: js, Prefix: "t", Replicas: 1, Timeout: 5 * time.Second, LeaseTTL: time.Second})
		if err == nil {
			_ = l2.Close()
		}
		return err
	})
	if s, d := replicas(); s != 3 || d != 3 {
		t.Fatalf("after an Open at 1 replica: the stream has %d replicas, the documents' bucket %d; want 3 each", s, d)
	}
	if _, err := js.KeyValue(ctx, "t-loglease"); err != nil {
		t.Fatal(err)
	}
}
