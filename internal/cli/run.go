package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/ui"
)

// runCmd is gale run: a topology file (Storm's Flux format) run in this process,
// as Flux's --local.
func (a *App) runCmd() *cobra.Command {
	var (
		filter      string
		envFilter   bool
		dryRun      bool
		ttl         time.Duration
		stopTimeout time.Duration
		logLevel    string
		logFormat   string
		uif         UIFlags
	)
	cmd := &cobra.Command{
		Use:   "run FILE.yaml",
		Short: "Run a topology file (Storm's Flux format) in this process until its input ends, a signal, or --ttl",
		Long: `Reads a topology file in Storm's Flux format (docs/flux.md), builds it with the
component classes this binary registers (gale components lists them), and runs it
in this process, as Flux's --local does.

A file gale cannot run is refused before anything starts, with FILE:LINE:COL and
the reason of each problem. Config keys gale does not know are listed in one line
at start. --dry-run stops there: it prints the topology and exits.

The run ends:
  - by itself, when every spout says its input is done (a file spout read its
    files) and every tuple tree it emitted has completed, replays included;
  - on SIGINT or SIGTERM: spouts stop, the trees in flight complete, the bolts
    drain their queues and clean up (a second signal stops at once);
  - after --ttl, with the same drain.

Exit status: 0 when the run ended in one of these ways and no task reported an
error; 1 when the drain passed --stop-timeout with trees still pending, or a task
reported an error or API misuse; 2 when the file was refused or the topology
could not start.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := NewLockedWriter(cmd.ErrOrStderr())
			if ttl < 0 {
				return fmt.Errorf("--ttl %v: must be >= 0 (0: no limit)", ttl)
			}
			if stopTimeout <= 0 {
				return fmt.Errorf("--stop-timeout %v: must be > 0", stopTimeout)
			}
			path := args[0]
			f, err := flux.Load(path, flux.Options{Filter: filter, EnvFilter: envFilter})
			if err != nil {
				return refused(stderr, err)
			}
			for _, n := range f.Notes {
				fmt.Fprintln(stderr, "gale: note:", n)
			}
			built, err := f.Build(&a.Components)
			if err != nil {
				return refused(stderr, err)
			}
			name := f.Name
			if name == "" {
				name = path
			}
			if len(built.Ignored) > 0 {
				fmt.Fprintf(stderr, "gale: ignored config keys (gale does not know them): %s\n", strings.Join(built.Ignored, ", "))
			}
			if dryRun {
				return describeBuilt(cmd.OutOrStdout(), name, f, built)
			}
			if built.Workers > 1 {
				fmt.Fprintf(stderr, "gale: topology.workers %d: gale run runs every task in this process\n", built.Workers)
			}
			level := logLevel
			if built.Debug && !cmd.Flags().Changed("log-level") {
				level = "debug" // topology.debug
			}
			logger, err := NewLogger(stderr, level, logFormat)
			if err != nil {
				return err
			}
			cfg := built.Config
			cfg.Logger = logger
			var opts []engine.Option
			if uif.addr != "" || logger.Enabled(cmd.Context(), slog.LevelDebug) {
				rec, err := uif.Lineage()
				if err != nil {
					return err
				}
				opts = append(opts, engine.WithLineage(rec)) // read by the UI and debug logs
			}
			if err := uif.Listen(); err != nil {
				return err
			}
			var uiSrv *ui.Server
			defer func() {
				if uiSrv != nil {
					uiSrv.Close()
				} else if uif.Ln != nil {
					uif.Ln.Close()
				}
			}()
			// Signals are caught before anything starts, and never reach the engine's
			// context: the first one drains (Stop), a second one cancels that context,
			// which stops at once.
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			ctx, hardStop := context.WithCancel(cmd.Context())
			defer hardStop()
			rt, err := engine.Start(ctx, built.Topology, cfg, opts...)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if uiSrv, err = uif.Start(name, rt, stderr); err != nil {
				hardStop()
				<-rt.Done()
				return err
			}
			fmt.Fprintf(stderr, "gale: running topology %s in this process (%s); SIGINT or SIGTERM stops it after a drain\n", name, shape(built.Topology))
			var ttlC <-chan time.Time
			if ttl > 0 {
				t := time.NewTimer(ttl)
				defer t.Stop()
				ttlC = t.C
			}
			var why string
			select {
			case <-rt.Exhausted():
				why = "every spout's input is done and every tree completed"
			case s := <-sigs:
				why = signalName(s)
			case <-ttlC:
				why = fmt.Sprintf("--ttl %v passed", ttl)
			case <-rt.Done():
				why = "the topology stopped"
			}
			fmt.Fprintf(stderr, "gale: stopping (%s): draining\n", why)
			stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			go func() {
				select {
				case s := <-sigs:
					fmt.Fprintf(stderr, "gale: %s again: stopping at once\n", signalName(s))
					hardStop()
					cancel()
				case <-rt.Done():
				}
			}()
			stopErr := rt.Stop(stopCtx)
			select {
			case <-rt.Done():
			case <-time.After(stopGraceWait):
			}
			bad := summarize(stderr, rt, why)
			if stopErr != nil {
				fmt.Fprintln(stderr, "gale: stop:", stopErr)
				bad = true
			}
			if bad {
				return ExitError{1}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&filter, "filter", "", "a properties file (key=value or key: value lines) whose keys the file's ${key} names (Flux's --filter)")
	fl.BoolVar(&envFilter, "env-filter", false, "replace ${ENV-NAME} by the environment variable NAME (Flux's --env-filter)")
	fl.BoolVar(&dryRun, "dry-run", false, "check the file, print the topology (components, parallelism, streams, groupings, config) and exit")
	fl.DurationVar(&ttl, "ttl", 0, "stop the run, with a drain, after this long (0: no limit; Flux's --local-ttl)")
	fl.DurationVar(&stopTimeout, "stop-timeout", topology.DefaultConfig().ShutdownTimeout, "how long the drain of a stop may take before the trees still pending are abandoned (exit 1)")
	fl.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error (logs go to stderr; topology.debug: true in the file makes it debug unless this is given)")
	fl.StringVar(&logFormat, "log-format", "text", "text or json")
	uif.Register(fl, "the topology")
	return cmd
}

// stopGraceWait bounds the wait for tasks stuck in user code after Stop returned
// its error (the engine gives up on them about 2 s after its deadline).
const stopGraceWait = 5 * time.Second

// refused prints a file's refusal, one "FILE:LINE:COL: reason" per line (errors.Join
// of several), and exits 2.
func refused(w io.Writer, err error) error {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(w, line)
	}
	return ExitError{2}
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// shape says how many spouts, bolts and tasks a topology has.
func shape(t *topology.Topology) string {
	spouts, bolts, tasks := 0, 0, 0
	for _, c := range t.Components {
		if c.IsSpout() {
			spouts++
		} else {
			bolts++
		}
		tasks += c.Parallelism
	}
	return fmt.Sprintf("%s, %s, %s", plural(spouts, "spout"), plural(bolts, "bolt"), plural(tasks, "task"))
}

// summarize prints one line per component from the final stats and reports
// whether the run went wrong: a task reported an error or API misuse, or trees
// were abandoned.
func summarize(w io.Writer, rt *engine.Runtime, why string) (bad bool) {
	s := rt.Stats()
	fmt.Fprintf(w, "gale: stopped (%s) after %v\n", why, time.Since(rt.Started()).Round(time.Millisecond))
	for _, id := range s.Order {
		c := s.Components[id]
		if c.Spout {
			fmt.Fprintf(w, "gale:   spout %s: emitted %d, acked %d, failed %d (timed out %d), pending %d, abandoned %d\n",
				id, c.Emitted, c.Acked, c.Failed+c.TimedOut, c.TimedOut, c.Pending, c.Abandoned)
			bad = bad || c.Abandoned > 0
		} else {
			fmt.Fprintf(w, "gale:   bolt %s: executed %d, acked %d, failed %d\n", id, c.Executed, c.Acked, c.Failed)
		}
		if c.Errors > 0 {
			fmt.Fprintf(w, "gale:   %s: %d errors reported, the last: %s\n", id, c.Errors, c.LastError)
			bad = true
		}
		if m := c.MisuseTotal(); m > 0 {
			fmt.Fprintf(w, "gale:   %s: %d API misuses (logged as warnings)\n", id, m)
			bad = true
		}
	}
	return bad
}

// describeBuilt prints what --dry-run shows: the components with their class,
// parallelism and output streams, the streams with their groupings, and the config
// the topology would run with.
func describeBuilt(w io.Writer, name string, f *flux.File, b *flux.Built) error {
	class := map[string]string{}
	for _, bean := range append(append([]*flux.Bean(nil), f.Spouts...), f.Bolts...) {
		class[bean.ID] = bean.Class
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "topology %s: %s\n\n", name, shape(b.Topology))
	fmt.Fprintln(tw, "COMPONENT\tKIND\tCLASS\tPARALLELISM\tEMITS")
	for _, c := range b.Topology.Components {
		kind := "bolt"
		if c.IsSpout() {
			kind = "spout"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", c.ID, kind, class[c.ID], c.Parallelism, emits(c))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "FROM\tSTREAM\tTO\tGROUPING")
	for _, c := range b.Topology.Components {
		for _, in := range c.Inputs {
			g := strings.ToUpper(in.Grouping.Kind.String()) // as a file names it
			if len(in.Grouping.Fields) > 0 {
				g += " [" + strings.Join(in.Grouping.Fields, ", ") + "]"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Component, in.Stream, c.ID, g)
		}
	}
	fmt.Fprintln(tw)
	cfg := b.Config
	workers := "1 (not set)"
	if b.Workers > 0 {
		workers = fmt.Sprint(b.Workers)
	}
	maxPending := fmt.Sprint(cfg.MaxSpoutPending)
	if cfg.MaxSpoutPending == 0 {
		maxPending = "0 (unlimited)"
	}
	fmt.Fprintln(tw, "CONFIG\tVALUE")
	for _, kv := range [][2]string{
		{"topology.workers", workers},
		{"topology.acker.executors", fmt.Sprint(cfg.Ackers)},
		{"topology.max.spout.pending", maxPending},
		{"topology.message.timeout.secs", fmt.Sprint(int(cfg.MessageTimeout / time.Second))},
		{"topology.enable.message.timeouts", fmt.Sprint(!cfg.DisableTimeouts)},
		{"topology.executor.receive.buffer.size", fmt.Sprint(cfg.ReceiveQueue)},
		{"topology.transfer.batch.size", fmt.Sprint(cfg.BatchSize)},
		{"topology.batch.flush.interval.millis", fmt.Sprint(cfg.FlushInterval.Milliseconds())},
		{"topology.debug", fmt.Sprint(b.Debug)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	if len(b.Ignored) > 0 {
		fmt.Fprintf(tw, "ignored\t%s\n", strings.Join(b.Ignored, ", "))
	}
	return tw.Flush()
}

// emits lists a component's output streams with their fields, "-" for none.
func emits(c *topology.Component) string {
	ids := make([]string, 0, len(c.Streams))
	for id := range c.Streams {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids {
		s := c.Streams[id]
		p := id + " " + s.Source.Fields.String()
		if s.Direct {
			p += " (direct)"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
