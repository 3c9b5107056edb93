package cli

// gale submit --file FILE.yaml: a topology file (Storm's Flux format) of this
// build's component classes, resolved and built here, shipped resolved (and its
// resources) through the cluster's object store, built again on each worker.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/tuple"
)

// fileOptions are submit's flags for a topology file.
type fileOptions struct {
	file, filter string
	envFilter    bool
	resources    string
	dryRun       bool
}

// loadedFile is a topology file checked and built in the submitter.
type loadedFile struct {
	file    *flux.File
	built   *flux.Built
	archive []byte // the resources' archive (nil: none)
}

// loadFile resolves, checks and builds fo.file with this build's classes, and
// packs its resources: everything that can refuse a submit without the cluster.
func (a *App) loadFile(fo fileOptions, stderr io.Writer) (*loadedFile, error) {
	f, err := flux.Load(fo.file, flux.Options{Filter: fo.filter, EnvFilter: fo.envFilter})
	if err != nil {
		return nil, err
	}
	for _, n := range f.Notes {
		fmt.Fprintf(stderr, "%s: note: %s\n", a.Name, n)
	}
	if err := cluster.CheckTopologyName(f.Name); err != nil {
		return nil, fmt.Errorf("%s: %w", f.NamePos, err)
	}
	if _, err := a.Pipelines.Lookup(f.Name); err == nil {
		return nil, fmt.Errorf("%s: name %q is a serve pipeline of this build: give the file another name", f.NamePos, f.Name)
	}
	if slices.Contains(a.Topologies.Names(), f.Name) {
		return nil, fmt.Errorf("%s: name %q is a topology registered in this build (Go): give the file another name", f.NamePos, f.Name)
	}
	// Built for a cluster, as each worker builds it (cluster.FileFactory), so that
	// a class refuses here what a worker would (a relative path to an input).
	f.Cluster = &component.Cluster{Topology: f.Name}
	b, err := f.Build(&a.Components)
	if err != nil {
		return nil, err
	}
	if len(b.Ignored) > 0 {
		fmt.Fprintf(stderr, "%s: %s: config keys gale does not use, ignored: %s\n", a.Name, fo.file, strings.Join(b.Ignored, ", "))
	}
	lf := &loadedFile{file: f, built: b}
	if fo.resources != "" {
		if lf.archive, err = cluster.Pack(fo.resources); err != nil {
			return nil, fmt.Errorf("--resources %s: %w", fo.resources, err)
		}
	}
	return lf, nil
}

// submitFile is gale submit --file.
func (a *App) submitFile(cmd *cobra.Command, cf *ClusterFlags, fo fileOptions, workers int, wait bool) error {
	if workers < 0 {
		return fmt.Errorf("--workers %d: must be >= 1", workers)
	}
	lf, err := a.loadFile(fo, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	name, b := lf.file.Name, lf.built
	if workers == 0 {
		workers = max(b.Workers, 1) // topology.workers
	}
	fp := cluster.FingerprintOf(name, b.Topology, b.Config)
	if fo.dryRun {
		src := &cluster.Source{File: fo.file, Digest: cluster.Digest(lf.file.Resolved)}
		if lf.archive != nil {
			src.Resources = cluster.Digest(lf.archive)
		}
		fp.Source = src.Fingerprint()
		describeFile(cmd.OutOrStdout(), lf, src, fp, workers)
		return nil
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, st, err := cf.Connect(ctx, "gale submit")
	if err != nil {
		return err
	}
	defer nc.Close()
	ws, err := st.Workers(ctx)
	if err != nil {
		return err
	}
	if len(ws) == 0 {
		return fmt.Errorf("no live worker on the cluster at %s (prefix %s): no scheduler to place %s (it runs in the workers) and nothing to run it: start %s worker first",
			nc.ConnectedUrlRedacted(), st.Config().Prefix, name, a.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	src, err := st.PutSource(ctx, fo.file, lf.file.Resolved, lf.archive)
	if err != nil {
		return err
	}
	fp.Source = src.Fingerprint()
	spec := cluster.Spec{Topology: name, Fingerprint: fp, Tasks: cluster.TasksOf(b.Topology, b.Config), Want: workers, Source: src}
	rec, comps, err := submitSpec(ctx, nc, st, spec, cf.timeout, wait, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	printAssignment(cmd.OutOrStdout(), rec, comps)
	return nil
}

// describeFile prints what submit --dry-run found: the topology, its components
// and their inputs, its tasks, and the fingerprint a submit would give it.
func describeFile(w io.Writer, lf *loadedFile, src *cluster.Source, fp cluster.Fingerprint, workers int) {
	f, b := lf.file, lf.built
	tasks := cluster.TasksOf(b.Topology, b.Config)
	fmt.Fprintf(w, "topology %s (%s): %s, %s; checked, not submitted\n", f.Name, src.File, plural(len(tasks), "task"), plural(workers, "worker"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  COMPONENT\tCLASS\tPARALLELISM\tINPUTS")
	classes := map[string]string{}
	for _, bean := range slices.Concat(f.Spouts, f.Bolts) {
		classes[bean.ID] = bean.Class
	}
	for _, c := range b.Topology.Components {
		var ins []string
		for _, in := range c.Inputs {
			s := in.Component
			if in.Stream != "" && in.Stream != tuple.DefaultStream {
				s += "/" + in.Stream
			}
			g := strings.ToLower(in.Grouping.Kind.String())
			if len(in.Grouping.Fields) > 0 {
				g += "(" + strings.Join(in.Grouping.Fields, ",") + ")"
			}
			ins = append(ins, s+" "+g)
		}
		class := classes[c.ID]
		if class == "" {
			class = "(gale)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", c.ID, class, c.Parallelism, dash(strings.Join(ins, ", ")))
	}
	tw.Flush()
	res := "none"
	if src.Resources != "" {
		res = fmt.Sprintf("%d bytes, sha256 %s", len(lf.archive), src.Resources)
	}
	fmt.Fprintf(w, "resolved document: %d bytes, sha256 %s\nresources: %s\nfingerprint: %s\n", len(f.Resolved), src.Digest, res, fp)
}
