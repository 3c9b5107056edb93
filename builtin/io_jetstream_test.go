package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natsjs "github.com/gale-stream/gale/connect/jetstream"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

// ioJetStream starts an embedded JetStream server with stream name capturing
// subject, and returns its URL and a JetStream context on it.
func ioJetStream(t *testing.T, stream, subject string) (string, jetstream.JetStream) {
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

// ioBookLines are the first n non-blank lines of Persuasion (testdata/books/105.txt).
func ioBookLines(t *testing.T, n int) []string {
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
	url, js := ioJetStream(t, "LINES", "lines.in")
	t.Setenv("GALE_IO_TEST_NATS", url)
	lines := ioBookLines(t, 400)
	for _, l := range lines {
		if _, err := js.Publish(context.Background(), "lines.in", []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	out := &ioBuffer{}
	old := ioStdout
	ioStdout = out
	t.Cleanup(func() { ioStdout = old })

	b := ioBuild(t, t.TempDir(), `name: jetstream-spout
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
`, ioRegistry(t, nil, 0))
	_, stop := ioStart(t, b)
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
	ioCheckLines(t, "stdout", got, want)
}

// TestJetStreamSinkFromOrders publishes 300 retail lines, each emitted twice (a
// replay), with gale.sink.JetStream: the stream stores each once (Nats-Msg-Id,
// the event id), with its payload and a header from a field.
func TestJetStreamSinkFromOrders(t *testing.T) {
	url, js := ioJetStream(t, "ORDERS", "orders.out")
	lines := ioRetailLines(t, 300)
	ioRunToEnd(t, ioBuild(t, t.TempDir(), fmt.Sprintf(`name: jetstream-sink
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
`, url), ioRegistry(t, lines, 2)))

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
	byID := map[string]ioOrder{}
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

// TestGoTopologyJetStreamToSQL builds, in Go, a JetStreamSpout reading 300 lines
// of a book into an SQLSink (insert-once by stream sequence), with the URLs given
// as plain strings: the classes' Go values. Every line is one row, and the sink's
// counters say so.
func TestGoTopologyJetStreamToSQL(t *testing.T) {
	url, js := ioJetStream(t, "BOOK", "book.lines")
	lines := ioBookLines(t, 300)
	for _, l := range lines {
		if _, err := js.Publish(context.Background(), "book.lines", []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = 10 * time.Second
	cfg.MaxSpoutPending = 100
	src, err := NewJetStreamSpout(url, "BOOK", "go", cfg,
		natsjs.WithFields(natsjs.SequenceField("seq"), natsjs.TextField("line")), natsjs.WithFetch(64, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "book.db")
	snk, err := NewSQLSink(dbURL, sink.Table{Name: "book", Columns: []string{"seq", "line"}, Conflict: []string{"seq"}, Mode: sink.InsertOnce},
		WithCreate("CREATE TABLE IF NOT EXISTS book (seq BIGINT PRIMARY KEY, line TEXT NOT NULL)"), WithMessageTimeout(cfg.MessageTimeout))
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("lines", src.Spout, 1).Output(src.Fields()...)
	b.SetBolt("book", snk.Bolt, 2).ShuffleGrouping("lines").TickEvery(sink.DefaultBatchDelay)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 60*time.Second, func() error {
		if n := snk.Counters().Rows.Load(); n != uint64(len(lines)) {
			return fmt.Errorf("%d rows written, want %d", n, len(lines))
		}
		return nil
	})
	ioStopRuntime(t, rt)

	db, err := sink.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.SQL.Query(`SELECT seq, line FROM book ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	n := 0
	for rs.Next() {
		var seq int
		var line string
		if err := rs.Scan(&seq, &line); err != nil {
			t.Fatal(err)
		}
		if seq != n+1 || line != lines[n] {
			t.Errorf("row %d: (%d, %q), want (%d, %q)", n, seq, line, n+1, lines[n])
		}
		n++
	}
	if n != len(lines) {
		t.Errorf("%d rows, want %d", n, len(lines))
	}
}

// TestGoValuesRefuseSecretsInClear: the Go constructors apply the classes' rule.
func TestGoValuesRefuseSecretsInClear(t *testing.T) {
	cfg := topology.DefaultConfig()
	if _, err := NewJetStreamSpout("nats://gale:hunter2@127.0.0.1:4222", "S", "d", cfg); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("NewJetStreamSpout with a password: %v, want a refusal that does not echo it", err)
	}
	if _, err := NewJetStreamSink("nats://tok@127.0.0.1:4222", "s.out"); err == nil || strings.Contains(err.Error(), "tok@") {
		t.Errorf("NewJetStreamSink with a token: %v, want a refusal that does not echo it", err)
	}
	tb := sink.Table{Name: "t", Columns: []string{"a"}, Conflict: []string{"a"}, Mode: sink.InsertOnce}
	if _, err := NewSQLSink("postgres://gale:hunter2@db/gale", tb); !errors.Is(err, sink.ErrSecretInURL) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("NewSQLSink with a password: %v, want sink.ErrSecretInURL without it", err)
	}
	if _, err := NewSQLSink("env:GALE_DB", tb, WithCreate("CREATE TABLE u (a TEXT)")); err == nil || !strings.Contains(err.Error(), "creates table u, but the sink writes table t") {
		t.Errorf("NewSQLSink creating another table: %v", err)
	}
	if _, err := NewWriterSink(&bytes.Buffer{}, WithSync()); err == nil {
		t.Error("a writer sink with sync: built, want refused (sync is for a file)")
	}
}

func ioStopRuntime(t *testing.T, rt *engine.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	<-rt.Done()
}

// TestMissingReferenceStopsTheStart: a URL reference whose variable is not set in
// the process that runs the task stops the topology's start, with an error naming
// the variable, for a spout and a sink alike.
func TestMissingReferenceStopsTheStart(t *testing.T) {
	for _, c := range []struct{ name, doc string }{
		{"spout", `name: missing-ref
spouts:
  - id: lines
    className: gale.spout.JetStream
    properties:
      - {name: url, value: "env:GALE_IO_UNSET_NATS"}
      - {name: stream, value: LINES}
      - {name: durable, value: d}
bolts:
  - {id: print, className: gale.sink.Stdout}
streams:
  - {from: lines, to: print, grouping: {type: SHUFFLE}}
`},
		{"sink", `name: missing-ref
spouts:
  - {id: orders, className: test.Orders}
bolts:
  - id: out
    className: gale.sink.SQL
    properties:
      - {name: url, value: "env:GALE_IO_UNSET_NATS"}
      - {name: table, value: t}
      - {name: columns, value: [line_no]}
      - {name: conflict, value: [line_no]}
streams:
  - {from: orders, to: out, grouping: {type: SHUFFLE}}
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ioBuild(t, t.TempDir(), c.doc, ioRegistry(t, nil, 1))
			rt, err := engine.Start(context.Background(), b.Topology, b.Config)
			if err == nil {
				ioStopRuntime(t, rt)
				t.Fatal("started, want the start refused")
			}
			if !strings.Contains(err.Error(), "environment variable GALE_IO_UNSET_NATS is not set") {
				t.Errorf("start: %v, want it to name the unset variable", err)
			}
		})
	}
}

// Found by a breaker: a NATS URL given by reference whose server is down was
// echoed in the task's error with its token (nats://TOKEN@host: url.Redacted hides
// a password, not a user-only token), and a user name with its password.
func TestJetStreamConnectErrorHidesCredentials(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: the connect fails
	for _, u := range []string{"nats://s3cr3t-token@" + addr, "nats://gale:hunter2@" + addr, "nats://127.0.0.1:1,tls://s3cr3t-token@" + addr} {
		t.Setenv("GALE_TEST_NATS_SECRET_URL", u)
		_, _, err := connectNATS("env:GALE_TEST_NATS_SECRET_URL", "", "t")
		if err == nil {
			t.Fatalf("%s: connected", u)
		}
		for _, secret := range []string{"s3cr3t-token", "hunter2", "gale:"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error echoes %q: %v", secret, err)
			}
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("the error does not name the server %s: %v", addr, err)
		}
	}
}
