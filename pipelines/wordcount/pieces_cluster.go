package wordcount

// The pieces (pieces.go) on a gale cluster, for a topology file of builtin's
// classes: the files spout is cluster mode's spout (its low watermark committed to
// KV), the count cluster mode's changelog count, their state under the
// topology's name in ClusterBucket(prefix), made by the tasks themselves (a file
// has no setup step). The output file is written by the count's task 0 once the
// spout's commit says done, from the changelogs: every line is then acked, so
// every occurrence is in them, each counted once (ReadClusterCounts). Written
// again by a task 0 started again elsewhere, it gets the same content.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/topology"
)

// ClusterState is where the pieces keep their state on a cluster.
type ClusterState struct {
	JS jetstream.JetStream
	// Bucket names the KV bucket of the spouts' commits and, with "-changelog",
	// the changelogs' stream (ClusterBucket of the cluster's prefix).
	Bucket string
	// Run names the state of one topology (its name): a spout's key is
	// "<Run>.<spout id>.lines", a count's subjects
	// "wordcount.changelog.<Bucket>.<Run>.<count id>.<task>".
	Run        string
	Generation uint64
	// Replicas of the bucket and the stream when a task makes them (0: 1).
	Replicas int
}

func (st ClusterState) conf(files []string) *clusterConf {
	return &clusterConf{files: files, js: st.JS, bucket: st.Bucket, run: st.Run, generation: st.Generation,
		commitInterval: DefaultCommitInterval, flushInterval: DefaultFlushInterval, opTimeout: clusterOpTimeout}
}

// ensure makes the bucket and the stream if they are not there yet.
func (st ClusterState) ensure(ctx context.Context) error {
	if st.JS == nil {
		return fmt.Errorf("wordcount: no JetStream to keep the state in (built in the submitter?)")
	}
	ctx, cancel := context.WithTimeout(ctx, clusterOpTimeout)
	defer cancel()
	return EnsureClusterState(ctx, st.JS, st.Bucket, max(st.Replicas, 1))
}

// stateToken makes a component id one token of a key or subject.
func stateToken(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, id)
}

// ClusterFilesSpout is FilesSpout on a cluster: it resumes at its committed low
// watermark, wherever it runs. names must be absolute paths, the same files on
// every worker.
func ClusterFilesSpout(class string, names []string, st ClusterState) func() topology.Spout {
	return func() topology.Spout {
		return &clusterFiles{st: st, class: class, names: names}
	}
}

type clusterFiles struct {
	clusterSpout
	st    ClusterState
	class string
	names []string
}

func (s *clusterFiles) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if tc.Parallelism != 1 {
		return fmt.Errorf("%s runs as one task: parallelism %d, want 1", s.class, tc.Parallelism)
	}
	if err := s.st.ensure(ctx); err != nil {
		return err
	}
	s.conf = s.st.conf(s.names)
	s.conf.run = s.st.Run + "." + stateToken(tc.Component)
	return s.clusterSpout.Open(ctx, tc, out)
}

// ClusterCount is NewCount on a cluster: the occurrences it applies go to its
// changelog, and its task 0 writes c.Output once the spout upstream is done.
func ClusterCount(c CountConfig, st ClusterState) func() topology.Bolt {
	f := failures{rate: c.FailRate, seed: c.Seed}
	return func() topology.Bolt {
		b := &clusterCount{st: st, cfg: c}
		b.changelogCount = changelogCount{failures: f, key: c.Key, value: c.Value, finish: b.finish}
		return b
	}
}

type clusterCount struct {
	changelogCount
	st      ClusterState
	cfg     CountConfig
	logRun  string // the changelogs' run: "<Run>.<count id>"
	spoutID string
}

func (b *clusterCount) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	spout, err := upstreamSpout(tc.Topology, tc.Component)
	if err != nil {
		return err
	}
	if err := b.st.ensure(ctx); err != nil {
		return err
	}
	b.spoutID = spout
	b.conf = b.st.conf(nil)
	b.conf.run = b.st.Run + "." + stateToken(spout) // the spout's commit: the floor
	b.logRun = b.st.Run + "." + stateToken(tc.Component)
	b.changelogCount.logRun = b.logRun
	return b.changelogCount.Prepare(ctx, tc, out)
}

// finish waits for the spout's commit to say done, reads the changelogs of every
// task of the component and writes the output file.
func (b *clusterCount) finish(ctx context.Context, tc topology.TaskContext) error {
	done, err := WaitClusterDone(ctx, b.st.JS, b.st.Bucket, b.conf.run)
	if err != nil {
		return err
	}
	var res ClusterCounts
	for {
		rctx, cancel := context.WithTimeout(ctx, restoreTimeout)
		res, err = ReadClusterCounts(rctx, b.st.JS, b.st.Bucket, b.logRun, tc.Parallelism)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		b.log.Warn("count: reading the changelogs failed; trying again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return err
	}
	if b.cfg.Value == "" {
		err = writeCountsFile(b.cfg.Output, res.Counts)
	} else {
		err = writeSumsFile(b.cfg.Output, sumsOf(res.Counts))
	}
	if err == nil {
		b.log.Info("count: output written", "file", b.cfg.Output, "keys", len(res.Counts), "occurrences", res.Words,
			"duplicates", res.Duplicates, "spout_low", done.Low)
	}
	return err
}

// sumRecord is a sum's changelog record: the key and the value, NUL between, so
// that the changelogs' counts per record give the sums (sumsOf).
func sumRecord(key string, v float64) string {
	return key + "\x00" + strconv.FormatFloat(v, 'g', -1, 64)
}

func sumsOf(records map[string]uint64) map[string]float64 {
	sums := map[string]float64{}
	for r, n := range records {
		key, val, _ := strings.Cut(r, "\x00")
		v, _ := strconv.ParseFloat(val, 64) // written by sumRecord
		sums[key] += v * float64(n)
	}
	return sums
}

// upstreamSpout is the one spout whose lines reach component id: occurrence ids
// are positions in one spout's input, so a count over two spouts' lines would
// take one's occurrences for the other's.
func upstreamSpout(topo *topology.Topology, id string) (string, error) {
	if topo == nil {
		return "", fmt.Errorf("wordcount: no topology in the task context")
	}
	seen := map[string]bool{}
	var spouts []string
	var walk func(string)
	walk = func(c string) {
		if seen[c] {
			return
		}
		seen[c] = true
		comp := topo.Component(c)
		if comp == nil {
			return
		}
		if comp.IsSpout() {
			spouts = append(spouts, c)
			return
		}
		for _, in := range comp.Inputs {
			walk(in.Component)
		}
	}
	walk(id)
	if len(spouts) != 1 {
		return "", fmt.Errorf("%s reads the lines of %d spouts (%s), want 1: its occurrence ids are positions in one spout's files", id, len(spouts), strings.Join(spouts, ", "))
	}
	return spouts[0], nil
}
