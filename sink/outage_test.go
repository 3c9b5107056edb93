package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// newTestBoltCtx is newTestBolt with the Prepare context given.
func newTestBoltCtx(t *testing.T, ctx context.Context, opts Options) (*Bolt, *collector) {
	t.Helper()
	factory, err := NewBolt(opts)
	if err != nil {
		t.Fatal(err)
	}
	b := factory().(*Bolt)
	out := newCollector()
	if err := b.Prepare(ctx, topology.TaskContext{Component: "sink", TaskID: 3}, out); err != nil {
		t.Fatal(err)
	}
	return b, out
}

// bigRecord has a payload that takes new pages (overflow pages in SQLite).
func bigRecord(id string) *event.Record {
	return record(id, "", -1, `{"pad": "`+strings.Repeat("x", 5000)+`"}`)
}

// future is a tick time past any backoff of the tests (RetryMax at most an hour):
// the tick retries.
func future() *tuple.Tuple { return tickAt(time.Now().Add(24 * time.Hour)) }

// A SQLite database that fails as a whole (full, read-only, damaged, locked for
// longer than its busy timeout) is a sink outage, not the inputs' fault: no input is
// failed, the batch is held with what arrives meanwhile, the trees' timeouts are
// restarted, the Health says why (once, with one reported error), and where the
// cause goes away the next retry writes and acks every held input. On the code
// before this change every input was failed with the error ("database or disk is
// full") and charged an attempt.
func TestSQLiteOutagesHoldTheBatch(t *testing.T) {
	type scenario struct {
		name   string
		url    func(path string) string           // the sink's URL for the database file
		breaks func(t *testing.T, e *env, db *DB) // makes the database fail
		fix    func(t *testing.T, e *env, db *DB) // nil: it stays broken
		reason string                             // in Health.Err
	}
	var holder *sql.Tx // the "locked" scenario's other writer
	scenarios := []scenario{
		{
			name: "full", reason: "database or disk is full",
			breaks: func(t *testing.T, e *env, db *DB) {
				// max_page_count at the current size: a write that needs a page fails
				// with SQLITE_FULL, as on a full filesystem.
				var pages int
				if err := db.SQL.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
					t.Fatal(err)
				}
				if _, err := db.SQL.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
					t.Fatal(err)
				}
			},
			fix: func(t *testing.T, e *env, db *DB) {
				if _, err := db.SQL.Exec("PRAGMA max_page_count = 1000000"); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "read-only", reason: "readonly",
			url:    func(path string) string { return "file:" + path + "?mode=ro" },
			breaks: func(*testing.T, *env, *DB) {},
		},
		{
			name: "locked", reason: "database is locked",
			url: func(path string) string { return "sqlite:" + path + "?_busy_timeout=20" },
			breaks: func(t *testing.T, e *env, _ *DB) {
				var err error
				if holder, err = e.db.SQL.Begin(); err != nil { // BEGIN IMMEDIATE: the write lock
					t.Fatal(err)
				}
			},
			fix: func(t *testing.T, _ *env, _ *DB) {
				if err := holder.Commit(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "damaged", reason: "malformed",
			breaks: func(t *testing.T, e *env, db *DB) {
				// Garbage over every page but the header's: the tables' b-trees are gone
				// (what a failing disk leaves, §2 of issue 9).
				path := strings.TrimPrefix(e.url, "sqlite:")
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				fi, _ := f.Stat()
				if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", int(fi.Size())-4096)), 4096); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			e := newSQLiteEnv(t)
			e.createTables()
			// Some rows first, so the damaged scenario has pages to damage; the pool is
			// closed so that they reach the main database file.
			e.exec("INSERT INTO events VALUES ('old1', 's', 't', ?)", strings.Repeat("y", 9000))
			path := strings.TrimPrefix(e.url, "sqlite:")
			url := e.url
			if sc.url != nil {
				url = sc.url(path)
			}
			if sc.name == "damaged" {
				e.db.Close()
				sc.breaks(t, e, nil)
				e.db = e.open()
			}
			db := mustOpen(t, url)
			t.Cleanup(func() { db.Close() })
			if sc.name != "damaged" {
				sc.breaks(t, e, db)
			}
			c := &Counters{}
			opts := e.options(c)
			opts.DB = db
			opts.BatchRows = 2
			// Retries only when the test sends a tick from the future, however slow
			// the machine.
			opts.RetryMin, opts.RetryMax = time.Hour, time.Hour
			b, out := newTestBoltCtx(t, context.Background(), opts)
			changed := b.Health().Changed()
			b.Execute(ingestTuple(bigRecord("a")))
			b.Execute(ingestTuple(bigRecord("b"))) // the batch is full: written, and it fails
			select {
			case <-changed:
			default:
				t.Fatal("the Health did not change at the first sink-wide error")
			}
			b.Execute(ingestTuple(bigRecord("c")))
			b.Execute(ingestTuple(bigRecord("d"))) // full again: not written before its retry is due
			acked, failed, errs := out.state()
			eqList(t, "acked", acked, nil)
			eqList(t, "failed", failed, nil)
			if in, _ := b.Pending(); in != 4 {
				t.Errorf("holding %d inputs, want 4", in)
			}
			st := b.Health().State()
			herr := b.Health().Err()
			if st.Available || st.Outages != 1 || !errors.Is(herr, ErrUnavailable) || !strings.Contains(herr.Error(), sc.reason) {
				t.Errorf("health %+v, Err %v; want unavailable, one outage, naming %q", st, herr, sc.reason)
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), "not because of the inputs") || !strings.Contains(errs[0].Error(), sc.reason) {
				t.Errorf("reported %v, want one error naming the outage", errs)
			}
			eq(t, "a's timeout restarts", out.resets["a"], 1)
			b.flush() // as a stop's Drain: the retry is not due, so nothing is tried
			eq(t, "retries before one is due", c.Retries.Load(), 0)
			b.Execute(future()) // a retry; still failing
			_, failed, errs = out.state()
			eqList(t, "failed after a retry", failed, nil)
			eq(t, "errors reported after a retry", len(errs), 1)
			eq(t, "counters after a retry", c.Snapshot(), CountersSnapshot{Failures: 2, Outages: 1, Retries: 1})
			if sc.fix == nil {
				return
			}
			sc.fix(t, e, db)
			changed = b.Health().Changed()
			b.Execute(future())
			acked, failed, errs = out.state()
			eqList(t, "acked after the fix", acked, []string{"a", "b", "c", "d"})
			eqList(t, "failed after the fix", failed, nil)
			eq(t, "errors reported", len(errs), 1)
			<-changed
			if err := b.Health().Err(); err != nil {
				t.Errorf("health after the fix: %v", err)
			}
			eq(t, "events", e.count(e.db, "events", ""), 5)
			// Two transactions of BatchRows (2) rows each, the first a retry.
			eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 2, Rows: 4, Failures: 2, Outages: 1, Retries: 2})
		})
	}
}

// A row lock held past PostgreSQL's lock_timeout (SQLSTATE 55P03) is the database's
// state, not the input's: the batch is held, then written once the lock is gone.
// Also a closed pool, on both backends.
func TestLockTimeoutAndClosedDBAreOutages(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		if e.dialect == Postgres {
			t.Run("lock timeout", func(t *testing.T) {
				other := e.open()
				tx, err := other.SQL.Begin()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec("INSERT INTO events VALUES ('l1', 's', 't', '{}')"); err != nil {
					t.Fatal(err)
				}
				db := mustOpen(t, e.url+"&lock_timeout=50")
				defer db.Close()
				c := &Counters{}
				opts := e.options(c)
				opts.DB, opts.BatchRows = db, 1
				opts.RetryMin, opts.RetryMax = time.Hour, time.Hour
				b, out := newTestBolt(t, opts)
				b.Execute(ingestTuple(record("l1", "", -1, `{}`)))
				_, failed, _ := out.state()
				eqList(t, "failed", failed, nil)
				if err := b.Health().Err(); err == nil || !strings.Contains(err.Error(), "55P03") {
					t.Errorf("health %v, want the lock timeout", err)
				}
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
				b.Execute(future())
				acked, failed, _ := out.state()
				eqList(t, "acked", acked, []string{"l1"})
				eqList(t, "failed", failed, nil)
			})
		}
		t.Run("closed", func(t *testing.T) {
			c := &Counters{}
			opts := e.options(c)
			opts.DB = e.open()
			opts.BatchRows = 2
			b, out := newTestBolt(t, opts)
			opts.DB.Close()
			b.Execute(ingestTuple(record("x", "", -1, `{}`)))
			b.Execute(ingestTuple(record("y", "", -1, `{}`)))
			acked, failed, errs := out.state()
			eqList(t, "acked", acked, nil)
			eqList(t, "failed", failed, nil)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), "database is closed") {
				t.Errorf("reported %v, want one error saying the database is closed", errs)
			}
			if err := b.Health().Err(); err == nil || !strings.Contains(err.Error(), "database is closed") {
				t.Errorf("health %v", err)
			}
			eq(t, "counters", c.Snapshot(), CountersSnapshot{Failures: 1, Outages: 1})
		})
	})
}

// A stop (the bolt's context done) is nobody's fault: a full batch is not written,
// a write the stop interrupts is no error, and in both cases the inputs are neither
// acked nor failed; Cleanup drops them.
func TestStopNeitherAcksNorFails(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		t.Run("context done before the write", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			c := &Counters{}
			opts := e.options(c)
			opts.BatchRows = 2
			b, out := newTestBoltCtx(t, ctx, opts)
			cancel()
			b.Execute(ingestTuple(record("s1", "", -1, `{}`)))
			b.Execute(ingestTuple(record("s2", "", -1, `{}`)))
			b.Execute(future())
			acked, failed, errs := out.state()
			eqList(t, "acked", acked, nil)
			eqList(t, "failed", failed, nil)
			eq(t, "errors", len(errs), 0)
			if err := b.Cleanup(); !errors.Is(err, ErrDropped) {
				t.Errorf("Cleanup = %v, want ErrDropped", err)
			}
			eq(t, "counters", c.Snapshot(), CountersSnapshot{Dropped: 2})
			eq(t, "events", e.count(e.db, "events", ""), 0)
		})
		t.Run("context done during the write", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			c := &Counters{}
			opts := e.options(c)
			opts.BatchRows = 2
			opts.After = func(ctx context.Context, _ *sql.Tx, _ Dialect, _ []Row) error {
				cancel() // the stop comes while the transaction is open
				<-ctx.Done()
				return ctx.Err()
			}
			b, out := newTestBoltCtx(t, ctx, opts)
			b.Execute(ingestTuple(record("s3", "", -1, `{}`)))
			b.Execute(ingestTuple(record("s4", "", -1, `{}`)))
			acked, failed, errs := out.state()
			eqList(t, "acked", acked, nil)
			eqList(t, "failed", failed, nil)
			eq(t, "errors", len(errs), 0)
			if err := b.Health().Err(); err != nil {
				t.Errorf("a stop made the sink unavailable: %v", err)
			}
			eq(t, "counters", c.Snapshot(), CountersSnapshot{})
			eq(t, "events", e.count(e.db, "events", ""), 0)
		})
	})
}

// Errors are told apart by whose fault they are: the database's as a whole, or one
// input's rows.
func TestSinkWideClassification(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("row 3: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"connection reset", fmt.Errorf("commit: %w", syscall.ECONNRESET), true},
		{"unexpected EOF", fmt.Errorf("begin: %w", io.ErrUnexpectedEOF), true},
		{"deadline", fmt.Errorf("row 1: %w", context.DeadlineExceeded), true},
		{"conn closed", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"admin shutdown 57P01", pg("57P01"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"too many connections 53300", pg("53300"), true},
		{"disk full 53100", pg("53100"), true},
		{"read-only transaction 25006", pg("25006"), true},
		{"lock not available 55P03", pg("55P03"), true},
		{"deadlock 40P01", pg("40P01"), true},
		{"data corrupted XX001", pg("XX001"), true},
		{"undefined table 42P01", pg("42P01"), true},
		{"check violation 23514", pg("23514"), false},
		{"not null 23502", pg("23502"), false},
		{"value too long 22001", pg("22001"), false},
		{"invalid text 22P02", pg("22P02"), false},
		{"index row too big 54000", pg("54000"), false},
		{"trigger raise P0001", pg("P0001"), false},
		{"a hook's own error", errors.New("summary unavailable"), false},
	}
	for _, c := range cases {
		if got := sinkWide(c.err); got != c.want {
			t.Errorf("%s: sinkWide(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	// SQLite's, from the database itself.
	e := newSQLiteEnv(t)
	e.createTables()
	_, err := e.db.SQL.Exec("INSERT INTO amounts VALUES ('n', -1)")
	if err == nil || sinkWide(err) {
		t.Errorf("CHECK violation %v: sink-wide", err)
	}
	_, err = e.db.SQL.Exec("INSERT INTO nope VALUES (1)")
	if err == nil || !sinkWide(err) {
		t.Errorf("no such table %v: not sink-wide", err)
	}
	// A table of that name with other columns (a schema from something else): the
	// database's fault, not the row's; before, every event was dead-lettered.
	if _, err = e.db.SQL.Exec("CREATE TABLE other (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	_, err = e.db.SQL.Exec("INSERT INTO other (event_id) VALUES ('x')")
	if err == nil || !sinkWide(err) {
		t.Errorf("wrong schema %v: not sink-wide", err)
	}
}

// Through the real runtime with a message timeout shorter than the outage: the
// sink's retries restart the held trees' timeouts, so no tree fails, and every input
// is acked once the database has room again.
func TestRuntimeOutageKeepsTreesAlive(t *testing.T) {
	e := newSQLiteEnv(t)
	e.createTables()
	var pages int
	if err := e.db.SQL.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	e.exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages))
	var recs []*event.Record
	for i := range 20 {
		recs = append(recs, bigRecord(fmt.Sprintf("k%d", i)))
	}
	c := &Counters{}
	opts := e.options(c)
	opts.BatchRows = 4
	opts.RetryMin, opts.RetryMax = 10*time.Millisecond, 50*time.Millisecond
	opts.Health = NewHealth(nil)
	changed := opts.Health.Changed()
	o := newOutcomes()
	b := topology.NewBuilder()
	b.SetSpout("ingest", func() topology.Spout { return &recordSpout{records: recs, out: o, replay: true} }, 1).Output("event_id", "record")
	d, err := SetBolt(b, "sink", 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	d.ShuffleGrouping("ingest")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := quietConfig()
	cfg.MessageTimeout = 400 * time.Millisecond
	rt := startRuntime(t, topo, cfg)
	<-changed // the outage began
	// Longer than the message timeout: wait for retries worth of 3 timeouts.
	waitfor.True(t, 20*time.Second, "retries over three message timeouts", func() bool { return c.Retries.Load() >= 3*400/50+3 })
	_, fails := o.counts()
	eq(t, "fails during the outage", fails, 0)
	changed = opts.Health.Changed()
	e.exec("PRAGMA max_page_count = 1000000")
	<-changed // available again
	o.waitFor(t, "20 acks", func(a, f int) bool { return a == 20 })
	if err := stopTopology(t, rt, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	acks, fails := o.counts()
	eq(t, "acks", acks, 20)
	eq(t, "fails", fails, 0)
	eq(t, "events", e.count(e.db, "events", ""), 20)
	st := rt.Stats()
	eq(t, "misuse", st.MisuseTotal(), 0)
}

// startRuntime starts topo and stops it at the end of the test if the test did not.
func startRuntime(t *testing.T, topo *topology.Topology, cfg topology.Config) *engine.Runtime {
	t.Helper()
	rt, err := engine.Start(context.Background(), topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
		<-rt.Done()
	})
	return rt
}

// Options.GiveUpAfter (for gale sink rebuild, which no one repairs a database
// during): once an outage outlasted it, the task stops retrying, fails and acks
// nothing (the inputs are not at fault), and the Health's GaveUp channel closes
// with the database's error. Without it a rebuild into a damaged database retried
// forever (review finding E).
func TestGiveUpAfterEndsTheRetries(t *testing.T) {
	e := newSQLiteEnv(t)
	e.createTables()
	c := &Counters{}
	opts := e.options(c)
	opts.DB = e.open()
	opts.BatchRows = 1
	opts.GiveUpAfter = time.Nanosecond // the first retry is past it
	b, out := newTestBolt(t, opts)
	opts.DB.Close() // "database is closed": sink-wide
	b.Execute(ingestTuple(record("x", "", -1, `{}`)))
	select {
	case <-b.Health().GaveUp():
		t.Fatal("gave up at the first failure, before any retry")
	default:
	}
	b.Execute(future()) // the retry fails too: past GiveUpAfter
	select {
	case <-b.Health().GaveUp():
	default:
		t.Fatalf("did not give up after an outage past GiveUpAfter; counters %+v", c.Snapshot())
	}
	st := b.Health().State()
	if !errors.Is(st.GaveUp, ErrGaveUp) || !strings.Contains(st.GaveUp.Error(), "database is closed") || st.Available {
		t.Errorf("state %+v, want unavailable and GaveUp wrapping ErrGaveUp and the database's error", st)
	}
	b.Execute(future()) // no more writes once it gave up
	b.Execute(ingestTuple(record("y", "", -1, `{}`)))
	acked, failed, _ := out.state()
	eqList(t, "acked", acked, nil)
	eqList(t, "failed", failed, nil)
	eq(t, "counters", c.Snapshot(), CountersSnapshot{Failures: 2, Outages: 1, Retries: 1})
	if in, _ := b.Pending(); in != 2 {
		t.Errorf("%d inputs held, want 2", in)
	}
}

// Options.MessageTimeout keeps the sink's waits under the topology's message
// timeout (review finding F: a 10 s FlushTimeout under a 2 s timeout let a stalled
// database time trees out, charged, before it counted as an outage).
func TestMessageTimeoutBoundsTheSinksWaits(t *testing.T) {
	e := newSQLiteEnv(t)
	for _, c := range []struct {
		mt, flush, retryMax time.Duration // given
		wantFlush, wantMax  time.Duration
		err                 string
	}{
		{mt: 0, wantFlush: DefaultFlushTimeout, wantMax: DefaultRetryMax},
		{mt: time.Minute, wantFlush: DefaultFlushTimeout, wantMax: DefaultRetryMax},
		{mt: 2 * time.Second, wantFlush: 2 * time.Second / 3, wantMax: 2 * time.Second / 3},
		{mt: 2 * time.Second, flush: time.Second, retryMax: time.Second, wantFlush: time.Second, wantMax: time.Second},
		{mt: 2 * time.Second, flush: 2 * time.Second, err: "FlushTimeout 2s is not under MessageTimeout 2s"},
		{mt: 2 * time.Second, retryMax: 3 * time.Second, err: "RetryMax 3s is not under MessageTimeout 2s"},
		{mt: 100 * time.Millisecond, err: "MessageTimeout 100ms is below 300ms"},
	} {
		opts := e.options(nil)
		opts.MessageTimeout, opts.FlushTimeout, opts.RetryMax = c.mt, c.flush, c.retryMax
		cfg, err := compile(opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("MessageTimeout %v FlushTimeout %v RetryMax %v: %v, want %q", c.mt, c.flush, c.retryMax, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if cfg.FlushTimeout != c.wantFlush || cfg.RetryMax != c.wantMax || cfg.RetryMin > cfg.RetryMax {
			t.Errorf("MessageTimeout %v: FlushTimeout %v RetryMin %v RetryMax %v, want %v and %v", c.mt, cfg.FlushTimeout, cfg.RetryMin, cfg.RetryMax, c.wantFlush, c.wantMax)
		}
	}
}
