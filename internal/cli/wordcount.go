package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/engine"

	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/ui"
)

const defaultBooks = "testdata/books/*.txt"

func WordcountCmd() *cobra.Command {
	var (
		failRate   float64
		seed       uint64
		ackers     int
		maxPending int
		timeout    time.Duration
		top        int
		outFile    string
		asJSON     bool
		cpuProfile string
		uif        UIFlags
		logLevel   string
		logFormat  string
		linger     time.Duration
		workers    int
		killAfter  time.Duration
		hbTTL      time.Duration
		keepLogs   bool
		pauseAfter time.Duration
		natsNodes  int
		killNATS   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wordcount [FILE...]",
		Short: "Count the words of text files with tracked, replayed lines (default: " + defaultBooks + ")",
		Long: `Count the words of text files on a reliable topology:
lines (spout) -> split (shuffle, 2 tasks) -> count (fields grouping on word, 2 tasks).

Every line is a tracked tuple tree; a failed or timed-out line is re-read from its file
offset and replayed, and counts stay exact because each word occurrence is applied once.
With no FILE, the books in ` + defaultBooks + ` are read (run from the repository root).

Exit status: 0 when every line was acked and no API misuse was reported, 1 otherwise,
2 when the job could not run.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files := args
			if len(files) == 0 {
				files, _ = filepath.Glob(defaultBooks)
				if len(files) == 0 {
					return fmt.Errorf("no FILE given and no %s in %s: run from the repository root or name the files", defaultBooks, mustWd())
				}
			}
			for _, f := range files {
				st, err := os.Stat(f)
				if err != nil {
					return err
				}
				if st.IsDir() {
					return fmt.Errorf("%s is a directory, not a text file", f)
				}
			}
			switch {
			case !(failRate >= 0 && failRate < 1): // also refuses NaN
				return fmt.Errorf("--fail-rate %v: must be at least 0 and below 1", failRate)
			case top < 0:
				return fmt.Errorf("--top %d: must be >= 0", top)
			case ackers < 0:
				return fmt.Errorf("--ackers %d: must be >= 0 (0 turns tracking off)", ackers)
			case maxPending < 0:
				return fmt.Errorf("--max-pending %d: must be >= 0 (0 = unlimited)", maxPending)
			case timeout < topology.MinMessageTimeout:
				return fmt.Errorf("--timeout %v: must be at least %v", timeout, topology.MinMessageTimeout)
			}
			if workers < 0 {
				return fmt.Errorf("--workers %d: must be >= 1 (0 runs in this process)", workers)
			}
			if workers == 0 && (killAfter > 0 || pauseAfter > 0 || killNATS > 0) {
				return errors.New("--kill-worker, --pause-worker and --kill-nats need --workers")
			}
			if killAfter > 0 && pauseAfter > 0 {
				return errors.New("--kill-worker and --pause-worker: choose one")
			}
			if workers > 0 {
				if ackers < 1 {
					return fmt.Errorf("--ackers %d: a run on workers needs at least 1, to replay what a lost worker held", ackers)
				}
				logger, err := NewLogger(cmd.ErrOrStderr(), logLevel, logFormat)
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				if pauseAfter > 0 {
					killAfter = pauseAfter
				}
				if natsNodes != 1 && natsNodes != 3 {
					return fmt.Errorf("--nats-nodes %d: 1 or 3", natsNodes)
				}
				if killNATS > 0 && natsNodes < 3 {
					return errors.New("--kill-nats needs --nats-nodes 3")
				}
				d := &clusterDemo{files: files, workers: workers, killAfter: killAfter, pause: pauseAfter > 0, natsNodes: natsNodes, killNATS: killNATS, hbTTL: hbTTL, top: top,
					asJSON: asJSON, outFile: outFile, out: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(), logger: logger, keepLogs: keepLogs,
					args: []string{fmt.Sprintf("--fail-rate=%v", failRate), fmt.Sprintf("--seed=%d", seed), fmt.Sprintf("--ackers=%d", ackers),
						fmt.Sprintf("--max-pending=%d", maxPending), fmt.Sprintf("--timeout=%v", timeout)}}
				return d.run(ctx)
			}
			cfg := topology.DefaultConfig()
			cfg.Ackers = ackers
			cfg.MaxSpoutPending = maxPending
			cfg.MessageTimeout = timeout
			stderr := NewLockedWriter(cmd.ErrOrStderr())
			logger, err := NewLogger(stderr, logLevel, logFormat)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			if err := cfg.Validate(); err != nil {
				return err
			}
			rec, err := uif.Lineage()
			if err != nil {
				return err
			}
			if err := uif.Listen(); err != nil {
				return err
			}
			var uiSrv *ui.Server
			defer func() {
				if uiSrv == nil && uif.Ln != nil {
					uif.Ln.Close() // the job ended before the UI started
				}
			}()
			// Tuples are short-lived garbage; a larger GC target trades a little memory
			// (tens of MB here) for throughput. GOGC in the environment still wins.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(400)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			live := IsTerminal(cmd.ErrOrStderr())
			opts := wordcount.Options{Files: files, FailRate: failRate, Seed: seed, Config: cfg}
			// Lineage has readers only in the UI and in debug logs.
			if uif.Ln != nil || logger.Enabled(cmd.Context(), slog.LevelDebug) {
				opts.RuntimeOptions = []engine.Option{engine.WithLineage(rec)}
			}
			var uiErr error
			opts.Started = func(rt *engine.Runtime) { uiSrv, uiErr = uif.Start("wordcount", rt, stderr) }
			if live {
				opts.Progress = func(p wordcount.Progress) {
					fmt.Fprintf(stderr, "\r%s lines read, %s acked, %s replayed, %.1fs ",
						grouped(p.Lines), grouped(p.Acked), grouped(p.Replays), p.Elapsed.Seconds())
				}
			}
			if cpuProfile != "" {
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pf.Close()
				defer pprof.StopCPUProfile()
			}
			res, err := wordcount.Run(ctx, opts)
			if live {
				fmt.Fprint(stderr, "\r\033[K")
			}
			if uiErr != nil {
				return uiErr
			}
			if uiSrv != nil {
				// Runs after the summary is printed: the UI then shows the final counts.
				defer func() {
					if linger > 0 {
						fmt.Fprintf(stderr, "gale: job done; the UI stays up for %v (Ctrl-C ends it)\n", linger)
						select {
						case <-time.After(linger):
						case <-ctx.Done():
						}
					}
					uiSrv.Close()
				}()
			}
			if err != nil && res == nil {
				return err
			}
			if outFile != "" {
				if err := writeCounts(outFile, res.Counts); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, res, top); err != nil {
					return err
				}
			} else {
				writeSummary(out, res, top)
			}
			if err != nil {
				fmt.Fprintln(stderr, "gale: stopped early:", err)
			}
			if res.Unacked > 0 || res.Lost > 0 || res.Misuse > 0 || err != nil {
				return ExitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64Var(&failRate, "fail-rate", 0, "probability that split fails a line and count fails a word not yet counted (lines are then replayed)")
	f.Uint64Var(&seed, "seed", 1, "seed for --fail-rate")
	f.IntVar(&ackers, "ackers", 1, "acker tasks (0 turns tracking off)")
	f.IntVar(&maxPending, "max-pending", 5000, "max spout pending: lines in flight (0 = unlimited)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "message timeout of a line's tuple tree")
	f.IntVar(&top, "top", 10, "show the N most frequent words")
	f.StringVar(&outFile, "out", "", "write every word and its count as word<TAB>count lines, sorted by word (bytewise)")
	f.BoolVar(&asJSON, "json", false, "print the summary as one JSON object")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of the run to this file")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr; debug logs failed and timed-out trees, and every tuple of sampled trees, with their root ids)")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	f.DurationVar(&linger, "ui-linger", 0, "with --ui, keep serving the UI this long after the job is done and its summary printed (0: the UI stops with the job)")
	f.IntVar(&workers, "workers", 0, "run on this many gale worker child processes over an embedded NATS on loopback (0: in this process)")
	f.DurationVar(&killAfter, "kill-worker", 0, "with --workers, kill -9 the worker running the spout this long after the submit, and report the failover")
	f.DurationVar(&pauseAfter, "pause-worker", 0, "with --workers, SIGSTOP the worker running the spout this long after the submit, past its heartbeat, and SIGCONT it once its tasks run elsewhere (it must be fenced off)")
	f.IntVar(&natsNodes, "nats-nodes", 1, "with --workers, embedded NATS nodes: 1, or 3 (a JetStream cluster, every bucket and stream replicated 3 times)")
	f.DurationVar(&killNATS, "kill-nats", 0, "with --nats-nodes 3, shut one NATS node down this long after the submit")
	f.DurationVar(&hbTTL, "heartbeat-ttl", 3*time.Second, "with --workers, how long a silent worker stays live (and the scheduler's lease)")
	f.BoolVar(&keepLogs, "keep-logs", false, "with --workers, keep the workers' logs and the NATS store (their directory is printed)")
	uif.Register(f, "the job")
	return cmd
}

func mustWd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "the working directory"
	}
	return wd
}

// isTerminal reports whether w is a terminal (not merely a character device:
// /dev/null is one too).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

type wordCount struct {
	Word  string `json:"word"`
	Count uint64 `json:"count"`
}

func topWords(counts map[string]uint64, n int) []wordCount {
	all := make([]wordCount, 0, len(counts))
	for w, c := range counts {
		all = append(all, wordCount{w, c})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Count != all[j].Count {
			return all[i].Count > all[j].Count
		}
		return all[i].Word < all[j].Word
	})
	return all[:min(n, len(all))]
}

func writeCounts(path string, counts map[string]uint64) error {
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	slices.Sort(words) // Go compares strings bytewise
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	for _, w := range words {
		fmt.Fprintf(bw, "%s\t%d\n", w, counts[w])
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func writeJSON(w io.Writer, r *wordcount.Result, top int) error {
	out := map[string]any{
		"lines":              r.Lines,
		"lines_acked":        r.Acked,
		"lines_failed":       r.Failed,
		"lines_timed_out":    r.TimedOut,
		"lines_unacked":      r.Unacked,
		"lines_lost":         r.Lost,
		"replays":            r.Replays,
		"words":              r.Words,
		"distinct_words":     len(r.Counts),
		"duplicates_skipped": r.Duplicates,
		"wall_seconds":       r.Elapsed.Seconds(),
		"lines_per_second":   perSecond(r.Lines, r.Elapsed),
		"words_per_second":   perSecond(r.Words, r.Elapsed),
		"complete_latency_ms": map[string]float64{
			"p50": ms(r.CompleteP50), "p99": ms(r.CompleteP99),
		},
		"misuse_reports": r.Misuse,
		"top":            topWords(r.Counts, top),
	}
	enc := json.NewEncoder(w)
	return enc.Encode(out)
}

func writeSummary(w io.Writer, r *wordcount.Result, top int) {
	p := func(label, value string) { fmt.Fprintf(w, "%-22s %s\n", label, value) }
	p("lines", grouped(r.Lines))
	p("acked", grouped(r.Acked))
	p("failed", grouped(r.Failed-r.TimedOut))
	p("timed out", grouped(r.TimedOut))
	p("replayed", grouped(r.Replays))
	p("unacked", grouped(r.Unacked))
	if r.Lost > 0 {
		p("LOST (file changed)", grouped(r.Lost))
	}
	p("words", grouped(r.Words))
	p("distinct words", grouped(uint64(len(r.Counts))))
	p("duplicates skipped", grouped(r.Duplicates))
	p("wall time", r.Elapsed.Round(time.Millisecond).String())
	p("lines/s", grouped(uint64(perSecond(r.Lines, r.Elapsed))))
	p("words/s", grouped(uint64(perSecond(r.Words, r.Elapsed))))
	p("complete latency", fmt.Sprintf("p50 %.3f ms, p99 %.3f ms", ms(r.CompleteP50), ms(r.CompleteP99)))
	misuse := grouped(r.Misuse)
	if r.Misuse > 0 {
		var kinds []string
		for _, id := range r.Stats.Order {
			for k, v := range r.Stats.Components[id].Misuse {
				kinds = append(kinds, fmt.Sprintf("%s %s: %d", id, k, v))
			}
		}
		sort.Strings(kinds)
		misuse += " (" + strings.Join(kinds, ", ") + ")"
	}
	p("misuse reports", misuse)
	if top > 0 {
		fmt.Fprintf(w, "top %d words:\n", top)
		for i, wc := range topWords(r.Counts, top) {
			fmt.Fprintf(w, "  %2d. %-16s %s\n", i+1, wc.Word, grouped(wc.Count))
		}
	}
}

// grouped formats n with thousands separators.
func grouped(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
