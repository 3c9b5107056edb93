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

// The built-ins' word count (testdata/flux/words.yaml) submitted as a file to two
// gale workers, split and count failing 5% of what they get, and the worker that
// runs the files spout kill -9'd mid-run: the spout resumes on the other worker at
// its committed offset, the count tasks that died restore from their changelogs,
// and the count's first task writes the counts file once every line is acked:
// equal to the books counted independently, no line lost.
func TestAttackKillWorkerBuiltinWords(t *testing.T) {
	attackBuiltinWords(t, true, func(_ *cluster.Record, _ *cluster.Spec, spout string) (string, string) {
		return spout, "the spout's"
	})
}

// The worker kill -9'd mid-run is one running count tasks but not the files spout
// (the count's first task, which writes the counts file, when it is not with the
// spout): the spout keeps reading, its lines to the dead count tasks time out and
// are replayed, the count tasks restore from their changelogs on the surviving
// worker, and the counts file is exact, no line lost.
func TestAttackKillCountWorkerBuiltinWords(t *testing.T) {
	attackBuiltinWords(t, false, func(rec *cluster.Record, sp *cluster.Spec, spout string) (string, string) {
		// The count's tasks by id (its first task is the lowest), and the first of
		// them whose worker does not run the spout.
		var countTasks []int
		for _, task := range sp.Tasks {
			if task.Component == "count" {
				countTasks = append(countTasks, task.ID)
			}
		}
		slices.Sort(countTasks)
		for i, id := range countTasks {
			if w := rec.Assignment.Of[id]; w != spout {
				return w, fmt.Sprintf("a count worker's (the count's first task there: %v)", i == 0)
			}
		}
		return "", ""
	})
}

// attackBuiltinWords submits the built-ins' word count to two workers, kill -9s
// the worker victim names once the spout has committed progress, and checks the
// counts file against the books counted independently and the spout's commits
// (with a resume of the spout when resumed is set). A victim of "" skips the test:
// the placement gave it nothing to kill.
func attackBuiltinWords(t *testing.T, resumed bool, victim func(rec *cluster.Record, sp *cluster.Spec, spout string) (string, string)) {
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
	target, which := victim(rec, sp, spout[0])
	if target == "" {
		t.Skipf("no worker to kill in this placement: %+v", rec.Assignment)
	}

	// The spout's committed offsets are under "flux-<topology>.<spout id>".
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
	if !cm.Done || cm.Lost != 0 || (resumed && cm.Resumes == 0) {
		t.Errorf("commit %+v: want done, nothing lost%s", cm, map[bool]string{true: ", the spout resumed"}[resumed])
	}
	if _, err := c.st.Kill(ctx, "words"); err != nil {
		t.Errorf("kill: %v", err)
	}
	t.Logf("exact: %d distinct words; killed %s, %s worker; spout: %d incarnations, %d resumes, %d replays",
		len(want), target, which, cm.Incarnations, cm.Resumes, cm.Replays)
}
