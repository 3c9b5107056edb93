package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/eventlog/jslog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// JetStream loses a record gale serve answered PERSISTED (nats-server#7549):
// gale serve --log jetstream refuses to be ready past it, naming the seq;
// gale log salvage --log jetstream records it lost; the restarted serve is
// ready, lists it at GET /v1/lost, and processes the rest.
func TestLogSalvageJetStream(t *testing.T) {
	dir := t.TempDir()
	node, err := natsnode.Start(context.Background(), natsnode.Config{DataDir: dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	nc, err := node.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	l, err := jslog.Open(ctx, jslog.Config{JS: js, Prefix: "gale", NoLease: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		e := event.Event{ID: fmt.Sprintf("e%d", i), Source: "t", Type: "t", Payload: []byte(`{}`)}
		if err := l.Append(ctx, &event.Record{ReceivedAt: time.Now().UnixNano(), Hash: e.Hash(), Event: e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Apply(&eventlog.Write{}); err != nil || l.Mark() != 6 {
		t.Fatalf("mark %d: %v", l.Mark(), err)
	}
	if err := l.Stream().DeleteMsg(ctx, 4); err != nil { // the loss
		t.Fatal(err)
	}
	_ = l.Close()

	args := []string{"serve", "--log", "jetstream", "--nats", node.ClientURL(), "--nats-data", node.DataDir(),
		"--data", dir + "/data", "--addr", freeAddr(t), "--log-level", "error"}
	// Not startServeChild: it waits for /readyz to say 200, which it may never.
	c := spawnChild(t, args...)
	defer func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	}()
	var gap *readyzError
	waitfor.Until(t, 30*time.Second, func() error {
		if err := readyz(c.url); !errors.As(err, &gap) || gap.code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz has not reported the gap: %v", err)
		}
		return nil
	})
	if !strings.Contains(gap.body, "seqs 4..4") {
		t.Fatalf("/readyz: %s", gap.body)
	}
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var m bytes.Buffer
	_, _ = m.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(m.String(), "\ngale_jslog_gap 1\n") || !strings.Contains(m.String(), "\ngale_jslog_high_water_mark 6\n") {
		t.Fatalf("/metrics does not show the gap and the mark:\n%s", m.String())
	}
	stopServe(t, c)

	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"log", "salvage", "--log", "jetstream", "--nats", node.ClientURL(), "--nats-data", node.DataDir()})
	if err := root.Execute(); err != nil {
		t.Fatalf("gale log salvage: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "lost: seqs 4..4 (1 events") {
		t.Fatalf("gale log salvage said:\n%s", out.String())
	}

	c2 := startServeChild(t, args...)
	resp, err = http.Get(c2.url + "/v1/lost")
	if err != nil {
		t.Fatal(err)
	}
	var lost struct {
		Lost []eventlog.LostRange `json:"lost"`
	}
	err = json.NewDecoder(resp.Body).Decode(&lost)
	resp.Body.Close()
	if err != nil || len(lost.Lost) != 1 || lost.Lost[0].From != 4 || lost.Lost[0].To != 4 {
		t.Fatalf("/v1/lost: %+v %v", lost, err)
	}
	// Past the gap: processed.
	waitProcessed(t, context.Background(), time.Minute, &ingest.Client{URL: c2.url}, []string{"e5", "e6"}, nil)
	stopServe(t, c2)
}
