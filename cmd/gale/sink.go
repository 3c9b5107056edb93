package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/pipelines/events"
	"github.com/gale-stream/gale/pipelines/orders"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

func sinkCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "sink",
		Short: "Operator commands for gale serve's sink database",
	}
	c.AddCommand(sinkRebuildCmd())
	return c
}

func sinkRebuildCmd() *cobra.Command {
	var o rebuildOptions
	c := &cobra.Command{
		Use:   "rebuild",
		Short: "Replay the log's kept records from a sequence number into a sink database",
		Long: `gale sink rebuild writes the rows of every record the log in --data still keeps,
from sequence number --from on, into the database --sink, through the same pipeline
(tables, rows, idempotent writes) as gale serve --pipeline. Use it when the sink was
lost or damaged (e.g. "database disk image is malformed"): gale serve never replays
records below the committed offset by itself. Stop gale serve first (the log is
locked while it runs). Writes are idempotent (insert-once by event id, newest version
per key), so the command may run again, or over rows already there. It does not
change the log: statuses and the committed offset stay as they are. With --pipeline
orders, stock levels are running state recomputed in log order, so those columns may
differ from the ones first written. Seqs the log does not hold (lost ranges a salvage
recorded, or a gap no salvage recorded: damage) are listed as not replayed; records
Trim removed past the dedupe window are named but not counted. A sink-wide error
(the database full, damaged, read-only or unreachable) is retried for
--give-up-after, then ends the rebuild: no record is at fault, so none is failed
for it. The exit status is 1 if any record could not be written or replayed (each
is listed), 2 if it could not run (or gave up on the database: the message names
its error and the records not written).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.sinkURL == "" {
				return errors.New("--sink is required: the database to rebuild into (a SQLite file or a postgres:// URL)")
			}
			res, err := rebuildSink(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			res.print(w)
			if res.short() {
				return exitError{1}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.dataDir, "data", "gale-data", "data directory of gale serve (the log is DATA/log)")
	fl.StringVar(&o.sinkURL, "sink", "", "database to write: a SQLite file or a postgres:// URL (required)")
	fl.Uint64Var(&o.from, "from", 1, "first sequence number to replay (records trimmed from the log are gone)")
	fl.StringVar(&o.pipeline, "pipeline", "events", "the pipeline gale serve runs: events or orders")
	fl.IntVar(&o.maxAttempts, "max-attempts", 3, "attempts per record before it is reported as not written")
	fl.DurationVar(&o.timeout, "timeout", 30*time.Second, "message timeout of a tuple tree")
	fl.DurationVar(&o.giveUpAfter, "give-up-after", 30*time.Second, "how long the database may fail as a whole (full, damaged, unreachable) before the rebuild stops with exit 2")
	return c
}

type rebuildOptions struct {
	dataDir, sinkURL, pipeline string
	from                       uint64
	maxAttempts                int
	timeout, giveUpAfter       time.Duration
	logger                     *slog.Logger
}

// rebuildResult is what a rebuild did.
type rebuildResult struct {
	Sink        string
	First, Last uint64 // seqs of the first and last record replayed (0, 0: none)
	Records     int    // records whose rows are committed
	Counts      sink.CountersSnapshot
	Failed      []rebuildFailure
	// Missing are the seqs from --from to the log's end (and recorded lost ranges
	// past it) the log holds no record of, so the rebuilt sink lacks them.
	Missing []rebuildGap
}

// rebuildGap is a run of seqs with no record in the log.
type rebuildGap struct {
	From, To uint64
	// Trimmed: before the first record that is not a dead letter, where Trim
	// removes finished records past the dedupe window; not counted as short.
	Trimmed bool
	Lost    *eventlog.LostRange // the salvage's record of it, if any
}

// short says whether the rebuilt sink lacks records the log claims.
func (r *rebuildResult) short() bool {
	if len(r.Failed) > 0 {
		return true
	}
	for _, g := range r.Missing {
		if !g.Trimmed {
			return true
		}
	}
	return false
}

type rebuildFailure struct {
	Seq    uint64
	ID     string
	Reason string
}

func (r *rebuildResult) print(w io.Writer) {
	if r.Records == 0 && len(r.Failed) == 0 && len(r.Missing) == 0 {
		fmt.Fprintf(w, "gale sink rebuild: no records to replay into %s\n", r.Sink)
		return
	}
	fmt.Fprintf(w, "gale sink rebuild: replayed seq %d..%d into %s: %d records written; %d rows inserted or updated, %d duplicates, %d stale\n",
		r.First, r.Last, r.Sink, r.Records, r.Counts.Rows, r.Counts.Duplicates, r.Counts.Stale)
	for _, f := range r.Failed {
		fmt.Fprintf(w, "  not written: seq %d event %q: %s\n", f.Seq, f.ID, f.Reason)
	}
	var missing uint64
	for _, g := range r.Missing {
		n := g.To - g.From + 1
		switch {
		case g.Trimmed:
			fmt.Fprintf(w, "  not in the log: seqs %d..%d (%d records), before its first record that is not a dead letter: trimmed past the dedupe window (not counted)\n", g.From, g.To, n)
			continue
		case g.Lost != nil:
			fmt.Fprintf(w, "  not replayed: seqs %d..%d (%d records): lost, recorded by a salvage (GET /v1/lost; ids known: %s): %s\n",
				g.From, g.To, n, idList(g.Lost.IDs), g.Lost.Reason)
		default:
			fmt.Fprintf(w, "  not replayed: seqs %d..%d (%d records): not in the log and not recorded lost: the log is damaged (run gale log check, then gale log salvage)\n", g.From, g.To, n)
		}
		missing += n
	}
	if len(r.Failed) > 0 {
		fmt.Fprintf(w, "gale sink rebuild: %d records not written\n", len(r.Failed))
	}
	if missing > 0 {
		fmt.Fprintf(w, "gale sink rebuild: %d acknowledged records not replayed: the log does not hold them\n", missing)
	}
}

// missingSeqs splits the gaps the replay met, and the lost ranges at or after
// from past the log's end, into runs recorded lost by a salvage and runs no
// salvage recorded (trimmed ones before the log's first kept record apart).
func missingSeqs(gaps []rebuildGap, lost []eventlog.LostRange, from, end uint64) []rebuildGap {
	for i := range lost {
		if lr := lost[i]; lr.To > end && lr.To >= from {
			gaps = append(gaps, rebuildGap{From: max(lr.From, end+1, from), To: lr.To})
		}
	}
	var out []rebuildGap
	for _, g := range gaps {
		s := g.From
		for s <= g.To {
			var in *eventlog.LostRange
			next := g.To
			for i := range lost {
				lr := &lost[i]
				if lr.From <= s && s <= lr.To {
					in, next = lr, min(lr.To, g.To)
					break
				}
				if lr.From > s && lr.From <= next {
					next = lr.From - 1
				}
			}
			out = append(out, rebuildGap{From: s, To: next, Trimmed: g.Trimmed && in == nil, Lost: in})
			if next == ^uint64(0) {
				break
			}
			s = next + 1
		}
	}
	return out
}

// rebuildSink replays the log's records from o.from through the pipeline's sink into
// o.sinkURL and returns when every record is written or given up.
func rebuildSink(ctx context.Context, o rebuildOptions) (*rebuildResult, error) {
	if o.pipeline == "" {
		o.pipeline = "events"
	}
	if o.pipeline != "events" && o.pipeline != "orders" {
		return nil, fmt.Errorf("--pipeline %q: want events or orders", o.pipeline)
	}
	if o.dataDir == "" {
		return nil, errors.New("--data is empty: give the data directory of gale serve (the log is DATA/log)")
	}
	if o.from == 0 {
		return nil, errors.New("--from 0: sequence numbers start at 1")
	}
	if o.maxAttempts <= 0 {
		o.maxAttempts = 3
	}
	if o.timeout <= 0 {
		o.timeout = 30 * time.Second
	}
	if o.giveUpAfter <= 0 {
		o.giveUpAfter = 30 * time.Second
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(o.dataDir, "log")
	if ok, err := eventlog.Exists(dir, nil); err != nil {
		return nil, fmt.Errorf("reading the log in %s: %w", dir, err)
	} else if !ok {
		return nil, fmt.Errorf("--data %s: %s holds no log (is it the --data of a gale serve?)", o.dataDir, dir)
	}
	lg, err := eventlog.Open(eventlog.Options{Dir: dir, Logger: o.logger})
	if errors.Is(err, eventlog.ErrLocked) {
		return nil, fmt.Errorf("the log in %s is locked: stop gale serve before rebuilding its sink (%w)", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the log in %s: %w", dir, err)
	}
	defer lg.Close()
	end := lg.Durable()
	if o.from > end+1 {
		return nil, fmt.Errorf("--from %d: the log in %s ends at seq %d", o.from, dir, end)
	}

	db, err := sink.Open(ctx, o.sinkURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ddl := events.Schema()
	if o.pipeline == "orders" {
		ddl = orders.Schema(db.Dialect)
	}
	for _, q := range ddl {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("creating the %s tables in %s: %w", o.pipeline, db, err)
		}
	}

	st := &replayState{done: make(chan struct{}), attempts: map[uint64]int{}, acked: map[uint64]bool{}, next: o.from}
	spout := func() topology.Spout {
		return &replaySpout{log: lg, pos: o.from, end: end, maxAttempts: o.maxAttempts, st: st,
			inflight: map[uint64]*event.Record{}}
	}
	tc := topology.DefaultConfig()
	tc.MessageTimeout, tc.Logger = o.timeout, o.logger
	counters := &sink.Counters{}
	// No one repairs the database during a rebuild: an outage that outlasts
	// giveUpAfter ends it (before, it was held and retried forever, and the
	// command hung with no output).
	health := sink.NewHealth(o.logger)
	var topo *topology.Topology
	if o.pipeline == "orders" {
		// As internal/serve builds it: a join half waits longer than its tree lives.
		oo := orders.DefaultOptions()
		oo.HoldFor = max(oo.HoldFor, tc.MessageTimeout*3/2)
		oo.DB, oo.SinkCounters, oo.Counters = db, counters, &orders.Counters{}
		oo.SinkHealth, oo.SinkGiveUpAfter, oo.MessageTimeout = health, o.giveUpAfter, tc.MessageTimeout
		topo, err = orders.Build(spout, oo)
	} else {
		topo, err = events.Build(spout, sink.Options{DB: db, Counters: counters, Health: health,
			GiveUpAfter: o.giveUpAfter, MessageTimeout: tc.MessageTimeout})
	}
	if err != nil {
		return nil, err
	}
	rt, err := engine.Start(ctx, topo, tc)
	if err != nil {
		return nil, err
	}
	select {
	case <-st.done:
	case <-rt.Done():
	case <-ctx.Done():
	case <-health.GaveUp():
	}
	stopWithin := tc.MessageTimeout
	if health.State().GaveUp != nil {
		stopWithin = 0 // the held trees cannot complete: the sink writes nothing more
	}
	sctx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	stopErr := rt.Stop(sctx)
	st.mu.Lock()
	defer st.mu.Unlock()
	gaps := st.gaps
	if st.next <= end {
		gaps = append(gaps, rebuildGap{From: st.next, To: end, Trimmed: !st.kept})
	}
	res := &rebuildResult{Sink: db.String(), First: st.first, Last: st.last, Records: st.written,
		Counts: counters.Snapshot(), Failed: st.failed, Missing: missingSeqs(gaps, lg.Lost(), o.from, end)}
	if gave := health.State().GaveUp; gave != nil {
		first := o.from
		total := int(end - first + 1)
		return res, fmt.Errorf("rebuild stopped: %w; %d of %d records (seq %d..%d) written, not written: seqs %s; no record is at fault: repair the database or give --sink a fresh one, and run it again (writes are idempotent)",
			gave, st.written, total, first, end, st.notWritten(first, end))
	}
	select {
	case <-st.done:
	default:
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("rebuild interrupted at seq %d: %w", st.last, err)
		}
		return res, fmt.Errorf("rebuild: the topology stopped before every record was written: %w", errors.Join(stopErr, errors.New("see the log lines above")))
	}
	if stopErr != nil {
		return res, fmt.Errorf("rebuild: stopping the topology: %w", stopErr)
	}
	return res, nil
}

// replayState is shared by the replay spout and rebuildSink.
type replayState struct {
	mu          sync.Mutex
	first, last uint64
	written     int
	failed      []rebuildFailure
	attempts    map[uint64]int
	acked       map[uint64]bool // seqs whose rows are committed
	done        chan struct{}   // closed when every record is written or given up
	// next is the seq after the last one read; gaps are the runs of seqs
	// the log held no record of; kept is set once a record that is not a dead
	// letter was read (Trim removes only before it).
	next uint64
	gaps []rebuildGap
	kept bool
}

// replaySpout emits the log's records from pos to end, each the root of a tracked
// tree (message id: its seq), replays a failed one up to maxAttempts, and closes
// st.done when nothing is left. Unlike the ingest spout it records nothing in the
// log: a rebuild changes only the sink.
type replaySpout struct {
	log         *eventlog.Log
	out         topology.SpoutCollector
	pos, end    uint64
	buf         []event.Record
	inflight    map[uint64]*event.Record
	retry       []*event.Record
	maxAttempts int
	st          *replayState
	closed      bool
}

func (sp *replaySpout) Open(_ context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if tc.Parallelism != 1 {
		return fmt.Errorf("sink rebuild: the replay spout reads one sequence: parallelism 1, not %d", tc.Parallelism)
	}
	sp.out = out
	sp.finishIfDone()
	return nil
}

func (sp *replaySpout) NextTuple() {
	if len(sp.retry) > 0 {
		r := sp.retry[0]
		sp.retry = sp.retry[1:]
		sp.send(r)
		return
	}
	if len(sp.buf) == 0 {
		if sp.pos > sp.end {
			return
		}
		recs, err := sp.log.Read(sp.pos, 256)
		for len(recs) > 0 && recs[len(recs)-1].Seq > sp.end {
			recs = recs[:len(recs)-1] // beyond what this rebuild replays
		}
		if err != nil && len(recs) == 0 {
			// The record at pos is damaged: report it and go on with the next one.
			sp.giveUp(&event.Record{Seq: sp.pos}, fmt.Sprintf("reading the log: %v", err))
			sp.pos++
			sp.st.mu.Lock()
			sp.st.next = max(sp.st.next, sp.pos)
			sp.st.mu.Unlock()
			sp.finishIfDone()
			return
		}
		// With an error, recs are the good records before the damaged one; the
		// next Read starts at it.
		if len(recs) == 0 {
			sp.pos = sp.end + 1 // the rest was trimmed
			sp.finishIfDone()
			return
		}
		for i := range recs {
			sp.read(&recs[i])
		}
		sp.buf = recs
		sp.pos = recs[len(recs)-1].Seq + 1
	}
	rec := &sp.buf[0]
	sp.buf = sp.buf[1:]
	r := *rec
	sp.st.mu.Lock()
	if sp.st.first == 0 {
		sp.st.first = r.Seq
	}
	sp.st.last = max(sp.st.last, r.Seq)
	sp.st.mu.Unlock()
	sp.send(&r)
}

// read notes a record read from the log: a seq after the one expected leaves a
// gap (the log has no record of the seqs between).
func (sp *replaySpout) read(r *event.Record) {
	sp.st.mu.Lock()
	defer sp.st.mu.Unlock()
	if r.Seq > sp.st.next {
		sp.st.gaps = append(sp.st.gaps, rebuildGap{From: sp.st.next, To: r.Seq - 1, Trimmed: !sp.st.kept})
	}
	sp.st.next = max(sp.st.next, r.Seq+1)
	if !sp.st.kept {
		if _, dead, err := sp.log.Get(eventlog.DeadLetter, r.Event.ID); err != nil || !dead {
			sp.st.kept = true
		}
	}
}

func (sp *replaySpout) send(rec *event.Record) {
	sp.inflight[rec.Seq] = rec
	sp.st.mu.Lock()
	sp.st.attempts[rec.Seq]++
	sp.st.mu.Unlock()
	// The values of ingest.SpoutFields, as the log spout of gale serve emits them.
	if err := sp.out.Emit(ingest.SpoutValues(rec), rec.Seq); err != nil {
		delete(sp.inflight, rec.Seq)
		sp.giveUp(rec, fmt.Sprintf("emit: %v", err))
	}
}

func (sp *replaySpout) Ack(msgID any) {
	seq := msgID.(uint64)
	if _, ok := sp.inflight[seq]; !ok {
		return
	}
	delete(sp.inflight, seq)
	sp.st.mu.Lock()
	sp.st.written++
	sp.st.acked[seq] = true
	delete(sp.st.attempts, seq)
	sp.st.mu.Unlock()
	sp.finishIfDone()
}

func (sp *replaySpout) Fail(msgID any) { sp.FailReason(msgID, "") }

func (sp *replaySpout) FailReason(msgID any, reason string) {
	seq := msgID.(uint64)
	rec, ok := sp.inflight[seq]
	if !ok {
		return
	}
	delete(sp.inflight, seq)
	sp.st.mu.Lock()
	n := sp.st.attempts[seq]
	sp.st.mu.Unlock()
	if n < sp.maxAttempts {
		sp.retry = append(sp.retry, rec)
		return
	}
	if reason == "" {
		reason = "failed"
	}
	sp.giveUp(rec, fmt.Sprintf("%s (after %d attempts)", reason, n))
	sp.finishIfDone()
}

func (sp *replaySpout) giveUp(rec *event.Record, reason string) {
	sp.st.mu.Lock()
	defer sp.st.mu.Unlock()
	delete(sp.st.attempts, rec.Seq)
	sp.st.failed = append(sp.st.failed, rebuildFailure{Seq: rec.Seq, ID: rec.Event.ID, Reason: reason})
}

// notWritten returns the ranges of seqs in first..last not acked, as text
// ("1..20, 25, 30..300"), at most 20 ranges and a count of the rest. The caller
// holds st.mu.
func (st *replayState) notWritten(first, last uint64) string {
	var parts []string
	more := 0
	for s := first; s <= last; s++ {
		if st.acked[s] {
			continue
		}
		e := s
		for e < last && !st.acked[e+1] {
			e++
		}
		switch {
		case len(parts) == 20:
			more++
		case e == s:
			parts = append(parts, fmt.Sprint(s))
		default:
			parts = append(parts, fmt.Sprintf("%d..%d", s, e))
		}
		s = e
	}
	if len(parts) == 0 {
		return "none"
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more ranges", more))
	}
	return strings.Join(parts, ", ")
}

func (sp *replaySpout) finishIfDone() {
	if !sp.closed && sp.pos > sp.end && len(sp.buf) == 0 && len(sp.retry) == 0 && len(sp.inflight) == 0 {
		sp.closed = true
		close(sp.st.done)
	}
}

func (sp *replaySpout) Close() error { return nil }

var _ topology.ReasonedSpout = (*replaySpout)(nil)
