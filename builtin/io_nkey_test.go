package builtin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
)

// gale nats lets in only the holder of its key: with nkey naming its gale.nk, the
// JetStream spout reads a book's lines from it and the JetStream sink writes them
// back to it, each line once; without nkey the spout's Open says the server
// refused it (a new user's first try of the classes against gale nats).
func TestJetStreamClassesWithGaleNATSKey(t *testing.T) {
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
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, subject := range map[string]string{"LINES": "lines.in", "COPY": "lines.copy"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	lines := ioBookLines(t, 200)
	for i, l := range lines {
		m := nats.NewMsg("lines.in")
		m.Header.Set("Line-Id", fmt.Sprintf("line-%d", i+1))
		m.Data = []byte(l)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	doc := func(nkey string) string {
		return fmt.Sprintf(`name: copy
config:
  topology.message.timeout.secs: 10
  topology.max.spout.pending: 100
spouts:
  - id: lines
    className: gale.spout.JetStream
    properties:
      - {name: url, value: %q}
      - {name: stream, value: LINES}
      - {name: durable, value: copy}
      - {name: fields, value: [event_id=header:Line-Id, data]}
      - {name: fetchWait, value: 50ms}%s
bolts:
  - id: out
    className: gale.sink.JetStream
    properties:
      - {name: url, value: %q}
      - {name: subject, value: lines.copy}
      - {name: eventIdField, value: event_id}%s
streams:
  - {from: lines, to: out, grouping: {type: SHUFFLE}}
`, node.ClientURL(), nkey, node.ClientURL(), nkey)
	}

	b := ioBuild(t, t.TempDir(), doc(""), ioRegistry(t, nil, 0))
	if rt, err := engine.Start(ctx, b.Topology, b.Config); err == nil {
		_ = rt.Stop(ctx)
		t.Fatal("started without the node's key")
	} else if !strings.Contains(err.Error(), "gale.spout.JetStream: connect to NATS at "+node.ClientURL()) || !strings.Contains(err.Error(), "Authorization Violation") {
		t.Fatalf("Start without the key: %v", err)
	}

	key := fmt.Sprintf("\n      - {name: nkey, value: %q}", node.CredentialsFile())
	b = ioBuild(t, t.TempDir(), doc(key), ioRegistry(t, nil, 0))
	_, stop := ioStart(t, b)
	st, err := js.Stream(ctx, "COPY")
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 60*time.Second, func() error {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != uint64(len(lines)) {
			return fmt.Errorf("COPY holds %d messages, want %d", info.State.Msgs, len(lines))
		}
		return nil
	})
	stop()
	for i, l := range lines {
		m, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != l {
			t.Fatalf("copy %d: %q, want %q", i+1, m.Data, l)
		}
	}
}
