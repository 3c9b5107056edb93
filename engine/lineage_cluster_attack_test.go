package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/lineage"
)

// ClusterTrees with a limit below 1 returns no tree: it panicked (out[:limit] with a
// negative limit) once this host or another kept none.
func TestClusterTreesLimitBelowOne(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 2, FailEvery: 5, SinkTasks: 2}
	// Tasks: src 1, fan 2, sink 3 and 4, acker 5.
	of := map[int]int{1: 1, 2: 2, 3: 2, 4: 1, 5: 1}
	rts, recs := startHosts(t, c, of, []float64{1, 0})
	waitTree(t, recs[0], "15", func(tr lineage.Tree) bool { return tr.Outcome == lineage.Failed })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rt := range rts {
		for _, limit := range []int{0, -1} {
			for _, o := range []lineage.Outcome{lineage.Failed, ""} {
				trees, err := rt.ClusterTrees(ctx, o, limit)
				if err != nil || len(trees) != 0 {
					t.Errorf("ClusterTrees(%q, %d): %d trees, %v; want none, no error", o, limit, len(trees), err)
				}
			}
		}
	}
}
