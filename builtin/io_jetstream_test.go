package builtin

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// jetStream starts an embedded JetStream server with stream name capturing
// subject, and returns its URL and a JetStream context on it.
func jetStream(t *testing.T, stream, subject string) (string, jetstream.JetStream) {
	t.Helper()
	s := natstest.Run(t, natstest.JetStream(t, ""))
	js, err := jetstream.New(natstest.Connect(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{subject}}); err != nil {
		t.Fatal(err)
	}
	return s.ClientURL(), js
}

// bookLines are the first n non-blank lines of Persuasion (testdata/books/105.txt).
func bookLines(t *testing.T, n int) []string {
	t.Helper()
	data, err := os.ReadFile("../testdata/books/105.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimRight(l, "\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
		if len(out) == n {
			return out
		}
	}
	t.Fatalf("the book has %d non-blank lines, want %d", len(out), n)
	return nil
}

// TestJetStreamSpoutToStdout publishes 400 lines of a book to a stream, reads
// them with gale.spout.JetStream (the URL by env: reference) into gale.sink.Stdout
// as tab-separated (stream sequence, line), and checks standard output line by
// line and that the durable consumer acked everything.
func TestJetStreamSpoutToStdout(t *testing.T) {
	url, js := jetStream(t, "LINES", "lines.in")
	t.Setenv("GALE_IO_TEST_NATS", url)
	lines := bookLines(t, 400)
	for _, l := range lines {
		if _, err := js.Publish(context.Background(), "lines.in", []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	out := &syncBuffer{}
	old := stdout
	stdout = out
	t.Cleanup(func() { stdout = old })

	b := build(t, t.TempDir(), `name: jetstream-spout
config:
  topology.message.timeout.secs: 10
  topology.max.spout.pending: 100
spouts:
  - id: lines
    className: gale.spout.JetStream
    properties:
      - {name: url, value: "env:GALE_IO_TEST_NATS"}
      - {name: stream, value: LINES}
      - {name: durable, value: io}
      - {name: fields, value: [seq, line=text]}
      - {name: fetchWait, value: 50ms}
bolts:
  - id: print
    className: gale.sink.Stdout
    properties:
      - {name: format, value: tsv}
streams:
  - {from: lines, to: print, grouping: {type: SHUFFLE}}
`, registry(t, nil, 0))
	_, stop := start(t, b)
	waitfor.Until(t, 60*time.Second, func() error {
		c, err := js.Consumer(context.Background(), "LINES", "io")
		if err != nil {
			return err
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("consumer io: %d pending, %d unacked; want 0, 0", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	stop()

	want := map[string]int{}
	for i, l := range lines {
		want[fmt.Sprintf("%d\t%s", i+1, tsvEscaper.Replace(l))]++
	}
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		got[l]++
	}
	checkLines(t, "stdout", got, want)
}

// TestJetStreamSinkFromOrders publishes 300 retail lines, each emitted twice (a
// replay), with gale.sink.JetStream: the stream stores each once (Nats-Msg-Id,
// the event id), with its payload and a header from a field.
func TestJetStreamSinkFromOrders(t *testing.T) {
	url, js := jetStream(t, "ORDERS", "orders.out")
	lines := retailLines(t, 300)
	runToEnd(t, build(t, t.TempDir(), fmt.Sprintf(`name: jetstream-sink
spouts:
  - {id: orders, className: test.Orders}
bolts:
  - id: out
    className: gale.sink.JetStream
    properties:
      - {name: url, value: %q}
      - {name: subject, value: orders.out}
      - {name: dataField, value: line}
      - {name: headers, value: [stock_code=Stock-Code]}
streams:
  - {from: orders, to: out, grouping: {type: SHUFFLE}}
`, url), registry(t, lines, 2)))

	st, err := js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(lines)) {
		t.Fatalf("the stream holds %d messages, want %d (each line once, its replay dropped)", info.State.Msgs, len(lines))
	}
	byID := map[string]orderLine{}
	for _, o := range lines {
		byID[fmt.Sprintf("retail-%d", o.lineNo)] = o
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		o, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("message %d: id %q is no line's, or a second copy", seq, id)
		case string(m.Data) != o.raw || m.Header.Get("Stock-Code") != o.stockCode:
			t.Errorf("message %d (%s): %q, Stock-Code %q; want %q, %q", seq, id, m.Data, m.Header.Get("Stock-Code"), o.raw, o.stockCode)
		}
		delete(byID, id)
	}
	if len(byID) > 0 {
		t.Errorf("%d lines not in the stream", len(byID))
	}
}
