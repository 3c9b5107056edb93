package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/cluster/placement"
	"github.com/gale-stream/gale/cluster/worker"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/server"
)

// clusterFlags are how every cluster command reaches the cluster: the NATS URL,
// credentials as nats.go takes them, and the cluster's prefix.
type ClusterFlags struct {
	url      string
	natsData string // an embedded node's data directory: its gale.nk
	creds    string // a .creds file (JWT + nkey) of a real cluster
	nkey     string // an nkey seed file
	prefix   string
	replicas int
	hbTTL    time.Duration
	leaseTTL time.Duration
	timeout  time.Duration
	// noCreate: the command only looks at or asks the cluster, and never creates
	// its buckets (registerClient).
	noCreate bool
}

func (c *ClusterFlags) register(f *pflag.FlagSet) {
	c.registerAs(f, "timeout", "nats://127.0.0.1:4222")
}

// registerAs registers the flags with the wait's flag named timeoutFlag (gale serve
// has a --timeout of its own) and the URL's default.
func (c *ClusterFlags) registerAs(f *pflag.FlagSet, timeoutFlag, defaultURL string) {
	c.registerConn(f, timeoutFlag, defaultURL)
	f.IntVar(&c.replicas, "replicas", 0, "copies of the cluster's KV buckets when creating them (0: 1; 3 on a three-node cluster)")
	f.DurationVar(&c.hbTTL, "heartbeat-ttl", 0, "a worker not heard from this long is lost (when creating the buckets; 0: 3s)")
	f.DurationVar(&c.leaseTTL, "lease-ttl", 0, "the scheduler's lease (when creating the buckets; 0: 3s)")
}

// registerClient registers the flags of a command that only looks at or asks the
// cluster (submit, kill, cluster status, ...): it binds the buckets a worker made,
// and has no use for the flags that only matter when creating them.
func (c *ClusterFlags) registerClient(f *pflag.FlagSet) {
	c.registerConn(f, "timeout", "nats://127.0.0.1:4222")
	c.noCreate = true
}

func (c *ClusterFlags) registerConn(f *pflag.FlagSet, timeoutFlag, defaultURL string) {
	f.StringVar(&c.url, "nats", defaultURL, "NATS URL(s), comma-separated")
	f.StringVar(&c.natsData, "nats-data", natsnode.DefaultDataDir, "data directory of the embedded node (gale nats --data): its credentials DATA/gale.nk are used if present and no --creds/--nkey is given")
	f.StringVar(&c.creds, "creds", "", "NATS credentials file (JWT and nkey, as nats.go's UserCredentials takes it)")
	f.StringVar(&c.nkey, "nkey", "", "NATS nkey seed file")
	f.StringVar(&c.prefix, "prefix", cluster.DefaultPrefix, "the cluster's prefix: its KV buckets and every subject start with it")
	f.DurationVar(&c.timeout, timeoutFlag, 30*time.Second, "how long the command waits for the cluster")
}

// natsOptions returns the connection options the flags name.
func (c *ClusterFlags) natsOptions(name string) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	switch {
	case c.creds != "":
		opts = append(opts, nats.UserCredentials(c.creds))
	case c.nkey != "":
		o, err := nats.NkeyOptionFromSeed(c.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nkey %s: %w", c.nkey, err)
		}
		opts = append(opts, o)
	default:
		if _, err := os.Stat(natsnode.CredentialsFile(c.natsData)); err == nil {
			o, err := natsnode.ClientOptions(c.natsData)
			if err != nil {
				return nil, err
			}
			opts = append(opts, o...)
		}
	}
	return opts, nil
}

// connect connects to the cluster and binds its state.
func (c *ClusterFlags) Connect(ctx context.Context, name string) (*nats.Conn, *cluster.Store, error) {
	opts, err := c.natsOptions(name)
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			if c.creds == "" && c.nkey == "" {
				if _, serr := os.Stat(natsnode.CredentialsFile(c.natsData)); serr != nil {
					return nil, nil, fmt.Errorf("NATS at %s wants credentials, and there are none in %s (give --nats-data of the embedded node, the DATA of gale nats --data DATA; or --creds or --nkey): %w", c.url, natsnode.CredentialsFile(c.natsData), err)
				}
				return nil, nil, fmt.Errorf("NATS at %s refused the credentials in %s (another node's? give --nats-data of the node at that URL, or --creds or --nkey): %w", c.url, natsnode.CredentialsFile(c.natsData), err)
			}
			return nil, nil, fmt.Errorf("NATS at %s refused the credentials (--creds or --nkey): %w", c.url, err)
		}
		return nil, nil, fmt.Errorf("NATS at %s: %w", c.url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	octx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	st, err := cluster.Open(octx, js, cluster.Config{Prefix: c.prefix, Replicas: c.replicas, HeartbeatTTL: c.hbTTL, LeaseTTL: c.leaseTTL,
		NoCreate: c.noCreate})
	if err != nil {
		nc.Close()
		var nce *cluster.NoClusterError
		if errors.As(err, &nce) {
			return nil, nil, fmt.Errorf("no gale cluster with prefix %q at %s: its bucket %s does not exist; a gale worker creates the cluster's buckets when it joins (or give the cluster's --prefix)",
				nce.Prefix, c.url, nce.Bucket)
		}
		return nil, nil, fmt.Errorf("the cluster's state at %s: %w", c.url, err)
	}
	return nc, st, nil
}

func (a *App) workerCmd() *cobra.Command {
	var (
		cf               ClusterFlags
		name             string
		slots            int
		dedicated        bool
		noScheduler      bool
		stopTimeout      time.Duration
		logLevel, logFmt string
		uiAddr, uiToken  string
		cpuProfile       string
		lineageSample    float64
		resourcesDir     string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Join a gale cluster on NATS and run the tasks it assigns to this process",
		Long: `Join a gale cluster on NATS and run whatever tasks the scheduler assigns to this
worker, until SIGINT or SIGTERM (then its tasks drain, and the cluster moves them).

Topologies are Go code compiled into this binary (` + a.submittable() + `; serve
pipelines: ` + a.pipelineNames() + `), or topology files (gale submit --file)
built from its component classes: a worker whose build lacks a submitted topology
or a class its file names, or has another fingerprint of it, refuses it and says
why (gale cluster status), and the scheduler places it on other workers.

Every worker also stands for scheduler: one at a time holds a lease in JetStream KV,
and another takes over when it is lost. A worker not heard from for the heartbeat
TTL (3 s by default) is lost and its tasks run elsewhere. Restarting a dead worker
process is the job of systemd or Kubernetes, as Storm's supervisor does it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := NewLogger(cmd.ErrOrStderr(), logLevel, logFmt)
			if err != nil {
				return err
			}
			lc := lineage.DefaultConfig()
			lc.Sample = lineageSample
			if err := lc.Validate(); err != nil {
				return fmt.Errorf("--lineage-sample %v: must be in [0, 1]", lineageSample)
			}
			// Tuples are short-lived garbage, as in gale wordcount: a larger GC target
			// trades tens of MB for throughput. GOGC in the environment still wins.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(400)
			}
			if cpuProfile == "" {
				if dir := os.Getenv("GALE_WORKER_CPUPROFILE"); dir != "" {
					cpuProfile = filepath.Join(dir, fmt.Sprintf("worker-%s-%d.pprof", name, os.Getpid()))
				}
			}
			if cpuProfile != "" {
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					pf.Close()
					return err
				}
				defer pf.Close()
				defer pprof.StopCPUProfile()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var wu *worker.UI // nil without --ui: does nothing
			if uiAddr != "" {
				if wu, err = worker.ListenUI(uiAddr, uiToken); err != nil {
					return fmt.Errorf("--ui %s: %w", uiAddr, err)
				}
				defer wu.Close()
			}
			nc, st, err := cf.Connect(ctx, "gale worker "+name)
			if err != nil {
				return err
			}
			defer nc.Close()
			// Topology files (gale submit --file) and pipeline files (gale serve --nats
			// --pipeline FILE.yaml) are built with this binary's classes.
			a.Topologies.SetFileFactory(server.FileWorkerFactory(&a.Components))
			wcfg := worker.Config{Name: name, Slots: slots, Dedicated: dedicated, Conn: nc, Store: st,
				Registry: &a.Topologies, NoScheduler: noScheduler, StopTimeout: stopTimeout, Logger: logger, Lineage: &lc,
				ResourcesDir: resourcesDir}
			wu.Hook(&wcfg)
			w, err := worker.New(wcfg)
			if err != nil {
				return err
			}
			if wu != nil {
				if err := wu.Serve(w.Name(), st); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "gale: worker %s: web UI on %s (Prometheus metrics at %smetrics)\n", w.Name(), wu.URL(), wu.URL())
			}
			logger.Info("worker joining", "name", w.Name(), "nats", nc.ConnectedUrlRedacted(), "prefix", st.Config().Prefix, "slots", slots, "topologies", a.Topologies.Names())
			return w.Run(ctx)
		},
	}
	f := cmd.Flags()
	cf.register(f)
	f.StringVar(&name, "name", "", "this worker's name, unique among live workers (default: host name and pid)")
	f.IntVar(&slots, "slots", 1, "how many topologies this worker runs at once")
	f.BoolVar(&dedicated, "dedicated", false, "take only tasks pinned to this worker")
	f.BoolVar(&noScheduler, "no-scheduler", false, "never hold the scheduler's lease")
	f.DurationVar(&stopTimeout, "stop-timeout", 30*time.Second, "bound on draining a topology's trees on a planned stop")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFmt, "log-format", "text", "text or json")
	f.Float64Var(&lineageSample, "lineage-sample", lineage.DefaultConfig().Sample,
		"fraction of tuple trees recorded whole when this worker runs a topology's spout (the spout's process decides for every worker); failed and timed-out trees are always recorded")
	f.StringVar(&uiAddr, "ui", "", "serve the web UI of the topology this worker runs (every process's stats, the cluster's workers) and Prometheus /metrics on this address (e.g. 127.0.0.1:8080; :8080 listens on every interface)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of this process to this file until it exits (default: GALE_WORKER_CPUPROFILE=DIR in the environment writes DIR/worker-NAME-PID.pprof, so the workers gale wordcount --workers and gale bench cluster start can be profiled)")
	f.StringVar(&resourcesDir, "resources-dir", "gale-resources", "where the resources of topology files (gale submit --resources) are unpacked, one directory TOPOLOGY-DIGEST each (relative: to the working directory)")
	f.StringVar(&uiToken, "ui-token", "", "require this token on the UI and /metrics (Authorization: Bearer, or ?token=); it also allows the UI's actions (kill, deactivate, activate, rebalance)")
	return cmd
}

// splitSubmitArgs takes submit's own flags out of args; the first other word is the
// topology, and the rest are its flags.
func (a *App) splitSubmitArgs(f *pflag.FlagSet, args []string) (own []string, topo string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if strings.HasPrefix(arg, "-") {
			name := strings.TrimLeft(arg, "-")
			name, _, hasVal := strings.Cut(name, "=")
			var fl *pflag.Flag
			if strings.HasPrefix(arg, "--") {
				fl = f.Lookup(name)
			} else if len(name) == 1 {
				fl = f.ShorthandLookup(name)
			}
			if fl != nil && topo != "" && a.topologyFlags(topo) != nil && a.topologyFlags(topo).Lookup(name) != nil {
				fl = nil // after its name, the topology's own flag wins (word count's --timeout)
			}
			if fl != nil {
				own = append(own, arg)
				if !hasVal && fl.NoOptDefVal == "" {
					if i+1 >= len(args) {
						return nil, "", nil, fmt.Errorf("flag %s needs arg value", arg)
					}
					i++
					own = append(own, args[i])
				}
				continue
			}
			if topo == "" {
				return nil, "", nil, fmt.Errorf("unknown flag %s before the topology's name (gale submit [flags] TOPOLOGY [its flags])", arg)
			}
			rest = append(rest, arg)
			continue
		}
		if topo == "" {
			topo = arg
			continue
		}
		rest = append(rest, arg)
	}
	return own, topo, rest, nil
}

func (a *App) submitCmd() *cobra.Command {
	var (
		cf      ClusterFlags
		workers int
		noWait  bool
		fo      fileOptions
	)
	cmd := &cobra.Command{
		Use:   "submit [flags] TOPOLOGY [flags of the topology] | submit --file FILE.yaml [flags]",
		Short: "Submit a topology compiled into this binary to a gale cluster",
		Long: `Submit a topology to the cluster's scheduler, which places its tasks evenly on
--workers workers; wait until every one of them runs its part, and print where each
task runs. Topologies in this build: ` + a.submittable() + `.

The topology's own flags follow its name (gale submit TOPOLOGY --help lists
them), e.g.
  gale submit --workers 3 wordcount --fail-rate 0.05 testdata/books/*.txt
and every worker builds the topology with them; a worker whose build differs
(another fingerprint) refuses it and says why. Submit's flags may follow the name
too, except where the topology has a flag of that name (word count's --timeout is
its message timeout; put submit's --timeout before the name).

With --file, the topology is a file in Storm's Flux format naming this build's
component classes (gale components), under the file's name:. Submit resolves it
(--filter, --env-filter, includes) and builds it here first: a bad file is refused
with FILE:LINE:COLUMN before anything connects (--dry-run stops there, printing the
topology). It ships the resolved document, and --resources DIR as an archive,
through the cluster's object store; each worker builds the document with its own
classes (one lacking a class refuses it, naming it) and unpacks the resources in
its --resources-dir. kill, deactivate, activate and rebalance take the file's
name.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			own, topo, rest, err := a.splitSubmitArgs(f, args)
			if err != nil {
				return err
			}
			if err := f.Parse(own); err != nil {
				return err
			}
			if fo.file != "" {
				if help, _ := f.GetBool("help"); help {
					return cmd.Help()
				}
				if topo != "" || len(rest) > 0 {
					return fmt.Errorf("--file %s names the topology (its name:): no TOPOLOGY word or topology flags with it (got %q)", fo.file, strings.TrimSpace(topo+" "+strings.Join(rest, " ")))
				}
				if !f.Changed("workers") {
					workers = 0 // the file's topology.workers, else 1
				}
				return a.submitFile(cmd, &cf, fo, workers, !noWait)
			}
			if fo.filter != "" || fo.envFilter || fo.resources != "" || fo.dryRun {
				return errors.New("--filter, --env-filter, --resources and --dry-run go with --file FILE.yaml")
			}
			if help, _ := f.GetBool("help"); help {
				if topo != "" && slices.Contains(a.Topologies.Names(), topo) && a.topologyFlags(topo) == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "Topology %s declares no flags (app.TopologyFlags): what follows its name reaches its factory as given, in env.Args.\n(%s --help lists submit's own flags.)\n", topo, cmd.CommandPath())
					return nil
				}
				if tf := a.topologyFlags(topo); topo != "" && tf != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "Usage:\n  %s [submit's flags] %s [its flags]\n\nFlags of topology %s:\n%s\n(%s --help lists submit's own.)\n",
						cmd.CommandPath(), topo, topo, tf.FlagUsages(), cmd.CommandPath())
					return nil
				}
				return cmd.Help()
			}
			if topo == "" {
				return fmt.Errorf("name the topology to submit (this build has: %s)", a.submittable())
			}
			if _, err := a.Pipelines.Lookup(topo); err == nil {
				return fmt.Errorf("%q is a serve pipeline: %s serve --nats --pipeline %s submits it, with the log spout in the serve process", topo, a.Name, topo)
			}
			if !slices.Contains(a.Topologies.Names(), topo) {
				return fmt.Errorf("%w: %q (this build has: %s)", cluster.ErrUnknownTopology, topo, a.submittable())
			}
			if workers < 0 {
				return fmt.Errorf("--workers %d: must be >= 1", workers)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rest, err = a.normalizeArgs(topo, rest)
			if err != nil {
				return err
			}
			nc, st, err := cf.Connect(ctx, "gale submit")
			if err != nil {
				return err
			}
			defer nc.Close()
			rec, comps, err := a.SubmitTopology(ctx, nc, st, topo, rest, workers, cf.timeout, !noWait, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			printAssignment(cmd.OutOrStdout(), rec, comps)
			return nil
		},
	}
	f := cmd.Flags()
	cf.registerClient(f)
	f.IntVar(&workers, "workers", 1, "how many workers to spread the topology over")
	f.BoolVar(&noWait, "no-wait", false, "return once placed, without waiting for the workers to run it")
	f.StringVar(&fo.file, "file", "", "submit a topology file (Storm's Flux YAML) of this build's component classes, under its name:")
	f.StringVar(&fo.filter, "filter", "", "with --file: a properties file whose keys ${key} in the topology file names (Flux's --filter)")
	f.BoolVar(&fo.envFilter, "env-filter", false, "with --file: replace ${ENV-NAME} by the environment variable NAME (Flux's --env-filter)")
	f.StringVar(&fo.resources, "resources", "", "with --file: a directory shipped to every worker running the topology, unpacked in its --resources-dir (shell components run there)")
	f.BoolVar(&fo.dryRun, "dry-run", false, "with --file: check and build the file here and print the topology; connect to nothing")
	f.BoolP("help", "h", false, "help for submit")
	return cmd
}

// SubmitTopology builds topo with args in this build (its fingerprint, and its
// setup: the streams and buckets its tasks keep state in), submits it, and waits
// for the scheduler's placement and, if wait, for every assigned worker to run it.
func (a *App) SubmitTopology(ctx context.Context, nc *nats.Conn, st *cluster.Store, topo string, args []string, workers int, timeout time.Duration, wait bool, progress io.Writer) (*cluster.Record, map[int]string, error) {
	// Without a live worker there is no scheduler to answer (it runs in the workers)
	// and nothing to run the topology: say so now, not after the timeout, and
	// before the topology's setup makes its state.
	if ws, err := st.Workers(ctx); err != nil {
		return nil, nil, err
	} else if len(ws) == 0 {
		return nil, nil, fmt.Errorf("no live worker on the cluster at %s (prefix %s): no scheduler to place %s (it runs in the workers) and nothing to run it: start gale worker first",
			nc.ConnectedUrlRedacted(), st.Config().Prefix, topo)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	dep, err := a.Topologies.Build(ctx, cluster.Env{Topology: topo, Args: args, Conn: nc, JS: js, Prefix: st.Config().Prefix})
	if err != nil {
		return nil, nil, err
	}
	if dep.Close != nil {
		defer dep.Close()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if setup := a.Extras[topo].Setup; setup != nil {
		if err := setup(ctx, js, st.Config().Prefix, args); err != nil {
			return nil, nil, fmt.Errorf("topology %s: setting up its state: %w", topo, err)
		}
	}
	tasks := cluster.TasksOf(dep.Topology, dep.Config)
	return submitSpec(ctx, nc, st, cluster.Spec{Topology: topo, Fingerprint: cluster.FingerprintOf(topo, dep.Topology, dep.Config),
		Tasks: tasks, Want: workers, Args: args}, timeout, wait, progress)
}

// submitSpec submits spec (its context bounded by timeout) and waits for the
// scheduler's placement and, if wait, for every assigned worker to run it.
func submitSpec(ctx context.Context, nc *nats.Conn, st *cluster.Store, spec cluster.Spec, timeout time.Duration, wait bool, progress io.Writer) (*cluster.Record, map[int]string, error) {
	topo, tasks := spec.Topology, spec.Tasks
	rec, err := st.Submit(ctx, spec)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("no answer from the cluster's scheduler in %v to place %s (is a gale worker running against %s?): %w", timeout, topo, nc.ConnectedUrlRedacted(), err)
		}
		return nil, nil, err
	}
	if !wait {
		return rec, componentsOf(tasks), nil
	}
	rec, err = awaitRunning(ctx, st, rec, progress)
	switch {
	case errors.Is(err, cluster.ErrRefused):
		// No worker can run it: a submit that failed leaves nothing behind to
		// start by itself when such a worker joins later.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, kerr := st.Kill(kctx, topo)
		kcancel()
		if kerr != nil {
			return rec, componentsOf(tasks), fmt.Errorf("%w (and withdrawing it failed: %v; gale kill %s withdraws it)", err, kerr, topo)
		}
		return rec, componentsOf(tasks), fmt.Errorf("%w; the submission is withdrawn", err)
	case err != nil:
		return rec, componentsOf(tasks), fmt.Errorf("%w (it stays submitted: gale cluster status shows it, gale kill %s withdraws it)", err, topo)
	}
	return rec, componentsOf(tasks), nil
}

// awaitRunning waits until every worker of rec's generation runs it
// (Store.AwaitRunning), printing each worker's refusal on progress.
func awaitRunning(ctx context.Context, st *cluster.Store, rec *cluster.Record, progress io.Writer) (*cluster.Record, error) {
	return st.AwaitRunning(ctx, rec, cluster.AwaitOptions{Refused: func(w string, r cluster.Refusal) {
		fmt.Fprintf(progress, "gale: worker %s refused %s: %s\n", w, rec.Topology, r.Reason)
	}})
}

// printAssignment prints where each task of rec runs; comps names each task's
// component (nil: ids only).
func printAssignment(w io.Writer, rec *cluster.Record, comps map[int]string) {
	a := rec.Assignment
	if a == nil {
		fmt.Fprintf(w, "%s: not placed\n", rec.Topology)
		return
	}
	fmt.Fprintf(w, "%s: generation %d on %s (fingerprint %s)\n", rec.Topology, a.Generation, plural(len(a.Workers), "worker"), rec.Fingerprint)
	WriteTasks(w, a, comps)
}

func WriteTasks(w io.Writer, a *placement.Assignment, comps map[int]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKER\tTASKS")
	for _, wk := range a.Workers {
		fmt.Fprintf(tw, "  %s\t%s\n", wk, DescribeTasks(a.Tasks(wk), comps))
	}
	tw.Flush()
}

// describeTasks lists task ids by component: "lines[1] split[2 3] __acker[6]".
func DescribeTasks(ids []int, comps map[int]string) string {
	slices.Sort(ids)
	if comps == nil {
		return fmt.Sprint(ids)
	}
	var order []string
	by := map[string][]int{}
	for _, id := range ids {
		c := comps[id]
		if _, ok := by[c]; !ok {
			order = append(order, c)
		}
		by[c] = append(by[c], id)
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%s%v", c, by[c]))
	}
	return strings.Join(parts, " ")
}

// componentsOf maps task ids to component names.
func componentsOf(tasks []placement.Task) map[int]string {
	m := make(map[int]string, len(tasks))
	for _, t := range tasks {
		m[t.ID] = t.Component
	}
	return m
}

func clusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Look at a gale cluster on NATS"}
	var cf ClusterFlags
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster's workers, its scheduler and its topologies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, st, err := cf.Connect(cmd.Context(), "gale cluster status")
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			s, err := st.Status(ctx)
			if err != nil {
				return err
			}
			writeStatus(cmd.OutOrStdout(), s, time.Now())
			return nil
		},
	}
	cf.registerClient(status.Flags())
	cmd.AddCommand(status)
	return cmd
}

// writeStatus prints a cluster's status as `gale cluster status` shows it.
func writeStatus(w io.Writer, s *cluster.Status, now time.Time) {
	if s.Lease != nil {
		fmt.Fprintf(w, "scheduler: %s (since %s)\n", s.Lease.Holder, s.Lease.Since.Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "scheduler: none (no worker holds the lease)")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHOST\tPID\tUPTIME\tBEAT AGE\tSLOTS\tRUNNING\tREFUSED")
	for _, wi := range s.Workers {
		var run []string
		for _, t := range slices.Sorted(maps.Keys(wi.Running)) {
			run = append(run, fmt.Sprintf("%s@g%d", t, wi.Running[t]))
		}
		var ref []string
		for _, t := range slices.Sorted(maps.Keys(wi.Refused)) {
			ref = append(ref, t+": "+wi.Refused[t].Reason)
		}
		slots := fmt.Sprint(wi.Slots)
		if wi.Dedicated {
			slots += " (dedicated)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", wi.Name, wi.Host, wi.PID,
			now.Sub(wi.Started).Round(time.Second), now.Sub(wi.Beat).Round(10*time.Millisecond), slots,
			dash(strings.Join(run, " ")), dash(strings.Join(ref, "; ")))
	}
	tw.Flush()
	specs := map[string]*cluster.Spec{}
	for _, sp := range s.Specs {
		specs[sp.Topology] = sp
	}
	// A record never placed whose request is withdrawn (refused, or not answered)
	// is left out, whether the scheduler has marked it killed yet or not: nothing
	// ran, and "killed, generation 0" would say something did.
	recs := slices.DeleteFunc(slices.Clone(s.Records), func(r *cluster.Record) bool {
		sp := specs[r.Topology]
		return r.Assignment == nil && (r.Killed || sp == nil || sp.Killed)
	})
	if len(recs) == 0 {
		fmt.Fprintln(w, "no topologies")
		return
	}
	for _, r := range recs {
		state := "active"
		switch {
		case r.Killed:
			state = "killed"
		case r.Inactive:
			state = "inactive"
		}
		gen := fmt.Sprintf("%s, generation %d", state, r.Generation())
		if r.Assignment == nil {
			gen = "not placed yet"
		}
		fmt.Fprintf(w, "\ntopology %s: %s, want %s, fingerprint %s\n", r.Topology, gen, plural(r.Want, "worker"), r.Fingerprint)
		if r.Error != "" {
			fmt.Fprintf(w, "  last request refused: %s\n", r.Error)
		}
		if r.Short > 0 {
			var refusers []string
			for _, wi := range s.Workers {
				if ref, ok := wi.Refused[r.Topology]; ok && ref.Fingerprint == r.Fingerprint.String() {
					refusers = append(refusers, wi.Name)
				}
			}
			if len(refusers) > 0 {
				fmt.Fprintf(w, "  short of %s: refused by %s (another build: see the REFUSED column); a worker of this build that joins fills the gap\n",
					plural(r.Short, "worker"), strings.Join(refusers, ", "))
			} else {
				fmt.Fprintf(w, "  short of %s (no free slots); a later pass fills the gap\n", plural(r.Short, "worker"))
			}
		}
		if r.Assignment != nil && !r.Killed {
			var comps map[int]string
			if sp := specs[r.Topology]; sp != nil {
				comps = componentsOf(sp.Tasks)
			}
			WriteTasks(w, r.Assignment, comps)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// actionCmd is one of Storm's actions on a submitted topology.
func actionCmd(use, short string, act func(ctx context.Context, st *cluster.Store, topo string, workers int) (*cluster.Record, error), withWorkers bool) *cobra.Command {
	var (
		cf      ClusterFlags
		workers int
	)
	cmd := &cobra.Command{
		Use:   use + " TOPOLOGY",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, st, err := cf.Connect(cmd.Context(), "gale "+use)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			rec, err := act(ctx, st, args[0], workers)
			if err != nil {
				return err
			}
			if use == "rebalance" {
				if rec, err = awaitRunning(ctx, st, rec, cmd.ErrOrStderr()); err != nil {
					return err
				}
				var comps map[int]string
				if sp, err := st.Spec(ctx, rec.Topology); err == nil {
					comps = componentsOf(sp.Tasks)
				}
				printAssignment(cmd.OutOrStdout(), rec, comps)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (generation %d)\n", rec.Topology, use, rec.Generation())
			return nil
		},
	}
	cf.registerClient(cmd.Flags())
	if withWorkers {
		cmd.Flags().IntVar(&workers, "workers", 0, "run on this many workers (0: as many as now, evened over the live workers)")
	}
	return cmd
}

func stormActionCmds() []*cobra.Command {
	return []*cobra.Command{
		actionCmd("kill", "Stop a topology on every worker (its trees drain first) and free its slots",
			func(ctx context.Context, st *cluster.Store, t string, _ int) (*cluster.Record, error) {
				return st.Kill(ctx, t)
			}, false),
		actionCmd("deactivate", "Stop a topology's spouts: its workers drain its trees and stop it, keeping its placement",
			func(ctx context.Context, st *cluster.Store, t string, _ int) (*cluster.Record, error) {
				return st.Deactivate(ctx, t)
			}, false),
		actionCmd("activate", "Run a deactivated topology again",
			func(ctx context.Context, st *cluster.Store, t string, _ int) (*cluster.Record, error) {
				return st.Activate(ctx, t)
			}, false),
		actionCmd("rebalance", "Move a topology's tasks over --workers workers: drain, move, resume",
			func(ctx context.Context, st *cluster.Store, t string, n int) (*cluster.Record, error) {
				return st.Rebalance(ctx, t, n)
			}, true),
	}
}

// ClusterAt returns the flags of the cluster at url with its default prefix: the
// embedded nodes gale wordcount --workers starts (natsData: their data directory).
func ClusterAt(url, natsData string, replicas int, heartbeat, timeout time.Duration) ClusterFlags {
	return ClusterFlags{url: url, natsData: natsData, prefix: cluster.DefaultPrefix, replicas: replicas, hbTTL: heartbeat, leaseTTL: heartbeat, timeout: timeout}
}
