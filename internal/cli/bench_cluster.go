package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
)

// benchRow is one row of gale bench cluster.
type benchRow struct {
	Name        string  `json:"name"`
	Round       int     `json:"round"`
	Words       uint64  `json:"words"`
	Seconds     float64 `json:"seconds"`
	WordsPerSec float64 `json:"words_per_sec"`
	// OfFloor is WordsPerSec over the round's one-goroutine rate: the machine's pace
	// this round, so rows of different rounds (and hours) compare.
	OfFloor        float64 `json:"of_floor"`
	CPUSecPerMWord float64 `json:"cpu_s_per_mword"`
	Exact          bool    `json:"exact"`
	// Failover rows: kill -9 to the heartbeat's expiry, to the new record, and to
	// every worker of it running.
	DetectedSec   float64 `json:"detected_s,omitempty"`
	ReassignedSec float64 `json:"reassigned_s,omitempty"`
	RunningSec    float64 `json:"running_s,omitempty"`
}

func benchClusterCmd() *cobra.Command {
	var (
		rounds    int
		asJSON    bool
		killAfter time.Duration
		hbTTL     time.Duration
		workers   []int
	)
	c := &cobra.Command{
		Use:   "cluster [FILE...]",
		Short: "Word count words/s and CPU per million words in one process and on 1 to 3 worker processes over NATS, and the time from a kill -9 to every task running again",
		Long: `Runs, in each round, one after the other on the same files (default: ` + defaultBooks + `):
  floor      the words counted by one goroutine, no engine: the machine's pace this round;
  local      gale wordcount in this process, tracking on (1 acker);
  N workers  gale wordcount --workers N: an embedded NATS node and N gale worker
             processes on loopback, tracking on, counts kept exactly-once through
             the changelog (the NATS hop and the state writes are the cost);
  failover   3 workers, the spout's worker kill -9'd after --kill-after: detection
             (its heartbeat's expiry), reassignment, every task running again.
CPU is user+system time of every process of the row (workers, and this process with
the NATS node) per million words. Rates vary with the machine's load: compare rows
of one round, or their of_floor ratio.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files := args
			if len(files) == 0 {
				files, _ = filepath.Glob(defaultBooks)
				if len(files) == 0 {
					return fmt.Errorf("no FILE given and no %s in %s", defaultBooks, mustWd())
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var rows []benchRow
			for round := 1; round <= rounds; round++ {
				r, err := benchClusterRound(ctx, round, files, workers, killAfter, hbTTL, cmd.ErrOrStderr())
				rows = append(rows, r...)
				if err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			writeBenchCluster(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&rounds, "rounds", 1, "rounds of every row")
	f.IntSliceVar(&workers, "workers", []int{1, 2, 3}, "worker counts to run")
	f.DurationVar(&killAfter, "kill-after", time.Second, "failover row: kill -9 the spout's worker this long after the submit (0: no failover row)")
	f.DurationVar(&hbTTL, "heartbeat-ttl", 3*time.Second, "the workers' heartbeat TTL (and the scheduler's lease): what bounds detection")
	f.BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return c
}

func benchClusterRound(ctx context.Context, round int, files []string, workers []int, killAfter, hbTTL time.Duration, progress io.Writer) ([]benchRow, error) {
	var rows []benchRow
	// The floor: one goroutine counting the words, no engine.
	c0 := selfCPU()
	t0 := time.Now()
	want, err := wordcount.CountFiles(files)
	if err != nil {
		return nil, err
	}
	floorSec := time.Since(t0).Seconds()
	var words uint64
	for _, n := range want {
		words += n
	}
	floor := benchRow{Name: "floor (one goroutine)", Round: round, Words: words, Seconds: floorSec,
		WordsPerSec: float64(words) / floorSec, Exact: true, CPUSecPerMWord: (selfCPU() - c0).Seconds() / (float64(words) / 1e6)}
	floor.OfFloor = 1
	rows = append(rows, floor)
	row := func(r benchRow) benchRow {
		r.Round = round
		if r.Seconds > 0 {
			r.WordsPerSec = float64(r.Words) / r.Seconds
		}
		r.OfFloor = r.WordsPerSec / floor.WordsPerSec
		fmt.Fprintf(progress, "gale bench cluster: round %d, %s: %.0f words/s\n", round, r.Name, r.WordsPerSec)
		return r
	}

	// Local mode, tracking on.
	cfg := topology.DefaultConfig()
	cfg.Ackers = 1
	cfg.MaxSpoutPending = 5000
	c0 = selfCPU()
	res, err := wordcount.Run(ctx, wordcount.Options{Files: files, Config: cfg})
	if err != nil {
		return rows, err
	}
	local := row(benchRow{Name: "local (1 process)", Words: res.Words, Seconds: res.Elapsed.Seconds(),
		CPUSecPerMWord: (selfCPU() - c0).Seconds() / (float64(res.Words) / 1e6), Exact: mapsEqual(res.Counts, want)})
	rows = append(rows, local)

	args := []string{"--ackers=1", "--max-pending=5000"}
	for _, n := range workers {
		d := &clusterDemo{files: files, workers: n, hbTTL: hbTTL, args: args, out: io.Discard, errw: progress}
		o, err := d.execute(ctx)
		if err != nil {
			return rows, fmt.Errorf("%d workers: %w", n, err)
		}
		rows = append(rows, row(benchRow{Name: fmt.Sprintf("%d worker processes", n), Words: o.counts.Words, Seconds: o.elapsed.Seconds(),
			CPUSecPerMWord: (o.cpu + o.selfCPU).Seconds() / (float64(o.counts.Words) / 1e6), Exact: o.exact}))
	}
	if killAfter > 0 {
		d := &clusterDemo{files: files, workers: 3, hbTTL: hbTTL, killAfter: killAfter, args: args, out: io.Discard, errw: progress}
		o, err := d.execute(ctx)
		if err != nil {
			return rows, fmt.Errorf("failover: %w", err)
		}
		r := benchRow{Name: "3 workers, kill -9", Words: o.counts.Words, Seconds: o.elapsed.Seconds(),
			CPUSecPerMWord: (o.cpu + o.selfCPU).Seconds() / (float64(o.counts.Words) / 1e6), Exact: o.exact}
		if o.fo != nil {
			r.DetectedSec, r.ReassignedSec, r.RunningSec = o.fo.Detected.Seconds(), o.fo.Reassigned.Seconds(), o.fo.Running.Seconds()
		} else {
			r.Name += " (job ended before the kill)"
		}
		rows = append(rows, row(r))
	}
	return rows, nil
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func writeBenchCluster(w io.Writer, rows []benchRow) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\twords/s\tof floor\tCPU s/Mword\twall s\texact\tdetected s\treassigned s\trunning s\t\trow")
	for _, r := range rows {
		fo := "\t\t"
		if r.RunningSec > 0 || r.DetectedSec > 0 {
			fo = fmt.Sprintf("%.3f\t%.3f\t%.3f", r.DetectedSec, r.ReassignedSec, r.RunningSec)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.3f\t%.2f\t%.2f\t%v\t%s\t\t%s\n", r.Round, r.WordsPerSec, r.OfFloor, r.CPUSecPerMWord, r.Seconds, r.Exact, fo, r.Name)
	}
	tw.Flush()
}
