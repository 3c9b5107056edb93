package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog/jslog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// routeProxy forwards TCP connections from a loopback port to a NATS node's route
// listener; cut closes every connection it carries and refuses new ones until
// heal. One proxy per direction of a pair of nodes, so cutting a node's four
// isolates it from the other two both ways and leaves their link alone.
type routeProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newRouteProxy(t *testing.T) *routeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &routeProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *routeProxy) addr() string { return p.ln.Addr().String() }

// live is how many connections it carries.
func (p *routeProxy) live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

func (p *routeProxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *routeProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		target, cut := p.target, p.cut
		p.mu.Unlock()
		if cut || target == "" {
			in.Close()
			continue
		}
		out, err := net.DialTimeout("tcp", target, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialling
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			in.Close()
			out.Close()
			p.mu.Lock()
			delete(p.conns, in)
			delete(p.conns, out)
			p.mu.Unlock()
		}
		p.wg.Go(func() { pipe(out, in) })
		p.wg.Go(func() { pipe(in, out) })
	}
}

// cutAll closes every connection and refuses new ones.
func (p *routeProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *routeProxy) heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *routeProxy) close() {
	p.ln.Close()
	p.cutAll()
	p.wg.Wait()
}

// postPersisted posts one event at ack=persisted and returns the HTTP status and
// the answer (zero if the body is not one).
func postPersisted(t *testing.T, url string, ev event.Event) (int, ingest.Answer) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"event_id": ev.ID, "source": ev.Source, "type": ev.Type, "payload": json.RawMessage(ev.Payload)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/events?ack=persisted", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", ev.ID, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a ingest.Answer
	_ = json.Unmarshal(body, &a)
	return resp.StatusCode, a
}

// Issue 13 §3: gale serve --log jetstream --replicas 3 connected to node C only,
// C the stream's leader, then C cut off from A and B (its route connections, both
// ways): every event sent at ack=persisted answers FAILED_RETRYABLE (or a
// retryable 5xx) within a bound, never PERSISTED. After the heal the same events,
// resent, end PERSISTED then PROCESSED, each once in the stream and in the sink;
// the ones stored before the cut answer as duplicates.
//
// The nodes are embedded servers, not gale nats processes: a NATS node gossips
// its route address to the others, which dial it directly if they hear of it
// before their configured route connects, around the proxies; gale nats has no
// --cluster-advertise to point that gossip elsewhere, so here every node
// advertises an address where nothing listens and only the proxies connect.
func TestServeJetStreamMinorityPartition(t *testing.T) {
	dir := t.TempDir()
	const n = 3
	// proxies[i][j]: the address node i dials to reach node j.
	var proxies [n][n]*routeProxy
	for i := range n {
		for j := range n {
			if i != j {
				proxies[i][j] = newRouteProxy(t)
			}
		}
	}
	dead := freeAddr(t) // nothing listens: the gossiped address leads nowhere
	servers := make([]*server.Server, n)
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, "nats-route://"+proxies[i][j].addr())
			}
		}
		servers[i] = natstest.Run(t, natstest.JetStream(t, filepath.Join(dir, fmt.Sprintf("n%d", i+1))), func(o *server.Options) {
			o.ServerName = fmt.Sprintf("n%d", i+1)
			o.SyncAlways = true
			o.Cluster = server.ClusterOpts{Name: "partition", Host: "127.0.0.1", Port: -1, Advertise: dead, NoAdvertise: true}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		})
		for k := range n {
			if k != i {
				proxies[k][i].setTarget(servers[i].ClusterAddr().String())
			}
		}
	}
	const a, c = 0, 2 // the test's connection is on A; gale serve on C; C is cut off
	cutC := func(cut bool) {
		for k := range n {
			if k == c {
				continue
			}
			for _, p := range []*routeProxy{proxies[c][k], proxies[k][c]} {
				if cut {
					p.cutAll()
				} else {
					p.heal()
				}
			}
		}
	}

	nc := natstest.Connect(t, servers[a].ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The stream at R3 once the three nodes' JetStream is one (bounded).
	waitfor.Until(t, time.Minute, func() error {
		l, err := jslog.Open(context.Background(), jslog.Config{JS: js, Prefix: "gale", Replicas: 3, Timeout: time.Second, NoLease: true})
		if err != nil {
			return fmt.Errorf("the R3 stream on the three nodes: %w", err)
		}
		return l.Close()
	})

	srv := startServeChild(t, "serve", "--log", "jetstream", "--nats", servers[c].ClientURL(), "--nats-data", filepath.Join(dir, "none"),
		"--replicas", "3", "--nats-timeout", "2s", "--data", dir+"/data", "--addr", freeAddr(t), "--timeout", "5s", "--log-level", "warn")
	client := &ingest.Client{URL: srv.url}
	mk := func(prefix string, k int) []event.Event {
		var evs []event.Event
		for i := range k {
			evs = append(evs, event.Event{ID: fmt.Sprintf("%s-%d", prefix, i), Source: "t", Type: "t", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		}
		return evs
	}

	// 1. Before the cut: PERSISTED.
	before := mk("before", 20)
	as, code, err := client.Send(context.Background(), before, ingest.LevelPersisted, 0)
	if err != nil || len(as) != len(before) {
		t.Fatalf("before the cut: HTTP %d, %d answers, %v", code, len(as), err)
	}
	for _, x := range as {
		if x.Status != ingest.Persisted && x.Status != ingest.Processed {
			t.Fatalf("before the cut: %+v", x)
		}
	}

	// The stream's leader onto C: the minority then holds the leader, which stores
	// what it is sent but cannot have it replicated.
	stream, err := js.Stream(context.Background(), "gale-log")
	if err != nil {
		t.Fatal(err)
	}
	leader := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		si, err := stream.Info(ctx)
		if err != nil || si.Cluster == nil {
			return ""
		}
		return si.Cluster.Leader
	}
	cName := servers[c].Name()
	stepdowns := 0
	waitfor.Until(t, time.Minute, func() error {
		l := leader() // answered by the stream's leader: "" during an election
		if l == cName {
			return nil
		}
		if l != "" {
			stepdowns++
			_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.gale-log", []byte(`{"placement":{"preferred":"`+cName+`"}}`), 2*time.Second)
		}
		return fmt.Errorf("the stream's leader is %q, not %s, after %d step-downs", l, cName, stepdowns)
	})

	// Every link of C goes through the proxies (none around them): each pair's
	// route connections were dialled by one side or the other.
	for k := range n {
		if k != c && proxies[c][k].live()+proxies[k][c].live() == 0 {
			t.Fatalf("no route connection between %s and %s through the proxies", cName, servers[k].Name())
		}
	}

	// 2. C cut off: nothing answers PERSISTED, each answer in a bound; first with
	// C still the stream's leader, then once A and B elected another.
	cutC(true)
	t.Logf("%s (the stream's leader, gale serve's node) cut off", cName)
	cutStart := time.Now()
	during := mk("during", 12)
	const bound = 15 * time.Second  // --nats-timeout 2s: a lookup and a publish, and slack
	for _, ev := range during[:4] { // one at a time
		start := time.Now()
		code, x := postPersisted(t, srv.url, ev)
		took := time.Since(start)
		if x.Status == ingest.Persisted || x.Status == ingest.Processed || code/100 == 2 {
			t.Errorf("cut off: %s answered HTTP %d %+v: a false PERSISTED", ev.ID, code, x)
		}
		if !(code/100 == 5 || x.Status == ingest.FailedRetryable) || x.Status == ingest.FailedFinal {
			t.Errorf("cut off: %s answered HTTP %d %+v, want FAILED_RETRYABLE or a 5xx", ev.ID, code, x)
		}
		if took > bound {
			t.Errorf("cut off: %s answered after %v, want within %v", ev.ID, took, bound)
		}
		t.Logf("cut off: %s: HTTP %d %s in %v: %s", ev.ID, code, x.Status, took.Round(time.Millisecond), x.Error)
	}
	waitfor.Until(t, time.Minute, func() error { // A sees another leader: the cut is real, both ways
		if l := leader(); l == "" || l == cName {
			return fmt.Errorf("A and B elected no other leader in %v: %q", time.Since(cutStart).Round(time.Millisecond), l)
		}
		return nil
	})
	t.Logf("cut off: A and B elected %s the stream's leader after %v", leader(), time.Since(cutStart).Round(time.Millisecond))
	start := time.Now()
	as, code, err = client.Send(context.Background(), during[4:], ingest.LevelPersisted, 0) // a batch
	took := time.Since(start)
	if took > bound {
		t.Errorf("cut off: the batch answered after %v, want within %v", took, bound)
	}
	if err == nil && len(as) != len(during[4:]) {
		t.Fatalf("cut off: the batch: HTTP %d, %d answers", code, len(as))
	}
	for _, x := range as {
		if x.Status != ingest.FailedRetryable {
			t.Errorf("cut off: batch answer %+v (HTTP %d), want FAILED_RETRYABLE", x, code)
		}
	}
	if err != nil && code/100 != 5 {
		t.Errorf("cut off: the batch: HTTP %d %v, want a retryable 5xx", code, err)
	}
	t.Logf("cut off: the batch: HTTP %d in %v; C cut off for %v", code, took.Round(time.Millisecond), time.Since(cutStart).Round(time.Millisecond))

	// 3. Healed: the same events resent until PERSISTED (bounded), then PROCESSED.
	cutC(false)
	healed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	all := append(append([]event.Event{}, before...), during...)
	dup := map[string]bool{}
	seqs := map[string]uint64{}
	tries := 0
	pending := all
	err = waitfor.Err(ctx, 40*time.Second, func() error {
		tries++
		as, code, err := client.Send(ctx, pending, ingest.LevelPersisted, 0)
		if err != nil || len(as) != len(pending) {
			return fmt.Errorf("after the heal: %d events not PERSISTED after %d tries: %s ...: HTTP %d, %d answers, %v", len(pending), tries, pending[0].ID, code, len(as), err)
		}
		var again []event.Event
		for i, x := range as {
			switch x.Status {
			case ingest.Persisted, ingest.Processed:
				dup[x.EventID] = x.Duplicate
				seqs[x.EventID] = x.Seq
			case ingest.FailedRetryable:
				again = append(again, pending[i])
			default:
				t.Fatalf("after the heal: %+v", x)
			}
		}
		if pending = again; len(pending) > 0 {
			return fmt.Errorf("after the heal: %d events not PERSISTED after %d tries: %s ...", len(pending), tries, pending[0].ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range before {
		if !dup[ev.ID] {
			t.Errorf("after the heal: %s, PERSISTED before the cut, resent: not answered as a duplicate", ev.ID)
		}
	}
	ids := streamIDs(t, js, 3)
	for _, ev := range all {
		if ids[ev.ID] != 1 {
			t.Errorf("%s: %d records in the stream, want 1", ev.ID, ids[ev.ID])
		}
	}
	var dupDuring []string
	for _, ev := range during {
		if dup[ev.ID] {
			dupDuring = append(dupDuring, fmt.Sprintf("%s (seq %d)", ev.ID, seqs[ev.ID]))
		}
	}
	if len(ids) != len(all) {
		t.Errorf("the stream holds %d ids, want %d", len(ids), len(all))
	}
	// A record C stored as the leader while cut off is not lost with the answer: a
	// later leader may commit it (C's log was the longest), then the resend finds it.
	t.Logf("after the heal (%d sends, %v): of the %d events sent while cut off, %d answered as duplicates: %v",
		tries, time.Since(healed).Round(time.Millisecond), len(during), len(dupDuring), dupDuring)
	allIDs := make([]string, len(all))
	for i, ev := range all {
		allIDs[i] = ev.ID
	}
	waitProcessed(t, ctx, 40*time.Second, client, allIDs, nil)
	stopServe(t, srv)
	if rows, distinct := eventRows(t, dir+"/data/sink.db"); rows != len(all) || distinct != len(all) {
		t.Errorf("sink: %d rows, %d ids; want %d each", rows, distinct, len(all))
	}
}
