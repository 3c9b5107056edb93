package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/tuple"
)

// A repeated event id is written once; the copies are counted as duplicates, and the
// first payload stays.
func TestInsertOnceWritesARepeatedEventOnce(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 4
		b, out := newTestBolt(t, opts)
		for _, r := range []*event.Record{
			record("e1", "", -1, `{"n": 1}`),
			record("e2", "", -1, `{"n": 2}`),
			record("e1", "", -1, `{"n": 1, "retry": true}`),
			record("e3", "", -1, `{"n": 3}`),
		} {
			b.Execute(ingestTuple(r))
		}
		acked, failed, errs := out.state()
		eqList(t, "acked", acked, []string{"e1", "e2", "e1", "e3"})
		eqList(t, "failed", failed, nil)
		eq(t, "errors", len(errs), 0)
		eq(t, "rows in events", e.count(e.db, "events", ""), 3)
		var payload string
		if err := e.db.SQL.QueryRow("SELECT payload FROM events WHERE event_id = 'e1'").Scan(&payload); err != nil {
			t.Fatal(err)
		}
		eq(t, "payload of e1", payload, `{"n": 1}`)
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 1, Rows: 3, Duplicates: 1})

		// A replay in a later batch is a duplicate too.
		b.Execute(ingestTuple(record("e2", "", -1, `{"n": 2}`)))
		b.Execute(tickAt(time.Now().Add(time.Hour)))
		eq(t, "rows in events", e.count(e.db, "events", ""), 3)
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 2, Rows: 3, Duplicates: 2})
	})
}

// Versions of one key arriving in any order leave version 3's values, in one batch or
// one batch per version; rows not applied are counted as stale.
func TestVersionedUpsertKeepsTheNewestVersion(t *testing.T) {
	orders := []struct {
		versions       []int64
		written, stale uint64
	}{
		{[]int64{3, 1, 2}, 1, 2},
		{[]int64{1, 3, 2}, 2, 1},
		{[]int64{2, 3, 1}, 2, 1},
		{[]int64{1, 2, 3}, 3, 0},
		{[]int64{3, 3, 1}, 1, 2}, // the same version again is not newer
	}
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		for _, batchRows := range []int{6, 2} { // one batch (3 inputs × 2 rows), or one per input
			for i, o := range orders {
				key := fmt.Sprintf("k%d-%d", batchRows, i)
				t.Run(fmt.Sprintf("%v/batch%d", o.versions, batchRows), func(t *testing.T) {
					c := &Counters{}
					opts := e.options(c)
					opts.BatchRows = batchRows
					b, out := newTestBolt(t, opts)
					for j, v := range o.versions {
						id := fmt.Sprintf("%s-%d-v%d", key, j, v)
						b.Execute(ingestTuple(record(id, key, v, fmt.Sprintf(`{"v": %d}`, v))))
					}
					acked, failed, errs := out.state()
					eq(t, "acked", len(acked), 3)
					eq(t, "failed", len(failed), 0)
					eq(t, "errors", len(errs), 0)
					var version int64
					var payload string
					if err := e.db.SQL.QueryRow("SELECT version, payload FROM entities WHERE entity_key = "+e.dialect.Placeholder(1), key).Scan(&version, &payload); err != nil {
						t.Fatal(err)
					}
					eq(t, "version", version, 3)
					eq(t, "payload", payload, `{"v": 3}`)
					batches := uint64(1)
					if batchRows == 2 {
						batches = 3
					}
					// Each input also writes its own events row (3 rows).
					eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: batches, Rows: 3 + o.written, Stale: o.stale})
				})
			}
		}
	})
}

// A batch is written when it holds BatchRows rows, not before; an input whose rows
// take the batch past BatchRows is written with it at once.
func TestFlushBySize(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 3
		opts.BatchDelay = time.Hour
		b, out := newTestBolt(t, opts)
		b.Execute(ingestTuple(record("a", "", -1, `{}`)))
		b.Execute(ingestTuple(record("b", "", -1, `{}`)))
		acked, _, _ := out.state()
		eq(t, "acked after 2 rows", len(acked), 0)
		eq(t, "rows after 2 rows", e.count(e.db, "events", ""), 0)
		// Inputs and rows are held, and a tick before BatchDelay (an hour) writes nothing.
		b.Execute(tickAt(time.Now()))
		in, rows := b.Pending()
		eq(t, "pending inputs", in, 2)
		eq(t, "pending rows", rows, 2)
		b.Execute(ingestTuple(record("c", "", -1, `{}`)))
		acked, _, _ = out.state()
		eqList(t, "acked after 3 rows", acked, []string{"a", "b", "c"})
		eq(t, "rows after 3 rows", e.count(e.db, "events", ""), 3)
		// Two rows per input (events and amounts): the second input makes 4 >= 3.
		b.Execute(ingestTuple(record("d", "", -1, `{"amount": 1}`)))
		eq(t, "rows after d", e.count(e.db, "amounts", ""), 0)
		b.Execute(ingestTuple(record("e", "", -1, `{"amount": 2}`)))
		eq(t, "amounts after e", e.count(e.db, "amounts", ""), 2)
		acked, _, _ = out.state()
		eqList(t, "acked", acked, []string{"a", "b", "c", "d", "e"})
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 2, Rows: 7})
	})
}

// On a tick, a batch is written once its oldest input is BatchDelay old.
func TestFlushByDelayOnTick(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 1000
		opts.BatchDelay = time.Minute
		b, out := newTestBolt(t, opts)
		b.Execute(tickAt(time.Now().Add(time.Hour))) // an empty buffer: no transaction
		start := time.Now()
		b.Execute(ingestTuple(record("a", "", -1, `{}`)))
		b.Execute(ingestTuple(record("b", "", -1, `{}`)))
		b.Execute(tickAt(start.Add(30 * time.Second)))
		acked, _, _ := out.state()
		eq(t, "acked after a tick at half the delay", len(acked), 0)
		b.Execute(tickAt(time.Now().Add(time.Minute)))
		acked, _, _ = out.state()
		eqList(t, "acked after a tick past the delay", acked, []string{"a", "b"})
		eq(t, "rows", e.count(e.db, "events", ""), 2)
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 1, Rows: 2})
	})
}

// Through the real runtime with ticks (SetBolt): a small batch is written and acked
// within about two BatchDelays, although it never fills.
func TestRuntimeFlushesPartialBatchesOnTicks(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 1000
		opts.BatchDelay = 20 * time.Millisecond
		var recs []*event.Record
		for i := range 5 {
			recs = append(recs, record(fmt.Sprintf("t%d", i), "", -1, `{}`))
		}
		o := newOutcomes()
		rt := startTopology(t, &recordSpout{records: recs, out: o}, opts, 1, false)
		o.waitFor(t, "5 acks", func(a, f int) bool { return a == 5 })
		eq(t, "rows", e.count(e.db, "events", ""), 5)
		if err := stopTopology(t, rt, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		s := rt.Stats()
		eq(t, "ticks delivered > 0", s.Components["sink"].Ticks > 0, true)
		eq(t, "sink errors", s.Components["sink"].Errors, 0)
		eq(t, "misuse", s.MisuseTotal(), 0)
		eq(t, "counters", c.Snapshot().Rows, 5)
	})
}

// At the instant the bolt acks an input, the input's rows are visible to another
// connection: the ack follows COMMIT. (In the runtime, acks made during an Execute
// leave the task when it returns, so only a collector sees this exact order.)
func TestAckFollowsCommit(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		reader := e.open()
		opts := e.options(&Counters{})
		opts.BatchRows = 3
		b, out := newTestBolt(t, opts)
		var notVisible []string
		out.onAck = func(id string) {
			if e.count(reader, "events", "event_id = "+e.dialect.Placeholder(1), id) != 1 {
				notVisible = append(notVisible, id)
			}
		}
		for _, id := range []string{"v1", "v2", "v3", "v4"} {
			b.Execute(ingestTuple(record(id, "", -1, `{}`)))
		}
		b.Execute(tickAt(time.Now().Add(time.Hour)))
		acked, _, _ := out.state()
		eqList(t, "acked", acked, []string{"v1", "v2", "v3", "v4"})
		eqList(t, "acked before their rows were visible", notVisible, nil)
	})
}

// Through the real runtime, with two sink tasks writing the same keys: when the spout
// hears of an ack, the input's rows are visible to another connection, i.e.
// committed; the After hook, inside the transaction, sees its rows written and no
// ack of them yet; nothing fails (in PostgreSQL, parallel transactions upserting the
// same keys in different orders would deadlock: see lockOrder); and every key ends at
// its newest version.
func TestRuntimeAcksOnlyAfterCommit(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		reader := e.open()
		const n = 200
		var recs []*event.Record
		for i := range n {
			recs = append(recs, record(fmt.Sprintf("c%03d", i), fmt.Sprintf("key%d", i%7), int64(i), fmt.Sprintf(`{"amount": %d}`, i)))
		}
		o := newOutcomes()
		var mu sync.Mutex
		var problems []string
		problem := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if len(problems) < 10 {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		acked := map[string]bool{}
		spout := &recordSpout{records: recs, out: o, onAck: func(id string) {
			// The spout's goroutine, before the ack is recorded.
			var events, amounts int
			q := "SELECT (SELECT count(*) FROM events WHERE event_id = " + e.dialect.Placeholder(1) + "), (SELECT count(*) FROM amounts WHERE event_id = " + e.dialect.Placeholder(2) + ")"
			if err := reader.SQL.QueryRow(q, id, id).Scan(&events, &amounts); err != nil {
				problem("ack of %s: reading its rows: %v", id, err)
			} else if events != 1 || amounts != 1 {
				problem("ack of %s before its rows were committed: events %d, amounts %d", id, events, amounts)
			}
			mu.Lock()
			acked[id] = true
			mu.Unlock()
		}}
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 16
		opts.After = func(ctx context.Context, tx *sql.Tx, d Dialect, rows []Row) error {
			var ids []string
			for _, r := range rows {
				if r.Table == "events" {
					ids = append(ids, r.Values[0].(string))
				}
			}
			mu.Lock()
			for _, id := range ids {
				if acked[id] {
					problem("%s acked before its transaction committed", id)
				}
			}
			mu.Unlock()
			// The hook sees the batch's rows (written in this transaction).
			var seen int
			q := "SELECT count(*) FROM events WHERE event_id IN (" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
			args := make([]any, len(ids))
			for i, id := range ids {
				args[i] = id
				if d == Postgres {
					q = strings.Replace(q, "?", d.Placeholder(i+1), 1)
				}
			}
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&seen); err != nil {
				return err
			}
			if seen != len(ids) {
				problem("After hook sees %d of its %d rows", seen, len(ids))
			}
			return nil
		}
		rt := startTopology(t, spout, opts, 2, false)
		o.waitFor(t, "every ack", func(a, f int) bool { return a == n || f > 0 })
		if _, f := o.counts(); f > 0 {
			t.Fatalf("%d inputs failed; last sink error: %s", f, rt.Stats().Components["sink"].LastError)
		}
		if err := stopTopology(t, rt, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, p := range problems {
			t.Error(p)
		}
		mu.Unlock()
		_, fails := o.counts()
		eq(t, "fails", fails, 0)
		eq(t, "events", e.count(reader, "events", ""), n)
		eq(t, "amounts", e.count(reader, "amounts", ""), n)
		eq(t, "entities (7 keys)", e.count(reader, "entities", ""), 7)
		// The newest version of key k is the highest i with i%7 == k.
		eq(t, "entities at their newest version", e.count(reader, "entities", "version >= 193"), 7)
		s := c.Snapshot()
		eq(t, "rows written + stale = 3 per input", s.Rows+s.Stale, 3*n)
		eq(t, "failures", s.Failures, 0)
		st := rt.Stats()
		eq(t, "misuse", st.MisuseTotal(), 0)
	})
}

// A batch the database refuses because of one row (a CHECK constraint) is rolled
// back, and its inputs are written again one transaction each: the poison input
// alone is failed, with a reason naming the table; the others commit and are acked,
// instead of being dead-lettered with it.
func TestRuntimeFailedBatchIsolatesThePoisonInput(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		recs := []*event.Record{
			record("f0", "", -1, `{"amount": 1}`),
			record("f1", "", -1, `{"amount": 2}`),
			record("f2", "", -1, `{"amount": -5}`), // violates the CHECK
			record("f3", "", -1, `{"amount": 4}`),
		}
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 8            // 4 inputs × 2 rows: one batch
		opts.BatchDelay = time.Minute // no tick splits it
		o := newOutcomes()
		rt := startTopology(t, &recordSpout{records: recs, out: o}, opts, 1, false)
		o.waitFor(t, "3 acks and 1 fail", func(a, f int) bool { return a+f == 4 })
		acks, fails := o.counts()
		eq(t, "acks", acks, 3)
		eq(t, "fails", fails, 1)
		eq(t, "events", e.count(e.db, "events", ""), 3)
		eq(t, "amounts", e.count(e.db, "amounts", ""), 3)
		eq(t, "the poison input's rows", e.count(e.db, "events", "event_id = 'f2'"), 0)
		if err := stopTopology(t, rt, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		sk := rt.Stats().Components["sink"]
		eq(t, "sink failed", sk.Failed, 1)
		eq(t, "sink acked", sk.Acked, 3)
		eq(t, "sink errors", sk.Errors, 1)
		if !strings.Contains(sk.LastError, "rolled back") || !strings.Contains(sk.LastError, `table "amounts"`) {
			t.Errorf("reported error %q does not say what was rolled back and where", sk.LastError)
		}
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 3, Rows: 6, Failures: 2})
		o.mu.Lock()
		defer o.mu.Unlock()
		eq(t, "fail reasons", len(o.reasons), 1)
		for _, r := range o.reasons {
			if !strings.Contains(r, "rolled back") || !strings.Contains(r, `table "amounts"`) {
				t.Errorf("the spout's fail reason %q does not say what was rolled back and where", r)
			}
		}
	})
}

// A batch whose After hook fails the first time is rolled back, then written again
// one input per transaction: every row once, no duplicate, which shows nothing of
// the first transaction persisted; the hook ran in each transaction.
func TestRuntimeRollbackLeavesNothingBehind(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		var recs []*event.Record
		for i := range 10 {
			recs = append(recs, record(fmt.Sprintf("r%d", i), "", -1, `{}`))
		}
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 10
		opts.BatchDelay = time.Minute // batches of exactly the 10 inputs
		var calls int                 // the bolt's goroutine only
		opts.After = func(ctx context.Context, tx *sql.Tx, d Dialect, rows []Row) error {
			calls++
			if calls == 1 {
				return errors.New("summary unavailable")
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO summary (name, n) VALUES ('events', (SELECT count(*) FROM events)) ON CONFLICT (name) DO UPDATE SET n = excluded.n")
			return err
		}
		o := newOutcomes()
		rt := startTopology(t, &recordSpout{records: recs, out: o, replay: true}, opts, 1, false)
		o.waitFor(t, "10 acks", func(a, f int) bool { return a == 10 })
		if err := stopTopology(t, rt, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		acks, fails := o.counts()
		eq(t, "acks", acks, 10)
		eq(t, "fails", fails, 0)
		eq(t, "events", e.count(e.db, "events", ""), 10)
		var summary int
		if err := e.db.SQL.QueryRow("SELECT n FROM summary WHERE name = 'events'").Scan(&summary); err != nil {
			t.Fatal(err)
		}
		eq(t, "summary written by the hook in the same transaction", summary, 10)
		s := c.Snapshot()
		eq(t, "duplicates", s.Duplicates, 0)
		eq(t, "rows", s.Rows, 10)
		eq(t, "batches (one per input after the rollback)", s.Batches, 10)
		eq(t, "failures", s.Failures, 1)
		if le := rt.Stats().Components["sink"].LastError; !strings.Contains(le, "After hook: summary unavailable") {
			t.Errorf("reported error %q", le)
		}
	})
}

// A Rows error, or a row the bolt cannot write, fails that input alone; the batch
// around it is written.
func TestRowsErrorFailsOnlyThatInput(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 2
		rows := opts.Rows
		opts.Rows = func(t *tuple.Tuple) ([]Row, error) {
			switch t.StringByField("event_id") {
			case "unknown-table":
				return []Row{{Table: "nope", Values: []any{1}}}, nil
			case "short-row":
				return []Row{{Table: "events", Values: []any{"short-row"}}}, nil
			case "nil-version":
				return []Row{{Table: "entities", Values: []any{"k", nil, "nil-version", "{}"}}}, nil
			}
			return rows(t)
		}
		b, out := newTestBolt(t, opts)
		bad := record("bad", "", -1, `{}`)
		bad.Event.Type = "bad"
		for _, r := range []*event.Record{
			record("good1", "", -1, `{}`), bad, record("unknown-table", "", -1, `{}`),
			record("short-row", "", -1, `{}`), record("nil-version", "", -1, `{}`),
			record("good2", "", -1, `{}`),
		} {
			b.Execute(ingestTuple(r))
		}
		acked, failed, errs := out.state()
		eqList(t, "acked", acked, []string{"good1", "good2"})
		eqList(t, "failed", failed, []string{"bad", "unknown-table", "short-row", "nil-version"})
		eq(t, "reported errors", len(errs), 4)
		reasons := out.failReasons()
		for i, want := range []string{"type bad is refused", `unknown table "nope"`, "1 values for 4 columns", `version column "version" is nil`} {
			if i < len(errs) && !strings.Contains(errs[i].Error(), want) {
				t.Errorf("error %d = %q, want it to say %q", i, errs[i], want)
			}
			if i < len(reasons) && (reasons[i] == nil || !strings.Contains(reasons[i].Error(), want)) {
				t.Errorf("fail reason %d = %v, want it to say %q", i, reasons[i], want)
			}
		}
		eq(t, "events", e.count(e.db, "events", ""), 2)
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 1, Rows: 2, Rejected: 4})
	})
}

// Cleanup writes nothing and acks nothing: the inputs still buffered are dropped,
// counted, and named in its error.
func TestCleanupDropsTheBufferUncommitted(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 100
		b, out := newTestBolt(t, opts)
		b.Execute(ingestTuple(record("p", "", -1, `{}`)))
		b.Execute(ingestTuple(record("q", "", -1, `{"amount": 1}`)))
		err := b.Cleanup()
		if !errors.Is(err, ErrDropped) || !strings.Contains(err.Error(), "2 inputs (3 rows)") {
			t.Errorf("Cleanup = %v, want ErrDropped naming 2 inputs and 3 rows", err)
		}
		acked, failed, _ := out.state()
		eq(t, "acked", len(acked), 0)
		eq(t, "failed", len(failed), 0)
		eq(t, "events", e.count(e.db, "events", ""), 0)
		eq(t, "counters", c.Snapshot(), CountersSnapshot{Dropped: 2})
		if err := b.Cleanup(); err != nil {
			t.Errorf("second Cleanup = %v, want nil (nothing buffered)", err)
		}
	})
}

// Through the real runtime: a graceful Stop writes the last partial batch and drops
// nothing, with ticks or without (the runtime calls Drain once the sink's queue is
// empty; before Drain, without ticks the batch waited, Stop's deadline abandoned its
// trees, and Cleanup dropped it uncommitted).
func TestRuntimeStop(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		var recs []*event.Record
		for i := range 3 {
			recs = append(recs, record(fmt.Sprintf("s%d", i), "", -1, `{}`))
		}
		t.Run("with ticks", func(t *testing.T) {
			c := &Counters{}
			opts := e.options(c)
			opts.BatchRows = 1000
			opts.BatchDelay = 300 * time.Millisecond
			o := newOutcomes()
			rt := startTopology(t, &recordSpout{records: recs, out: o}, opts, 1, false)
			waitfor.True(t, 20*time.Second, "3 inputs buffered", func() bool { return rt.Stats().Components["sink"].Executed == 3 })
			// Most likely no tick has written them yet: the ticks that go on while Stop
			// waits for the pending trees do.
			if err := stopTopology(t, rt, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			acks, fails := o.counts()
			s := c.Snapshot()
			eq(t, "acks", acks, 3)
			eq(t, "fails", fails, 0)
			eq(t, "rows written", s.Rows, 3)
			eq(t, "dropped", s.Dropped, 0)
			eq(t, "failures", s.Failures, 0)
			eq(t, "rows in events", e.count(e.db, "events", ""), 3)
		})
		e.exec("DELETE FROM events")
		t.Run("without ticks", func(t *testing.T) {
			c := &Counters{}
			opts := e.options(c)
			opts.BatchRows = 1000
			o := newOutcomes()
			rt := startTopology(t, &recordSpout{records: recs, out: o}, opts, 1, true)
			waitfor.True(t, 20*time.Second, "3 inputs buffered", func() bool { return rt.Stats().Components["sink"].Executed == 3 })
			if err := stopTopology(t, rt, 10*time.Second); err != nil {
				t.Fatalf("Stop = %v, want nil (the partial batch drained)", err)
			}
			acks, fails := o.counts()
			eq(t, "acks", acks, 3)
			eq(t, "fails", fails, 0)
			eq(t, "rows", e.count(e.db, "events", ""), 3)
			eq(t, "counters", c.Snapshot(), CountersSnapshot{Batches: 1, Rows: 3})
			sk := rt.Stats().Components["sink"]
			eq(t, "sink misuse", sk.MisuseTotal(), 0)
			eq(t, "sink errors", sk.Errors, 0)
		})
	})
}

// Several poison inputs at the head of a batch fail alone; every other input of the
// batch is written and acked (three failures in a row are no reason to give up).
func TestRuntimeSeveralPoisonInputsFailAlone(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.createTables()
		var recs []*event.Record
		for i := range 10 {
			amount := i + 1
			if i < 3 {
				amount = -i - 1 // violates the CHECK
			}
			recs = append(recs, record(fmt.Sprintf("p%d", i), "", -1, fmt.Sprintf(`{"amount": %d}`, amount)))
		}
		c := &Counters{}
		opts := e.options(c)
		opts.BatchRows = 20
		opts.BatchDelay = time.Minute
		o := newOutcomes()
		rt := startTopology(t, &recordSpout{records: recs, out: o}, opts, 1, false)
		o.waitFor(t, "10 outcomes", func(a, f int) bool { return a+f == 10 })
		acks, fails := o.counts()
		eq(t, "acks", acks, 7)
		eq(t, "fails", fails, 3)
		eq(t, "amounts", e.count(e.db, "amounts", ""), 7)
		if err := stopTopology(t, rt, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}
