package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/eventlog/jslog"
)

func logCmd() *cobra.Command {
	c := &cobra.Command{Use: "log", Short: "Check or salvage the event log of a stopped gale serve"}
	c.AddCommand(logCheckCmd(), logSalvageCmd())
	return c
}

func logCheckCmd() *cobra.Command {
	var data string
	c := &cobra.Command{
		Use:   "check",
		Short: "Read every WAL chunk, key and record of the log; exit 1 if anything is damaged or missing",
		Long: `gale log check reads the log in DATA/log without changing it (stop gale serve first):
every chunk of every WAL file, every key in its SSTs and memtables (a block that fails
its checksum is named with its key range and SST, and the scan goes on after it),
every record's checksum and every dedupe entry, and compares the records with the
high-water mark of what was answered PERSISTED. It prints what is intact and what is
not, and exits 0 if the log is whole, 1 if it is damaged, 2 if it cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := filepath.Join(data, "log")
			rep, err := eventlog.Check(dir, nil)
			if err != nil {
				return err
			}
			printCheck(cmd.OutOrStdout(), rep)
			result, code := checkResult(rep, data)
			fmt.Fprintln(cmd.OutOrStdout(), result)
			if code != 0 {
				return ExitError{code}
			}
			return nil
		},
	}
	c.Flags().StringVar(&data, "data", "gale-data", "data directory of gale serve (the log is in DATA/log)")
	return c
}

func logSalvageCmd() *cobra.Command {
	var data, logKind string
	var force bool
	var nf ClusterFlags
	c := &cobra.Command{
		Use:   "salvage",
		Short: "Start a damaged log again from what is intact, recording the lost seqs (GET /v1/lost)",
		Long: `gale log salvage copies everything intact in DATA/log into a fresh log (the readable
keys, then the intact WAL batches after the damage, in order), records each acknowledged
seq range that is gone, with the event ids any dedupe entry or status document still
names, and keeps the high-water mark so no seq is given out twice. The damaged log is
kept as DATA/log.damaged-<time>.

With --log jetstream --nats URL it salvages gale serve --log jetstream's stream: it
records the seqs answered PERSISTED that JetStream lost (a gap past the committed
offset, or a stream ending below the high-water mark), and fills a lost tail with
filler records so that no seq is given out twice. Stop every serve process sharing
the stream first: it refuses while one holds the log spout's lease, unless --force.
A stream with nothing lost is left as it is.

Stop gale serve first. After it, gale serve starts, logs the lost ranges and lists
them at GET /v1/lost: clients should send those events again. A Pebble log that gale
log check finds intact is refused (exit 2) unless --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch logKind {
			case "jetstream":
				return salvageJetStream(cmd, &nf, force)
			case "pebble":
				if nf.url != "" {
					return errors.New("--nats is for --log jetstream")
				}
			default:
				return fmt.Errorf("--log %q: want pebble (DATA/log) or jetstream (the stream PREFIX-log on --nats)", logKind)
			}
			dir := filepath.Join(data, "log")
			if !force {
				// A salvage of a healthy log only renames it aside; say so
				// instead. A check that fails (no log: an interrupted salvage
				// to finish; or unreadable) leaves the decision to Salvage.
				if chk, err := eventlog.Check(dir, nil); err == nil && !chk.Damaged() {
					if chk.AfterDamage > 0 {
						return fmt.Errorf("log salvage: %s is intact (gale log check finds no acknowledged record missing; gale serve starts): nothing to salvage; --force copies it into a fresh log anyway, keeping the %d intact WAL batches after the torn tail that a start drops", dir, chk.AfterDamage)
					}
					return fmt.Errorf("log salvage: %s is intact (gale log check finds nothing damaged or missing): nothing to salvage; --force copies it into a fresh log anyway", dir)
				}
			}
			rep, err := eventlog.Salvage(dir, nil, time.Now())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if rep.Finished {
				fmt.Fprintf(w, "finished an interrupted salvage: its copy is now %s (run gale log check to see it)\n", dir)
				return nil
			}
			printCheck(w, rep.Check)
			fmt.Fprintf(w, "salvaged: %d keys copied, %d intact WAL batches after the damage and %d groups from the mark file's replicas applied; damaged log kept in %s\n",
				rep.Keys, rep.Batches, rep.Replicas, rep.OldDir)
			if rep.Reindexed > 0 {
				fmt.Fprintf(w, "rebuilt: %d dedupe entries from their intact records (their ids answer lookups and resends again)\n", rep.Reindexed)
			}
			if rep.Replay != 0 {
				fmt.Fprintf(w, "replay: the committed offset moves back to seq %d: the damage held newer statuses; events not finished in what is intact are processed again (sinks absorb repeats)\n", rep.Replay)
			}
			if len(rep.Lost) == 0 {
				fmt.Fprintln(w, "lost: nothing acknowledged")
			}
			for _, r := range rep.Lost {
				fmt.Fprintf(w, "lost: seqs %d..%d (%d events; ids known: %s)\n", r.From, r.To, r.To-r.From+1, idList(r.IDs))
			}
			return nil
		},
	}
	c.Flags().StringVar(&data, "data", "gale-data", "data directory of gale serve (the log is in DATA/log)")
	c.Flags().BoolVar(&force, "force", false, "salvage even a log that gale log check finds intact (with --log jetstream: even while a serve process holds the log spout's lease)")
	c.Flags().StringVar(&logKind, "log", "pebble", "the log: pebble (DATA/log) or jetstream (the stream PREFIX-log on --nats, as gale serve --log jetstream)")
	c.Flags().StringVar(&nf.url, "nats", "", "with --log jetstream, NATS URL(s), comma-separated")
	c.Flags().StringVar(&nf.natsData, "nats-data", natsnode.DefaultDataDir, "with --log jetstream, the embedded node's data directory (its credentials)")
	c.Flags().StringVar(&nf.creds, "creds", "", "with --log jetstream, NATS credentials file")
	c.Flags().StringVar(&nf.nkey, "nkey", "", "with --log jetstream, NATS nkey seed file")
	c.Flags().StringVar(&nf.prefix, "prefix", cluster.DefaultPrefix, "with --log jetstream, the prefix gale serve was given")
	c.Flags().DurationVar(&nf.timeout, "nats-timeout", 30*time.Second, "with --log jetstream, the bound of each call to the cluster")
	return c
}

// salvageJetStream records the acknowledged records missing from gale serve's
// stream as lost (jslog.Salvage) and prints what it found.
func salvageJetStream(cmd *cobra.Command, nf *ClusterFlags, force bool) error {
	if nf.url == "" {
		return errors.New("--log jetstream: give --nats URL (the cluster gale serve --log jetstream uses)")
	}
	nc, err := nf.dial("gale log salvage")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*nf.timeout)
	defer cancel()
	rep, err := jslog.Salvage(ctx, jslog.Config{JS: js, Prefix: nf.prefix, Timeout: nf.timeout}, force)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "stream %s-log: committed offset %d (every seq below it finished), last seq %d, high-water mark %d (the highest seq known stored)\n", nf.prefix, rep.Committed, rep.LastSeq, rep.Mark)
	if rep.Filled > 0 {
		fmt.Fprintf(w, "filled: %d filler records after seq %d, so that no seq up to the mark is given out twice\n", rep.Filled, rep.LastSeq)
	}
	if len(rep.Lost) == 0 {
		fmt.Fprintln(w, "lost: nothing not recorded before (no gap past the committed offset, the stream reaches the mark); nothing written")
	}
	for _, r := range rep.Lost {
		fmt.Fprintf(w, "lost: seqs %d..%d (%d events; ids unknown: the records are gone): %s\n", r.From, r.To, r.To-r.From+1, r.Reason)
	}
	return nil
}

func idList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	if len(ids) > 20 {
		return strings.Join(ids[:20], ", ") + fmt.Sprintf(" and %d more (GET /v1/lost)", len(ids)-20)
	}
	return strings.Join(ids, ", ")
}

// checkResult is gale log check's last line and exit code. A log with no
// acknowledged record missing but intact WAL batches after a torn tail is intact
// (gale serve starts and gale log salvage refuses it), yet a start drops those
// batches: what they wrote is a result of its own.
func checkResult(r *eventlog.CheckReport, data string) (string, int) {
	if r.Damaged() {
		return fmt.Sprintf("result: DAMAGED; `gale log salvage --data %s` starts the log again from what is intact and records what is lost", data), 1
	}
	var lost, after []string
	for _, f := range r.WAL {
		if f.Name == newestLiveWAL(r) && len(f.Damage) > 0 && f.Damage[0].Closed {
			// Written, then closed (and synced) after it: not a torn write.
			lost = append(lost, fmt.Sprintf("the damaged batch at offset %d of %s, before its EOF trailer (it cannot be read)", f.Damage[0].Offset, f.Name))
		}
	}
	if r.AfterStatus > 0 {
		after = append(after, fmt.Sprintf("%d status documents", r.AfterStatus))
	}
	if r.AfterCommitted > r.Committed {
		after = append(after, fmt.Sprintf("the committed offset %d (it goes back to %d)", r.AfterCommitted, r.Committed))
	}
	if r.AfterDamageTo > 0 {
		after = append(after, fmt.Sprintf("record seqs up to %d (restored from the mark file's replicas that hold them, else recorded lost at GET /v1/lost: past the high-water mark, possibly never answered)", r.AfterDamageTo))
	}
	if len(after) > 0 {
		lost = append(lost, fmt.Sprintf("in the %d intact WAL batches after the damage, %s", r.AfterDamage, strings.Join(after, ", ")))
	}
	switch {
	case len(lost) > 0:
	case r.AfterDamage > 0:
		return fmt.Sprintf("result: intact (the %d intact WAL batches after the torn tail hold no record, status document or committed offset; a start drops them)", r.AfterDamage), 0
	default:
		return "result: intact", 0
	}
	out := "result: records intact (gale serve starts); WRITES LOST at the start, dropped by Pebble's replay: " + strings.Join(lost, "; ") +
		"; events whose status is lost are processed again (sinks absorb repeats)"
	if r.AfterDamage > 0 {
		out += fmt.Sprintf("; `gale log salvage --force --data %s` keeps the intact batches instead", data)
	}
	return out, 0
}

// newestLiveWAL is the newest WAL Pebble replays: the only one whose end may be
// a torn tail ("" if none is known).
func newestLiveWAL(r *eventlog.CheckReport) string {
	newest := ""
	for _, f := range r.WAL {
		for _, n := range r.LiveWAL {
			if n == f.Name {
				newest = f.Name
			}
		}
	}
	return newest
}

func printCheck(w io.Writer, r *eventlog.CheckReport) {
	mark := fmt.Sprintf("high-water mark %d", r.Mark)
	if r.MarkErr != nil {
		mark = "DAMAGED high-water mark: " + r.MarkErr.Error()
	}
	fmt.Fprintf(w, "log %s: Pebble format %s, %s\n", r.Dir, r.Format, mark)
	newest := newestLiveWAL(r)
	for _, f := range r.WAL {
		live := "obsolete (not replayed)"
		for _, n := range r.LiveWAL {
			if n == f.Name {
				live = "live"
			}
		}
		if r.OpenErr != nil {
			live = "replayed or not: not known (Pebble cannot open the store)"
		}
		older := live == "live" && f.Name != newest // closed: Pebble wants it to end cleanly
		state := "intact"
		for _, d := range f.Damage {
			if d.Resync >= 0 || older || d.Closed {
				state = "DAMAGED"
			}
		}
		fmt.Fprintf(w, "WAL %s: %s, %d bytes, %d intact batches: %s\n", f.Name, live, f.Size, len(f.Batches), state)
		for _, d := range f.Damage {
			if d.Resync < 0 && older {
				fmt.Fprintf(w, "  DAMAGED at offset %d: %s (no intact chunk after it; a WAL before the newest was closed and must end cleanly)\n", d.Offset, d.Reason)
				continue
			}
			if d.Resync < 0 && d.Closed {
				fmt.Fprintf(w, "  DAMAGED at offset %d: %s (no intact chunk after it, but the log's EOF trailer: the WAL was closed after the damage, so it is not a torn write; a start drops the batch)\n", d.Offset, d.Reason)
				continue
			}
			if d.Resync < 0 {
				fmt.Fprintf(w, "  ends at offset %d (%s; the rest is unwritten, torn or an old log's)\n", d.Offset, d.Reason)
				continue
			}
			fmt.Fprintf(w, "  DAMAGED at %s\n", d)
		}
	}
	if r.OpenErr != nil {
		fmt.Fprintf(w, "DAMAGED: Pebble cannot open the intact part: %v\n", r.OpenErr)
		return
	}
	if r.AfterDamage > 0 {
		what := "no record"
		if r.AfterDamageTo > 0 {
			what = fmt.Sprintf("records up to seq %d", r.AfterDamageTo)
		}
		what += fmt.Sprintf(", %d status documents", r.AfterStatus)
		if r.AfterCommitted > 0 {
			what += fmt.Sprintf(", committed offset %d", r.AfterCommitted)
		}
		if r.Damaged() {
			fmt.Fprintf(w, "after the WAL damage: %d intact batches (%s), kept by a salvage\n", r.AfterDamage, what)
		} else {
			// A torn tail of the newest WAL: gale serve starts and drops them,
			// recording lost any seq they name past the log's end.
			fmt.Fprintf(w, "after the WAL damage: %d intact batches (%s), dropped by the next start (a torn tail; it logs a WARN)\n", r.AfterDamage, what)
		}
	}
	names := map[byte]string{'l': "records", 'd': "dedupe entries", 's': "status documents", 'x': "dead letters", 'm': "meta",
		'p': "group sync times"}
	var kinds []string
	for k, n := range r.Keys {
		name := names[k]
		if name == "" {
			name = fmt.Sprintf("%q keys", k)
		}
		kinds = append(kinds, fmt.Sprintf("%d %s", n, name))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "keys: %s\n", strings.Join(kinds, ", "))
	if r.Records > 0 {
		fmt.Fprintf(w, "records: %d intact, seqs %d..%d; committed offset %d\n", r.Records, r.First, r.Last, r.Committed)
	} else {
		fmt.Fprintf(w, "records: none intact; committed offset %d\n", r.Committed)
	}
	for _, k := range r.BadKeys {
		fmt.Fprintf(w, "DAMAGED %s\n", k)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "MISSING: acknowledged seqs %d..%d have no intact record\n", m[0], m[1])
	}
	if len(r.Unindexed) > 0 {
		var n uint64
		var runs []string
		for _, u := range r.Unindexed {
			n += u[1] - u[0] + 1
			if len(runs) < 10 {
				runs = append(runs, fmt.Sprintf("%d..%d", u[0], u[1]))
			}
		}
		if len(r.Unindexed) > len(runs) {
			runs = append(runs, fmt.Sprintf("and %d more runs", len(r.Unindexed)-len(runs)))
		}
		fmt.Fprintf(w, "DAMAGED dedupe index: the ids of %d intact records (seqs %s) have no entry: a lookup answers 404 and a resend is taken as new; a salvage rebuilds their entries from the records\n",
			n, strings.Join(runs, ", "))
	}
	if r.Refused[0] != 0 {
		fmt.Fprintf(w, "REFUSED: gale serve will not start: Pebble's replay would stop at the WAL damage and drop acknowledged seqs %d..%d (a salvage keeps those an intact batch after the damage or a replica holds: all but any MISSING above)\n", r.Refused[0], r.Refused[1])
	}
	for _, p := range r.Replica {
		fmt.Fprintf(w, "replica: seqs %d..%d have no intact record but are held by the mark file's replicas of their groups (a salvage keeps them; Open restores them when they continue the log)\n", p[0], p[1])
	}
	if r.Named > r.Mark {
		fmt.Fprintf(w, "named: seqs up to %d are named by the newest groups' replicas or WAL batches (above the high-water mark %d: possibly answered, never given out again)\n", r.Named, r.Mark)
	}
	for _, l := range r.Lost {
		fmt.Fprintf(w, "lost by an earlier salvage: seqs %d..%d (ids known: %d): %s\n", l.From, l.To, len(l.IDs), l.Reason)
	}
}
