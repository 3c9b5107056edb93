package flux_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
)

// TestWordCount loads testdata/ok/wordcount.yaml, builds it with Go classes and runs
// it in the engine: the counts of every word equal those computed here from the same
// lines of the book, and no word was counted by two tasks (FIELDS on "word").
func TestWordCount(t *testing.T) {
	e := newEnv(t)
	f, err := flux.Load("testdata/ok/wordcount.yaml", flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Build(&e.reg)
	if err != nil {
		t.Fatal(err)
	}
	if b.Config.Ackers != 2 || b.Config.MaxSpoutPending != 100 || b.Workers != 1 {
		t.Errorf("config: ackers %d, max pending %d, workers %d; want 2, 100, 1", b.Config.Ackers, b.Config.MaxSpoutPending, b.Workers)
	}
	rt, err := engine.Start(context.Background(), b.Topology, b.Config)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.done:
	case <-time.After(30 * time.Second): // a hang, not a slow machine
		t.Error("the spout's trees did not all complete")
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The same lines, split and counted here, without the engine.
	lines, err := readLines("../testdata/books/105.txt", 60, 40)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, l := range lines {
		for _, w := range words(l, true) {
			want[w]++
		}
	}
	if len(lines) != 40 || len(want) < 100 {
		t.Fatalf("%d lines, %d distinct words: the test reads too little", len(lines), len(want))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !maps.Equal(e.word, want) {
		for w, n := range want {
			if e.word[w] != n {
				t.Errorf("count[%q] = %d, want %d", w, e.word[w], n)
			}
		}
		t.Errorf("counted %d distinct words, want %d", len(e.word), len(want))
	}
	if len(e.split) > 0 {
		t.Errorf("words counted by two tasks despite FIELDS on word: %q", e.split)
	}
	t.Logf("%d lines, %d words, %d distinct; e.g. the=%d, anne=%d", len(lines), sum(want), len(want), want["the"], want["anne"])
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
