package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/pipelines/wordcount"
)

// A variant of TestAttackKillWorkerBuiltinWords: the worker kill -9'd mid-run is
// one running count tasks but not the files spout (the count's first task, which
// writes the counts file, when it is not with the spout): the spout keeps
// reading, its lines to the dead count tasks time out and are replayed, the
// count tasks restore from their changelogs on the surviving worker, and the
// counts file is exact, no line lost.
func TestAttackKillCountWorkerBuiltinWords(t *testing.T) {
	c := newAtkCluster(t)
	c.startWorker("w1")
	c.startWorker("w2")
	c.waitLive("w1", "w2")
	counts := filepath.Join(c.dir, "counts.tsv")
	filter := writeWordsFilter(t, c.dir, filepath.Join(filepath.Dir(c.files[0]), "*.txt"), counts, 0.05)
	args := append([]string{"submit"}, c.conn()...)
	args = append(args, "--timeout", "20s", "--workers", "2", "--file", wordsFlux, "--filter", filter)
	if out, errs, code, _ := c.gale(args...); code != 0 {
		t.Fatalf("gale submit --file: exit %d\nstdout: %s\nstderr: %s\n%s", code, out, errs, c.logs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	rec, err := c.st.Record(ctx, "words")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	sp, err := c.st.Spec(ctx, "words")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	spout := c.holders(rec, "lines")
	if len(spout) != 1 || len(rec.Assignment.Workers) != 2 {
		t.Fatalf("placed: %+v (spout on %v)", rec.Assignment, spout)
	}
	// The count's tasks by id (its first task is the lowest), and the first of
	// them whose worker does not run the spout.
	var countTasks []int
	for _, task := range sp.Tasks {
		if task.Component == "count" {
			countTasks = append(countTasks, task.ID)
		}
	}
	slices.Sort(countTasks)
	target, first := "", false
	for i, id := range countTasks {
		if w := rec.Assignment.Of[id]; w != spout[0] {
			target, first = w, i == 0
			break
		}
	}
	if target == "" {
		t.Skipf("every count task is on the spout's worker %s: %+v", spout[0], rec.Assignment)
	}

	const run = "flux-words.lines"
	c.waitProgress(run)
	c.signal(target, syscall.SIGKILL)
	c.awaitRunning(rec, 10*time.Second)

	want, err := wordcount.CountFiles(c.files)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]uint64
	waitfor.Until(t, 45*time.Second, func() error {
		if _, err := os.Stat(counts); err != nil {
			return fmt.Errorf("no counts file yet: %w\n%s", err, c.logs())
		}
		got = readCounts(t, counts) // written whole, renamed into place
		return nil
	})
	if !maps.Equal(got, want) {
		diff := 0
		for w, n := range want {
			if got[w] != n && diff < 5 {
				t.Errorf("%q: %d, want %d", w, got[w], n)
				diff++
			}
		}
		t.Fatalf("counts not exact: %d distinct words, want %d\n%s", len(got), len(want), c.logs())
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cm, err := wordcount.ClusterProgress(ctx, c.js, wordcount.ClusterBucket(cluster.DefaultPrefix), run)
	if err != nil {
		t.Fatal(err)
	}
	if !cm.Done || cm.Lost != 0 {
		t.Errorf("commit %+v: want done, nothing lost", cm)
	}
	if _, err := c.st.Kill(ctx, "words"); err != nil {
		t.Errorf("kill: %v", err)
	}
	t.Logf("exact: %d distinct words; killed %s (count's first task there: %v), spout on %s; %d replays",
		len(want), target, first, spout[0], cm.Replays)
}
