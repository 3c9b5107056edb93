package wordcount

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// parityBolt emits (parity, n, pos, off) for split's JSON numbers: a key and a
// value for a sum, the occurrence passed on.
type parityBolt struct{}

func (parityBolt) Prepare(context.Context, topology.TaskContext) error { return nil }
func (parityBolt) Cleanup() error                                      { return nil }
func (parityBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	n := t.ValueByField("n").(int)
	return out.Emit(tuple.Values{[]string{"even", "odd"}[n&1], n, t.ValueByField("pos"), t.ValueByField("off")})
}

// The pieces on a cluster (JetStream state), in one engine: JSON arrays split into
// numbers, summed by parity and counted by number, each under 20% injected
// failures; the count's first task of each writes its file once the spout's commit
// says done, from the changelogs (a sum's records carry their values), each
// occurrence once.
func TestClusterPiecesSumAndCount(t *testing.T) {
	_, js := clusterState(t, "gale-wordcount")
	dir := t.TempDir()
	var lines []string
	wantSum := map[string]int{}
	wantCount := map[string]int{}
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("[%d, %d, 250]", i, i%13))
		for _, n := range []int{i, i % 13, 250} {
			wantSum[[]string{"even", "odd"}[n&1]] += n
			wantCount[strconv.Itoa(n)]++
		}
	}
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := ClusterState{JS: js, Bucket: "gale-wordcount", Run: "flux-pieces"}
	sumOut, countOut := filepath.Join(dir, "sums.tsv"), filepath.Join(dir, "counts.tsv")
	b := topology.NewBuilder()
	b.SetSpout("lines", ClusterFilesSpout("files", []string{in}, st), 1).Output(lineFields...)
	b.SetBasicBolt("split", NewSplit(SplitConfig{Field: "line", JSON: true, FailRate: 0.2, Seed: 3}), 2).
		ShuffleGrouping("lines").Output("n", "pos", "off")
	b.SetBasicBolt("parity", func() topology.BasicBolt { return parityBolt{} }, 1).ShuffleGrouping("split").Output("parity", "n", "pos", "off")
	b.SetBolt("sum", ClusterCount(CountConfig{Key: "parity", Value: "n", Output: sumOut, FailRate: 0.2, Seed: 4}, st), 2).FieldsGrouping("parity", "parity")
	b.SetBolt("count", ClusterCount(CountConfig{Key: "n", Output: countOut}, st), 3).FieldsGrouping("split", "n")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, clusterConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer stopCluster(t, rt)
	read := func(path string) (map[string]string, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			k, v, _ := strings.Cut(l, "\t")
			m[k] = v
		}
		return m, nil
	}
	var sums, counts map[string]string
	waitfor.Until(t, 60*time.Second, func() error {
		if sums, err = read(sumOut); err != nil {
			return err
		}
		counts, err = read(countOut)
		return err
	})
	if len(sums) != 2 || sums["even"] != strconv.Itoa(wantSum["even"]) || sums["odd"] != strconv.Itoa(wantSum["odd"]) {
		t.Errorf("sums %v, want %v", sums, wantSum)
	}
	if len(counts) != len(wantCount) {
		t.Errorf("%d numbers counted, want %d", len(counts), len(wantCount))
	}
	for n, c := range wantCount {
		if counts[n] != strconv.Itoa(c) {
			t.Errorf("count of %s: %s, want %d", n, counts[n], c)
		}
	}
}

// A count fed by two spouts is refused when its tasks start: its occurrence ids
// are positions in one spout's input.
func TestUpstreamSpoutRefusesTwo(t *testing.T) {
	b := topology.NewBuilder()
	for _, id := range []string{"a", "b"} {
		b.SetSpout(id, FilesSpout("files", nil), 1).Output(lineFields...)
	}
	b.SetBasicBolt("split", NewSplit(SplitConfig{}), 1).ShuffleGrouping("a").ShuffleGrouping("b").Output(splitFields...)
	b.SetBolt("count", NewCount(CountConfig{Output: filepath.Join(t.TempDir(), "c")}), 1).FieldsGrouping("split", "word")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := upstreamSpout(topo, "count"); err == nil || !strings.Contains(err.Error(), "count reads the lines of 2 spouts (a, b), want 1") {
		t.Fatalf("%q, %v", s, err)
	}
	if s, err := upstreamSpout(topo, "split"); err == nil {
		t.Fatalf("split: %q", s)
	}
}
