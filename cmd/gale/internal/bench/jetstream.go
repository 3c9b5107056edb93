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
// one client connection to the first, shared by the JetStream rows.
type jsCluster struct {
	nodes []*natsnode.Node
	nc    *nats.Conn
	js    jetstream.JetStream
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
	var err error
	if c.nc, err = c.nodes[0].Connect(nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})); err != nil {
		c.close()
		return nil, err
	}
	if c.js, err = jetstream.New(c.nc); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *jsCluster) close() {
	if c.nc != nil {
		c.nc.Close()
	}
	for _, n := range c.nodes {
		n.Shutdown()
	}
	for _, n := range c.nodes {
		n.WaitForShutdown()
	}
}

// openLog opens a jslog.Log on a fresh stream of the given replicas. Right after
// the cluster forms, a stream of 3 replicas may not find its peers yet: creation
// is retried for a while.
func (c *jsCluster) openLog(ctx context.Context, replicas int) (*jslog.Log, error) {
	c.n++
	prefix := fmt.Sprintf("bench%dr%d", c.n, replicas)
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := jslog.Open(ctx, jslog.Config{JS: c.js, Prefix: prefix, Replicas: replicas,
			Durability: fmt.Sprintf("replicated:%d+fsync", replicas)})
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// drop closes l and deletes its stream and bucket (their files).
func (c *jsCluster) drop(l *jslog.Log) {
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.js.DeleteStream(ctx, l.Name())
	_ = c.js.DeleteKeyValue(ctx, l.Name()+"docs")
}

// jsLogRow is the single-event HTTP row on the JetStream log (gale serve --log
// jetstream) at the given replicas.
func jsLogRow(ctx context.Context, o IngestOptions, c *jsCluster, replicas int) (Row, error) {
	l, err := c.openLog(ctx, replicas)
	if err != nil {
		return Row{}, err
	}
	defer c.drop(l)
	return serveRow(ctx, o, false, l)
}

// rawJSRow publishes what the JetStream log stores, with no HTTP and no ingest
// service: o.Clients publishers each send one record (the events' encoded records,
// fresh ids) to its id's subject on a stream made as the log makes it, with the
// log's headers (expected stream, expected last subject sequence 0), and wait for
// its PubAck before the next. The ceiling of the log's row at the same replicas.
func rawJSRow(ctx context.Context, o IngestOptions, c *jsCluster, replicas int) (Row, error) {
	l, err := c.openLog(ctx, replicas) // the log's stream, as it configures it
	if err != nil {
		return Row{}, err
	}
	defer c.drop(l)
	subj := l.Stream().CachedInfo().Config.Subjects[0]
	subj = subj[:len(subj)-1] // PREFIX.log.
	row := Row{Name: fmt.Sprintf("raw JetStream R%d (replicated:%d+fsync): sync publish per record, %d publishers, no HTTP", replicas, replicas, o.Clients)}
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
				_, err := c.js.PublishMsg(pctx, m, jetstream.WithExpectStream(l.Name()), jetstream.WithExpectLastSequencePerSubject(0))
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
