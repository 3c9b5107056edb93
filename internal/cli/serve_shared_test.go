package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/ingest"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/sink"
)

// Two gale serve processes share one JetStream log and one sink (issue 13 §3:
// any serve process takes in and answers for any event, one at a time holds the
// log spout). The first holds the lease; a day of retail lines (ingestRetail) goes
// to the second at ack=processed, which answers PROCESSED for what the first processed. Mid-way
// the first is kill -9'd: the second takes the log spout over at the committed
// offset once the lease expires, and every line ends PROCESSED, once in the sink
// and once in the stream.
func TestServeJetStreamTwoServesShareTheLog(t *testing.T) {
	sr := startSharedServes(t, func(dir, _ string) string { return dir + "/sink.db" })
	a, b := sr.a, sr.b
	if !strings.Contains(a.stderr.String(), "holds the log spout's lease: it reads the log") {
		t.Fatalf("the first serve does not say it holds the lease:\n%s", a.stderr.String())
	}
	metric := func(c *child, name string) string {
		t.Helper()
		v, ok := metricOf(c.url, name+" ")
		if !ok {
			t.Fatalf("%s: no %s in /metrics", c.url, name)
		}
		return v
	}
	if ma, mb := metric(a, "gale_jslog_spout_lease_held"), metric(b, "gale_jslog_spout_lease_held"); ma != "1" || mb != "0" {
		t.Fatalf("gale_jslog_spout_lease_held: %s on the first, %s on the second; want 1 and 0", ma, mb)
	}
	aPid := fmt.Sprint(a.cmd.Process.Pid)
	if s := b.stderr.String(); !strings.Contains(s, "-"+aPid+" (") || !strings.Contains(s, "takes the spout over if the lease is free for 2s") {
		t.Fatalf("the second serve does not name the first as the lease's holder:\n%s", s)
	}
	db, err := sink.Open(context.Background(), sr.dir+"/sink.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func() (n, distinct int) {
		_ = db.SQL.QueryRow("SELECT count(*), count(DISTINCT event_id) FROM order_lines").Scan(&n, &distinct)
		return
	}
	// count is rows' first half, for the wait below: a count of DISTINCT every 20 ms
	// took 4 of the test's CPU seconds under -race.
	count := func() (n int) {
		_ = db.SQL.QueryRow("SELECT count(*) FROM order_lines").Scan(&n)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done, lines := ingestRetail(t, ctx, b.url)
	// kill -9 the holder once it has processed a fair part: 2,000 of the day's
	// 3,108 lines, 1,000 of the 1,500 under -race.
	killAt := 2000
	if raceEnabled {
		killAt = 1000
	}
	waitfor.Until(t, 2*time.Minute, func() error {
		if n := count(); n < killAt {
			return fmt.Errorf("the first serve has processed %d lines, waiting for %d", n, killAt)
		}
		return nil
	})
	if !sr.holds(a) {
		t.Fatalf("lease holder %q before the kill, want the first serve (pid %s)", sr.holder(), aPid)
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killedAt := count()
	killed := time.Now()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Sent != lines || r.rep.Final["PROCESSED"] != lines || len(r.rep.Final) != 1 || r.rep.Broken() != 0 {
		t.Fatalf("report %+v", r.rep)
	}
	if !sr.holds(b) {
		t.Fatalf("lease holder %q after the kill, want the second serve (pid %d)", sr.holder(), b.cmd.Process.Pid)
	}
	if mb := metric(b, "gale_jslog_spout_lease_held"); mb != "1" {
		t.Errorf("gale_jslog_spout_lease_held %s on the second after the takeover, want 1", mb)
	}
	if n, distinct := rows(); n != lines || distinct != lines {
		t.Errorf("order_lines: %d rows, %d ids; want %d each (%d when the first serve was killed)", n, distinct, lines, killedAt)
	}
	t.Logf("the first serve was killed at %d rows; the ingest ended %v later", killedAt, time.Since(killed).Round(time.Millisecond))
	stopServe(t, b)
	ids := streamIDs(t, sr.js, 1)
	if len(ids) != lines {
		t.Errorf("the stream holds %d ids, want %d", len(ids), lines)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
}

// sharedServes is one embedded node and two gale serve --log jetstream processes
// sharing its stream (orders pipeline, a 2 s lease), a started first so that it
// holds the lease.
type sharedServes struct {
	dir     string
	node    *natsnode.Node
	a, b    *child
	js      jetstream.JetStream
	leaseKV jetstream.KeyValue
}

// startSharedServes starts them; sinkOf gives each serve's --sink from the test's
// directory and the serve's name (a, b).
func startSharedServes(t *testing.T, sinkOf func(dir, name string) string) *sharedServes {
	t.Helper()
	r := &sharedServes{dir: t.TempDir()}
	var err error
	r.node, err = natsnode.Start(context.Background(), natsnode.Config{DataDir: r.dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.node.Shutdown(); r.node.WaitForShutdown() })
	args := func(name string) []string {
		return []string{"serve", "--log", "jetstream", "--nats", r.node.ClientURL(), "--nats-data", r.node.DataDir(),
			"--pipeline", "orders", "--data", r.dir + "/" + name, "--sink", sinkOf(r.dir, name), "--addr", freeAddr(t),
			"--spout-lease-ttl", "2s", "--log-level", "warn"}
	}
	r.a = startServeChild(t, args("a")...)
	r.b = startServeChild(t, args("b")...)
	nc, err := r.node.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if r.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if r.leaseKV, err = r.js.KeyValue(context.Background(), "gale-loglease"); err != nil {
		t.Fatal(err)
	}
	return r
}

// holder is the lease's holder as stored ("" if none).
func (r *sharedServes) holder() string {
	e, err := r.leaseKV.Get(context.Background(), "spout")
	if err != nil {
		return ""
	}
	var l struct{ Holder string }
	_ = json.Unmarshal(e.Value(), &l)
	return l.Holder
}

// holds reports whether the stored holder is the process c.
func (r *sharedServes) holds(c *child) bool {
	return strings.Contains(r.holder(), fmt.Sprintf("-%d (", c.cmd.Process.Pid))
}

type ingestResult struct {
	rep *ingest.Report
	err error
}

// ingestRetail sends a day of retail lines to url at ack=processed in the
// background, and returns how many it sends: retailDay (3,108), or under the race
// detector, whose two serves run several times slower and CPU-bound on CI's two
// cores, its first 1,500 lines (retailHead). The tests' faults strike at about
// the same share of it either way, with hundreds of lines to go.
func ingestRetail(t *testing.T, ctx context.Context, url string) (<-chan ingestResult, int) {
	t.Helper()
	day, lines := retailDay, retailDayLines
	if raceEnabled {
		day, lines = retailHead(t, retailDay, 1500), 1500
	}
	in, err := OpenInputs([]string{day})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan ingestResult, 1)
	go func() {
		rep, err := RunIngest(ctx, &ingest.Client{URL: url}, in, ingest.DefaultSendOptions(), NewIngestProgress(nil, ""))
		done <- ingestResult{rep, err}
	}()
	return done, lines
}
