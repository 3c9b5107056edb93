package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/pipelines/orders"
)

// TestHTTPRowsBehindAuthAndMetrics: the rows that measure what authentication and
// metrics cost really run behind them: every request carries the token the guard
// wants (no answer is an error), and the HTTP metrics counted each one.
func TestHTTPRowsBehindAuthAndMetrics(t *testing.T) {
	f, err := os.Open("../../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := orders.ReadCSV(f, "2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []IngestOptions{{}, {Auth: true}, {Metrics: true}, {Auth: true, Metrics: true}} {
		o.Dir, o.Events, o.Rows = t.TempDir(), evs[:200], []int{3, 4}
		o.Clients, o.BatchClients, o.BatchSize, o.Duration = 4, 2, 50, 200*time.Millisecond
		rows, err := Ingest(context.Background(), o)
		if err != nil {
			t.Fatalf("auth %v metrics %v: %v", o.Auth, o.Metrics, err)
		}
		for _, r := range rows {
			if r.Events == 0 || r.Errors != 0 {
				t.Errorf("%s: %d events, %d errors", r.Name, r.Events, r.Errors)
			}
			if o.Metrics && r.Counted != r.Requests {
				t.Errorf("%s: gale_http_requests_total counted %d of %d requests", r.Name, r.Counted, r.Requests)
			}
			if !o.Metrics && r.Counted != 0 {
				t.Errorf("%s: counted %d without metrics", r.Name, r.Counted)
			}
		}
	}
}

// The JetStream rows run on three embedded nodes: every publish and every answer
// is a success, and each log row is given as a fraction of its raw row.
func TestJetStreamRows(t *testing.T) {
	f, err := os.Open("../../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := orders.ReadCSV(f, "2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	o := IngestOptions{Dir: t.TempDir(), Events: evs[:200], Rows: []int{5, 6, 7, 8}, Clients: 4, Duration: 200 * time.Millisecond}
	rows, err := Ingest(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for _, r := range rows {
		if r.Events == 0 || r.Errors != 0 {
			t.Errorf("row %d %s: %d events, %d errors", r.Num, r.Name, r.Events, r.Errors)
		}
		if log := r.Num == 6 || r.Num == 8; log != (r.VsRaw > 0) || log && r.RawNum != r.Num-1 {
			t.Errorf("row %d: vs raw %v (row %d)", r.Num, r.VsRaw, r.RawNum)
		}
	}
}

// Every JetStream row's client is on the node that leads its stream, for R1 and
// R3 alike, so a raw row and the log row compared with it have the leader in the
// same place.
func TestOpenLogOnTheLeader(t *testing.T) {
	ctx := context.Background()
	c, err := startJSCluster(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for _, replicas := range []int{1, 3, 1, 3} {
		l, js, leader, err := c.openLog(ctx, replicas)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Stream().Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Cluster.Leader != leader || js.Conn().ConnectedServerName() != leader || l.Replicas() != replicas {
			t.Errorf("R%d: stream leader %s, row said %s, its client on %s, %d replicas", replicas,
				info.Cluster.Leader, leader, js.Conn().ConnectedServerName(), l.Replicas())
		}
		c.drop(l)
	}
}

// With --slices, each raw row and its log row run in turns: each row adds up its
// slices (every publish and answer a success, as many latencies as requests), and
// the log rows are still given as a fraction of the raw ones.
func TestJetStreamRowsInSlices(t *testing.T) {
	f, err := os.Open("../../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := orders.ReadCSV(f, "2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	o := IngestOptions{Dir: t.TempDir(), Events: evs[:200], Rows: []int{5, 6, 7, 8}, Clients: 4,
		Duration: 400 * time.Millisecond, Slices: 2}
	rows, err := Ingest(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i, r := range rows {
		if r.Num != i+5 || r.Events == 0 || r.Errors != 0 || r.Latency.Count() != r.Requests || !strings.HasSuffix(r.Name, "in 2 slices") {
			t.Errorf("row %d %s: %d events, %d requests, %d latencies, %d errors", r.Num, r.Name, r.Events, r.Requests, r.Latency.Count(), r.Errors)
		}
		if r.Elapsed < o.Duration {
			t.Errorf("row %d: elapsed %v, want its two slices of %v each", r.Num, r.Elapsed, o.Duration/2)
		}
		if log := r.Num == 6 || r.Num == 8; log != (r.VsRaw > 0) || log && r.RawNum != r.Num-1 {
			t.Errorf("row %d: vs raw %v (row %d)", r.Num, r.VsRaw, r.RawNum)
		}
	}
}
