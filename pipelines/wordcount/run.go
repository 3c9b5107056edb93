package wordcount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
)

// Options configure a word-count run.
type Options struct {
	Files []string
	// FailRate is the probability that split fails a line, and that count fails a word
	// occurrence it has not applied yet, to exercise replays. 0 ≤ FailRate < 1.
	FailRate float64
	// Seed seeds the failure injection (per task).
	Seed uint64
	// Parallelism is the number of split tasks and of count tasks (default 2).
	Parallelism int
	// Config is the topology config (acker tasks, max spout pending, timeout, ...).
	Config topology.Config
	// Progress, if set, is called about every interval with a snapshot while running.
	Progress func(Progress)
	// ProgressInterval defaults to 250 ms.
	ProgressInterval time.Duration
	// RuntimeOptions are passed to engine.Start (e.g. engine.WithLineage).
	RuntimeOptions []engine.Option
	// Hosts > 1 runs the topology as that many engines in this process, each
	// hosting its share of every component's tasks and of the ackers
	// (engine.Spread), talking only through Transport (a new in-process one if
	// nil): what a run across processes does, in one process.
	Hosts     int
	Transport transport.Transport
	// TransportOf, if set, gives each host its own transport (host 1 to Hosts), as
	// processes on NATS each have theirs; it is used even when Hosts is 1. The run
	// closes them when its engines are done.
	TransportOf func(host int) (transport.Transport, error)
	// Started, if set, is called with the running topology (to serve its UI and
	// metrics) before any line is read to the end.
	Started func(*engine.Runtime)

	interpose func() topology.Bolt     // tests: a bolt between the spout and split
	tap       func(*topology.Topology) // tests: sees the topology before it starts
}

// Progress is a running count for progress displays.
type Progress struct {
	Lines, Acked, Replays uint64
	Elapsed               time.Duration
}

// Result is the outcome of a run. Counts maps every word to its number of occurrences.
type Result struct {
	Counts map[string]uint64
	// Lines read, lines acked (trees completed), tree failures (explicit fails, of
	// which TimedOut are timeouts), replays (re-emits after a fail or timeout).
	Lines, Acked, Failed, TimedOut, Replays uint64
	// Unacked lines at the end: left pending, or Lost.
	Unacked uint64
	// Lost lines: unreadable, or changed in their file before a replay could re-read
	// them (reported as errors; the run exits non-zero).
	Lost uint64
	// Words is the number of word occurrences counted; Duplicates the replayed ones
	// absorbed by the count tasks.
	Words, Duplicates uint64
	Elapsed           time.Duration
	// CompleteP50 and CompleteP99 are quantiles of the line trees' complete latency.
	CompleteP50, CompleteP99 time.Duration
	Misuse                   uint64
	Stats                    engine.Stats
	ShutdownErr              error
}

// job is one run: its options, and the two hand-offs from the tasks to Run.
type job struct {
	opts     Options
	progress progress // the spout's progress and end signal
	results  results  // the count tasks' counts, handed over when they stop
}

// Run counts the words of opts.Files and returns when every line has been acked (or
// ctx is canceled). An error means the job could not run (bad options, unreadable
// file); an incomplete run is reported in Result.Unacked.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.Files) == 0 {
		return nil, errors.New("wordcount: no input files")
	}
	if !(opts.FailRate >= 0 && opts.FailRate < 1) { // also refuses NaN
		return nil, fmt.Errorf("wordcount: fail rate %v, must be in [0, 1)", opts.FailRate)
	}
	if opts.FailRate > 0 && opts.Config.Ackers == 0 {
		return nil, errors.New("wordcount: a fail rate needs acker tasks: with 0 ackers nothing is tracked, so failed lines would be lost silently")
	}
	if opts.Config.Logger == nil {
		opts.Config.Logger = slog.Default()
	}
	j := &job{opts: opts}
	j.progress.done = make(chan struct{})
	topo, err := j.build()
	if err != nil {
		return nil, err
	}
	if opts.tap != nil {
		opts.tap(topo)
	}
	start := time.Now()
	engines, closers, err := startEngines(ctx, topo, opts)
	if err != nil {
		return nil, err
	}
	defer closeAll(closers) // after the engines are done
	rt := engines[0]
	if opts.Started != nil {
		opts.Started(rt)
	}
	interval := opts.ProgressInterval
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	canceled := false
wait:
	for {
		select {
		case <-j.progress.done:
			break wait
		case <-ctx.Done():
			canceled = true
			break wait
		case <-tick.C:
			if opts.Progress != nil {
				p := &j.progress
				opts.Progress(Progress{Lines: p.lines.Load(), Acked: p.acked.Load(), Replays: p.replays.Load(), Elapsed: time.Since(start)})
			}
		}
	}
	stopCtx := context.Background()
	if canceled {
		var cancel context.CancelFunc
		stopCtx, cancel = context.WithTimeout(stopCtx, time.Second)
		defer cancel()
	}
	shutdownErr := stopEngines(stopCtx, engines)
	elapsed := time.Since(start)
	st := engines[0].Stats()
	for _, other := range engines[1:] {
		o := other.Stats()
		st.Merge(&o)
	}
	spout := st.Components["lines"]
	p := &j.progress
	counts := j.results.counts
	if counts == nil {
		counts = map[string]uint64{}
	}
	res := &Result{
		Counts: counts, Lines: p.lines.Load(), Acked: p.acked.Load(), Failed: spout.Failed + spout.TimedOut,
		TimedOut: spout.TimedOut, Replays: p.replays.Load(), Duplicates: j.results.dups,
		Elapsed: elapsed, Misuse: st.MisuseTotal(), Stats: st, ShutdownErr: shutdownErr,
		CompleteP50: spout.CompleteLatency.Quantile(0.50), CompleteP99: spout.CompleteLatency.Quantile(0.99),
	}
	for _, n := range counts {
		res.Words += n
	}
	if res.Acked < res.Lines {
		res.Unacked = res.Lines - res.Acked
	}
	res.Lost = p.lost.Load()
	if canceled {
		return res, ctx.Err()
	}
	return res, nil
}

// startEngines starts the topology as one engine, or as opts.Hosts engines sharing
// a transport.
func startEngines(ctx context.Context, topo *topology.Topology, opts Options) (_ []*engine.Runtime, closers []io.Closer, err error) {
	if opts.Hosts <= 1 && opts.TransportOf == nil {
		rt, err := engine.Start(ctx, topo, opts.Config, opts.RuntimeOptions...)
		if err != nil {
			return nil, nil, err
		}
		return []*engine.Runtime{rt}, nil, nil
	}
	defer func() { // on failure, the transports made so far
		if err != nil {
			closeAll(closers)
		}
	}()
	tr := opts.Transport
	if tr == nil {
		tr = transport.NewLocal()
	}
	as, err := engine.Spread(topo, opts.Config, max(opts.Hosts, 1))
	if err != nil {
		return nil, nil, err
	}
	var engines []*engine.Runtime
	for _, a := range as {
		htr := tr
		if opts.TransportOf != nil {
			if htr, err = opts.TransportOf(a.Host); err != nil {
				_ = stopEngines(ctx, engines)
				return nil, closers, fmt.Errorf("wordcount: transport of host %d: %w", a.Host, err)
			}
			closers = append(closers, htr)
		}
		ropts := append([]engine.Option{engine.WithTransport(htr), engine.WithAssignment(a)}, opts.RuntimeOptions...)
		rt, err := engine.Start(ctx, topo, opts.Config, ropts...)
		if err != nil {
			_ = stopEngines(ctx, engines)
			return nil, closers, fmt.Errorf("wordcount: host %d: %w", a.Host, err)
		}
		engines = append(engines, rt)
	}
	return engines, closers, nil
}

func closeAll(closers []io.Closer) {
	for _, c := range closers {
		_ = c.Close()
	}
}

// stopEngines stops every engine at once (each tells the others too) and waits
// until every task has stopped: each count task has then handed over its counts.
func stopEngines(ctx context.Context, engines []*engine.Runtime) error {
	errs := make([]error, len(engines))
	var wg sync.WaitGroup
	for i, rt := range engines {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = rt.Stop(ctx) }()
	}
	wg.Wait()
	for _, rt := range engines {
		<-rt.Done()
	}
	return errors.Join(errs...)
}
