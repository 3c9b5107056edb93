package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

func (a *App) sinkCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "sink",
		Short: "Operator commands for gale serve's sink database",
	}
	c.AddCommand(a.sinkRebuildCmd())
	return c
}

func (a *App) sinkRebuildCmd() *cobra.Command {
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
			res, err := a.rebuildSink(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			res.print(w)
			if res.short() {
				return ExitError{1}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.dataDir, "data", "gale-data", "data directory of gale serve (the log is DATA/log)")
	fl.StringVar(&o.sinkURL, "sink", "", "database to write: a SQLite file or a postgres:// URL, or env:NAME or @PATH naming one (required)")
	fl.Uint64Var(&o.from, "from", 1, "first sequence number to replay (records trimmed from the log are gone)")
	fl.StringVar(&o.pipeline, "pipeline", a.DefaultPipeline, "the pipeline gale serve runs: "+a.pipelineList())
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
	Failed      []ingest.ReplayFailure
	// Missing are the seqs from --from to the log's end (and recorded lost ranges
	// past it) the log holds no record of, so the rebuilt sink lacks them.
	Missing []ingest.ReplayGap
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

// rebuildSink replays the log's records from o.from through the pipeline's sink into
// o.sinkURL and returns when every record is written or given up.
func (a *App) rebuildSink(ctx context.Context, o rebuildOptions) (*rebuildResult, error) {
	p, err := a.pipeline(o.pipeline)
	if err != nil {
		return nil, fmt.Errorf("--pipeline: %w", err)
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
	if err := p.CreateTables(ctx, db); err != nil {
		return nil, err
	}

	replay := ingest.NewReplay(lg, o.from, end, o.maxAttempts)
	tc := topology.DefaultConfig()
	tc.MessageTimeout, tc.Logger = o.timeout, o.logger
	counters := &sink.Counters{}
	// No one repairs the database during a rebuild: an outage that outlasts
	// giveUpAfter ends it (before, it was held and retried forever, and the
	// command hung with no output).
	health := sink.NewHealth(o.logger)
	// The pipeline as gale serve builds it, fed by the replay instead of the log
	// spout.
	b, err := p.Build(server.Parts{Spout: replay.Spout(), DB: db, SinkCounters: counters, SinkHealth: health,
		SinkGiveUpAfter: o.giveUpAfter, Config: tc})
	if err != nil {
		return nil, fmt.Errorf("building the %s pipeline: %w", p.Name, err)
	}
	rt, err := engine.Start(ctx, b.Topology, tc)
	if err != nil {
		return nil, err
	}
	select {
	case <-replay.Done():
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
	rr := replay.Result(lg.Lost())
	res := &rebuildResult{Sink: db.String(), First: rr.First, Last: rr.Last, Records: rr.Written,
		Counts: counters.Snapshot(), Failed: rr.Failed, Missing: rr.Missing}
	if gave := health.State().GaveUp; gave != nil {
		first := o.from
		total := int(end - first + 1)
		return res, fmt.Errorf("rebuild stopped: %w; %d of %d records (seq %d..%d) written, not written: seqs %s; no record is at fault: repair the database or give --sink a fresh one, and run it again (writes are idempotent)",
			gave, rr.Written, total, first, end, replay.NotWritten())
	}
	select {
	case <-replay.Done():
	default:
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("rebuild interrupted at seq %d: %w", rr.Last, err)
		}
		return res, fmt.Errorf("rebuild: the topology stopped before every record was written: %w", errors.Join(stopErr, errors.New("see the log lines above")))
	}
	if stopErr != nil {
		return res, fmt.Errorf("rebuild: stopping the topology: %w", stopErr)
	}
	return res, nil
}
