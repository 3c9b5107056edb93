package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/sink"
)

// Two gale serve processes share one JetStream log and one sink (issue 13 §3:
// any serve process takes in and answers for any event, one at a time holds the
// log spout). The first holds the lease; the 7,419 retail lines go to the second
// at ack=processed, which answers PROCESSED for what the first processed. Mid-way
// the first is kill -9'd: the second takes the log spout over at the committed
// offset once the lease expires, and every line ends PROCESSED, once in the sink
// and once in the stream.
func TestServeJetStreamTwoServesShareTheLog(t *testing.T) {
	dir := t.TempDir()
	node, err := natsnode.Start(context.Background(), natsnode.Config{DataDir: dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	sinkPath := dir + "/sink.db"
	serveArgs := func(name string) []string {
		return []string{"serve", "--log", "jetstream", "--nats", node.ClientURL(), "--nats-data", node.DataDir(),
			"--pipeline", "orders", "--data", dir + "/" + name, "--sink", sinkPath, "--addr", freeAddr(t),
			"--spout-lease-ttl", "2s", "--log-level", "warn"}
	}
	a := startServeChild(t, serveArgs("a")...)
	b := startServeChild(t, serveArgs("b")...)
	if !strings.Contains(a.stderr.String(), "holds the log spout's lease: it reads the log") {
		t.Fatalf("the first serve does not say it holds the lease:\n%s", a.stderr.String())
	}
	metric := func(c *child, name string) string {
		t.Helper()
		resp, err := http.Get(c.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		t.Fatalf("%s: no %s in /metrics", c.url, name)
		return ""
	}
	if ma, mb := metric(a, "gale_jslog_spout_lease_held"), metric(b, "gale_jslog_spout_lease_held"); ma != "1" || mb != "0" {
		t.Fatalf("gale_jslog_spout_lease_held: %s on the first, %s on the second; want 1 and 0", ma, mb)
	}
	aPid := fmt.Sprint(a.cmd.Process.Pid)
	if s := b.stderr.String(); !strings.Contains(s, "-"+aPid+" (") || !strings.Contains(s, "takes the spout over if the lease is free for 2s") {
		t.Fatalf("the second serve does not name the first as the lease's holder:\n%s", s)
	}

	nc, err := node.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leaseKV, err := js.KeyValue(context.Background(), "gale-loglease")
	if err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		e, err := leaseKV.Get(context.Background(), "spout")
		if err != nil {
			return ""
		}
		var l struct{ Holder string }
		_ = json.Unmarshal(e.Value(), &l)
		return l.Holder
	}
	db, err := sink.Open(context.Background(), sinkPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func() (n, distinct int) {
		_ = db.SQL.QueryRow("SELECT count(*), count(DISTINCT event_id) FROM order_lines").Scan(&n, &distinct)
		return
	}

	in, err := openInputs(retailFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		rep *ingestReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := runIngest(ctx, &ingest.Client{URL: b.url}, in, defaultIngestOptions(), newIngestProgress(nil, ""))
		done <- result{rep, err}
	}()
	// kill -9 the holder once it has processed a fair part (bounded wait).
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if n, _ := rows(); n >= 2000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first serve processed %d lines in 2 minutes", func() int { n, _ := rows(); return n }())
		}
	}
	if h := holder(); !strings.Contains(h, "-"+aPid+" (") {
		t.Fatalf("lease holder %q before the kill, want the first serve (pid %s)", h, aPid)
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	killedAt, _ := rows()
	killed := time.Now()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Sent != 7419 || r.rep.Final["PROCESSED"] != 7419 || len(r.rep.Final) != 1 || r.rep.bad() != 0 {
		t.Fatalf("report %+v", r.rep)
	}
	if h, bPid := holder(), fmt.Sprint(b.cmd.Process.Pid); !strings.Contains(h, "-"+bPid+" (") {
		t.Fatalf("lease holder %q after the kill, want the second serve (pid %s)", h, bPid)
	}
	if mb := metric(b, "gale_jslog_spout_lease_held"); mb != "1" {
		t.Errorf("gale_jslog_spout_lease_held %s on the second after the takeover, want 1", mb)
	}
	if n, distinct := rows(); n != 7419 || distinct != 7419 {
		t.Errorf("order_lines: %d rows, %d ids; want 7,419 each (%d when the first serve was killed)", n, distinct, killedAt)
	}
	t.Logf("the first serve was killed at %d rows; the ingest ended %v later", killedAt, time.Since(killed).Round(time.Millisecond))
	stopServe(t, b)
	ids := streamIDs(t, js, 1)
	if len(ids) != 7419 {
		t.Errorf("the stream holds %d ids, want 7,419", len(ids))
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
}
