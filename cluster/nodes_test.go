package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/internal/waitfor"
)

// runNodes starts an in-process JetStream cluster of n servers on loopback, each
// routed to all (a JetStream cluster needs its routes configured: the ports are
// reserved first), each with its own store, shut down when the test ends. It
// returns them and their client URLs, joined.
func runNodes(t *testing.T, n int) ([]*server.Server, string) {
	t.Helper()
	var routes []*url.URL
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: l.Addr().String()})
		l.Close()
	}
	var nodes []*server.Server
	var urls []string
	for i := range n {
		nodes = append(nodes, runServer(t, func(o *server.Options) {
			o.ServerName = fmt.Sprintf("n%d", i+1)
			o.Cluster = server.ClusterOpts{Name: "gale-test", Host: "127.0.0.1", Port: ports[i]}
			o.Routes = routes
		}))
		urls = append(urls, nodes[i].ClientURL())
	}
	return nodes, strings.Join(urls, ",")
}

// openWhenReady opens the store once the JetStream cluster has a meta leader and
// every peer (creating a bucket of 3 replicas fails until then).
func openWhenReady(t *testing.T, url string, cfg Config) *Store {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	// Polling the cluster's readiness: there is no event to wait on.
	var s *Store
	waitfor.Until(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if s, err = Open(ctx, js, cfg); err != nil {
			return fmt.Errorf("JetStream cluster not ready: %w", err)
		}
		return nil
	})
	return s
}

// On a three-node JetStream cluster with every bucket replicated three times, the
// scheduler keeps working when the node leading the assignments bucket is shut
// down: a worker lost afterwards is reassigned.
func TestSchedulerOnThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster takes seconds")
	}
	start := time.Now()
	nodes, urls := runNodes(t, 3)
	prefix := newPrefix()
	cfg := Config{Prefix: prefix, Replicas: 3, HeartbeatTTL: 2 * time.Second, LeaseTTL: 2 * time.Second}
	client := openWhenReady(t, urls, cfg)
	ready := time.Since(start)
	// Two candidates; either may be elected, and both tell one log.
	ev := newEvents("s1/s2")
	for _, name := range []string{"s1", "s2"} {
		sc, err := openStore(t, urls, cfg).NewScheduler(SchedulerConfig{Name: name, OnEvent: ev.on})
		if err != nil {
			t.Fatal(err)
		}
		goRun(t, sc.Run)
	}
	workers := map[string]*worker{}
	for _, w := range []string{"w1", "w2", "w3"} {
		workers[w] = startWorkerWith(t, urls, cfg, w, 1)
	}
	waitWorkers(t, ev, 3)
	ctx := ctxT(t, 60*time.Second)
	rec, err := client.Submit(ctx, wcSpec(t, "wc", 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []jetstream.KeyValue{client.workers, client.lease, client.topologies, client.assignments} {
		if st, err := kv.Status(ctx); err != nil || st.Config().Replicas != 3 {
			t.Fatalf("bucket %s: %v", kv.Bucket(), err)
		}
	}

	// Shut down the node leading the assignments bucket: its leadership moves.
	stream := "KV_" + prefix + "-assignments"
	down := slices.IndexFunc(nodes, func(s *server.Server) bool { return s.JetStreamIsStreamLeader("$G", stream) })
	if down < 0 {
		t.Fatalf("no node leads %s", stream)
	}
	shut := time.Now()
	nodes[down].Shutdown()
	nodes[down].WaitForShutdown()

	// A worker of wc lost now is still reassigned, to the spare.
	lost := rec.Assignment.Workers[1]
	workers[lost].cut()
	rewatched := 0
	w := ev.wait(t, 30*time.Second, "reassignment of "+lost+"'s tasks", func(e Event) bool {
		if e.Kind == Rewatched {
			rewatched++
		}
		return e.Kind == Wrote && e.Topology == "wc" && e.Record.Error == "" && len(e.Record.Assignment.Workers) == 2 && !slices.Contains(e.Record.Assignment.Workers, lost)
	})
	if w.Record.Generation() <= rec.Generation() || len(w.Record.Assignment.Of) != 6 {
		t.Errorf("after node n%d and %s were lost: %+v", down+1, lost, w.Record.Assignment)
	}
	t.Logf("cluster ready in %v; node n%d (leading the assignments) shut down, then %s cut off: reassigned (generation %d on %v) %v after the shutdown (watches made again %d times)",
		ready.Round(time.Millisecond), down+1, lost, w.Record.Generation(), w.Record.Assignment.Workers, time.Since(shut).Round(time.Millisecond), rewatched)
}
