package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog/jslog"
)

// jsCluster is three embedded NATS nodes (cluster/natsnode: JetStream with
// sync_interval: always) routed to each other on loopback in this process, and
// one client connection to each. A row uses the connection to the node that leads
// its stream (see openLog).
type jsCluster struct {
	nodes []*natsnode.Node
	ncs   []*nats.Conn
	jss   []jetstream.JetStream
	n     int // streams made, for fresh names
}

// startJSCluster starts the three nodes under dir and waits until JetStream has a
// meta leader that every node follows.
func startJSCluster(ctx context.Context, dir string) (*jsCluster, error) {
	var ports []int
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	var routes []string
	for _, ln := range lns {
		routes = append(routes, ln.Addr().String())
		ln.Close()
	}
	c := &jsCluster{}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i, p := range ports {
		cfg := natsnode.Config{DataDir: filepath.Join(dir, fmt.Sprintf("nats-%d", i)), Port: -1,
			ServerName: fmt.Sprintf("bench-%d", i), ClusterName: "bench", ClusterPort: p, Routes: routes}
		if i > 0 {
			cfg.CredentialsFrom = c.nodes[0].CredentialsFile()
		}
		n, err := natsnode.Start(sctx, cfg)
		if err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.Ready(sctx); err != nil {
			c.close()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		nc, err := n.Connect(nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			c.close()
			return nil, err
		}
		c.ncs = append(c.ncs, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			c.close()
			return nil, err
		}
		c.jss = append(c.jss, js)
	}
	return c, nil
}

func (c *jsCluster) close() {
	for _, nc := range c.ncs {
		nc.Close()
	}
	for _, n := range c.nodes {
		n.Shutdown()
	}
	for _, n := range c.nodes {
		n.WaitForShutdown()
	}
}

// openLog opens a jslog.Log on a fresh stream of the given replicas, through the
// connection to the node that leads the stream, and returns that node's JetStream
// context and name. Where the leader sits against the client's node changes the
// rate a lot (a publish to a leader elsewhere crosses a route both ways), and a
// fresh stream's leader is any node: so every row's client is on its stream
// leader's node, the same for a raw row and the log row it is compared with.
// Right after the cluster forms, a stream of 3 replicas may not find its peers
// yet: creation is retried for a while.
func (c *jsCluster) openLog(ctx context.Context, replicas int) (*jslog.Log, jetstream.JetStream, string, error) {
	c.n++
	prefix := fmt.Sprintf("bench%dr%d", c.n, replicas)
	cfg := jslog.Config{JS: c.jss[0], Prefix: prefix, Replicas: replicas,
		Durability: fmt.Sprintf("replicated:%d+fsync", replicas)}
	deadline := time.Now().Add(30 * time.Second)
	var l *jslog.Log
	for {
		var err error
		l, err = jslog.Open(ctx, cfg)
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, nil, "", err
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		info, err := l.Stream().Info(ctx)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			for i, n := range c.nodes {
				if n.Name() != info.Cluster.Leader {
					continue
				}
				if i == 0 {
					return l, c.jss[0], n.Name(), nil
				}
				_ = l.Close()
				cfg.JS = c.jss[i]
				if l, err = jslog.Open(ctx, cfg); err != nil {
					return nil, nil, "", err
				}
				return l, c.jss[i], n.Name(), nil
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.drop(l)
			return nil, nil, "", fmt.Errorf("bench: no leader for stream %s: %v", l.Name(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// drop closes l and deletes its stream and bucket (their files).
func (c *jsCluster) drop(l *jslog.Log) {
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.jss[0].DeleteStream(ctx, l.Name())
	_ = c.jss[0].DeleteKeyValue(ctx, l.Name()+"docs")
}

// jsLogRow is the single-event HTTP row on the JetStream log (gale serve --log
// jetstream) at the given replicas.
func jsLogRow(ctx context.Context, o IngestOptions, c *jsCluster, replicas int) (Row, error) {
	l, _, leader, err := c.openLog(ctx, replicas)
	if err != nil {
		return Row{}, err
	}
	defer c.drop(l)
	r, err := serveRow(ctx, o, false, l)
	if r.Name != "" {
		r.Name += ", client on the stream leader " + leader
	}
	return r, err
}

// rawJSRow publishes what the JetStream log stores, with no HTTP and no ingest
// service: o.Clients publishers each send one record (the events' encoded records,
// fresh ids) to its id's subject on a stream made as the log makes it, with the
// log's headers (expected stream, expected last subject sequence 0), and wait for
// its PubAck before the next. The ceiling of the log's row at the same replicas.
func rawJSRow(ctx context.Context, o IngestOptions, c *jsCluster, replicas int) (Row, error) {
	l, js, leader, err := c.openLog(ctx, replicas) // the log's stream, as it configures it
	if err != nil {
		return Row{}, err
	}
	defer c.drop(l)
	subj := l.Stream().CachedInfo().Config.Subjects[0]
	subj = subj[:len(subj)-1] // PREFIX.log.
	row := Row{Name: fmt.Sprintf("raw JetStream R%d (replicated:%d+fsync): sync publish per record, %d publishers, no HTTP, client on the stream leader %s", replicas, replicas, o.Clients, leader)}
	hists := make([]engine.Histogram, o.Clients)
	var n, errs atomic.Uint64
	var firstErr atomic.Pointer[error]
	stop := time.Now().Add(o.Duration)
	start := time.Now()
	var wg sync.WaitGroup
	for p := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := p
			for i := 0; ctx.Err() == nil && time.Now().Before(stop); i++ {
				e := o.Events[next%len(o.Events)]
				next += o.Clients
				e.ID = fmt.Sprintf("bench-raw-%d-%d", p, i)
				r := event.Record{ReceivedAt: time.Now().UnixNano(), Hash: e.Hash(), Event: e}
				m := nats.NewMsg(subj + base64.RawURLEncoding.EncodeToString([]byte(e.ID)))
				m.Data = r.Encode(nil)
				t0 := time.Now()
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := js.PublishMsg(pctx, m, jetstream.WithExpectStream(l.Name()), jetstream.WithExpectLastSequencePerSubject(0))
				cancel()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				hists[p].Record(int64(time.Since(t0)))
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	row.Elapsed = time.Since(start)
	row.Requests, row.Events, row.Errors = n.Load(), n.Load(), errs.Load()
	row.Latency = merge(hists)
	if p := firstErr.Load(); p != nil {
		return row, fmt.Errorf("bench: %s: %d failed publishes, the first: %w", row.Name, row.Errors, *p)
	}
	return row, ctx.Err()
}
