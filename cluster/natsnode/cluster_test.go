package natsnode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/internal/waitfor"
)

// startCluster starts n nodes routed to each other on loopback, the first one's
// credentials copied to the others, and waits until JetStream's meta group has
// every node as a current peer.
func startCluster(t *testing.T, n int) []*natsnode.Node {
	t.Helper()
	ports := freePorts(t, n)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("127.0.0.1:%d", p))
	}
	var nodes []*natsnode.Node
	for i, p := range ports {
		cfg := natsnode.Config{ServerName: fmt.Sprintf("n%d", i), ClusterName: "test", ClusterPort: p, Routes: routes}
		if i > 0 {
			cfg.CredentialsFrom = nodes[0].CredentialsFile()
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	ready(t, nodes...)
	waitPeers(t, nodes, n)
	return nodes
}

// waitPeers waits (at most 60 s) until the meta leader sees want peers, every one
// current. There is no notification of it: the leader's state is polled.
func waitPeers(t *testing.T, nodes []*natsnode.Node, want int) {
	t.Helper()
	waitfor.Until(t, 60*time.Second, func() error {
		seen := "no meta leader"
		for _, n := range nodes {
			jsi, err := n.Server().Jsz(&server.JSzOptions{})
			if err != nil || jsi.Meta == nil || jsi.Meta.Leader != n.Name() {
				continue
			}
			current := 1 // the leader
			for _, p := range jsi.Meta.Replicas {
				if p.Current && !p.Offline {
					current++
				}
			}
			if current == want {
				return nil
			}
			seen = fmt.Sprintf("%d current peers with leader %s", current, n.Name())
		}
		return fmt.Errorf("the meta group did not reach %d current peers: %s", want, seen)
	})
}

// Three nodes routed on loopback: a KV bucket with 3 replicas survives the loss of
// the node leading its stream; writes and reads go on through the other two.
func TestClusterOfThree(t *testing.T) {
	nodes := startCluster(t, 3)
	byName := map[string]*natsnode.Node{}
	var urls []string
	for _, n := range nodes {
		byName[n.Name()] = n
		urls = append(urls, n.ClientURL())
		if !strings.HasPrefix(n.ClusterURL(), "nats-route://127.0.0.1:") {
			t.Errorf("%s: ClusterURL %q", n.Name(), n.ClusterURL())
		}
		if got := readFile(t, n.CredentialsFile()); got != readFile(t, nodes[0].CredentialsFile()) {
			t.Errorf("%s has other credentials than n0", n.Name())
		}
		if got := n.Server().NumRoutes(); got < 2 {
			t.Errorf("%s: %d routes, want the other two", n.Name(), got)
		}
	}
	ctx := ctxT(t, 120*time.Second)

	// Any node's client, with the (shared) credentials, sees the cluster's JetStream.
	nc := connect(t, strings.Join(urls, ","), nodes[0].DataDir())
	js, _ := jetstream.New(nc)
	// The meta leader may count a peer offline until that peer's first statistics
	// reach it, a moment after the meta group is current (CI once saw "no suitable
	// peers for placement, peer offline" here): the bucket is made once all three
	// take it.
	var kv jetstream.KeyValue
	if err := waitfor.Err(ctx, 30*time.Second, func() (err error) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "assignments", Replicas: 3, History: 5})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "task.1", []byte("w1 gen 1")); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_assignments")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream: replicas %d, cluster %+v: want a leader and two replicas", info.Config.Replicas, info.Cluster)
	}
	leader := byName[info.Cluster.Leader]
	if leader == nil {
		t.Fatalf("stream leader %q is none of the nodes", info.Cluster.Leader)
	}
	stop(leader)

	// Through each of the two nodes left: a write succeeds once the stream has a new
	// leader (retried until then), and the other node reads it.
	var left []*natsnode.Node
	for _, n := range nodes {
		if n != leader {
			left = append(left, n)
		}
	}
	for i, n := range left {
		c := connect(t, n.ClientURL(), n.DataDir())
		js, _ := jetstream.New(c)
		kv := bucketRetry(t, ctx, js, "assignments")
		val := fmt.Sprintf("w%d gen %d", i+2, i+2)
		rev := putRetry(t, ctx, kv, "task.1", val)
		if rev != uint64(i+2) {
			t.Errorf("put through %s: revision %d, want %d", n.Name(), rev, i+2)
		}
		reader := left[1-i]
		rc := connect(t, reader.ClientURL(), reader.DataDir())
		rjs, _ := jetstream.New(rc)
		rkv, err := rjs.KeyValue(ctx, "assignments")
		if err != nil {
			t.Fatal(err)
		}
		e, err := rkv.Get(ctx, "task.1")
		if err != nil {
			t.Fatalf("get through %s: %v", reader.Name(), err)
		}
		if string(e.Value()) != val || e.Revision() != rev {
			t.Errorf("get through %s: %q rev %d, want %q rev %d", reader.Name(), e.Value(), e.Revision(), val, rev)
		}
	}
	hist, err := kv.History(ctx, "task.1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range hist {
		got = append(got, string(e.Value()))
	}
	if strings.Join(got, "|") != "w1 gen 1|w2 gen 2|w3 gen 3" {
		t.Errorf("history %q", got)
	}
}

// bucketRetry opens the bucket until its stream answers, each attempt up to 2 s, for
// at most 2 minutes.
func bucketRetry(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) jetstream.KeyValue {
	t.Helper()
	var kv jetstream.KeyValue
	if err := waitfor.Err(ctx, 2*time.Minute, func() error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		if kv, err = js.KeyValue(actx, name); err != nil {
			t.Logf("bucket %s: %v (retrying)", name, err)
		}
		return err
	}); err != nil {
		t.Fatalf("bucket %s: %v", name, err)
	}
	return kv
}

// putRetry puts until the bucket's stream answers (a new leader is elected after the
// old one's node went down), each attempt up to 2 s, for at most 2 minutes.
func putRetry(t *testing.T, ctx context.Context, kv jetstream.KeyValue, key, val string) uint64 {
	t.Helper()
	var rev uint64
	if err := waitfor.Err(ctx, 2*time.Minute, func() error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		if rev, err = kv.Put(actx, key, []byte(val)); err != nil {
			t.Logf("put %s: %v (retrying)", key, err)
		}
		return err
	}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

// A node with other credentials cannot join: each refuses the other's routes. (The
// route counts are no test of it: the soliciting side registers a route for a
// moment before the refusal arrives.)
func TestRouteNeedsTheClusterCredentials(t *testing.T) {
	ports := freePorts(t, 2)
	routes := []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("nats-route://127.0.0.1:%d", ports[1])}
	alogs, blogs := newLogCapture(), newLogCapture()
	startNode(t, natsnode.Config{ServerName: "a", ClusterPort: ports[0], Routes: routes, Logger: alogs.Logger()})
	startNode(t, natsnode.Config{ServerName: "b", ClusterPort: ports[1], Routes: routes, Logger: blogs.Logger()}) // credentials of its own
	for _, l := range []*logCapture{alogs, blogs} {
		l.wait(t, "ERROR", "authentication error", `User "gale-route"`)
		l.wait(t, "ERROR", "Route Error 'Authorization Violation'")
	}
}
