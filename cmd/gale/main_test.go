package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/app"
)

// gale's own registration has no error and offers what the README promises.
func TestGaleRegistersItsBuiltins(t *testing.T) {
	a := app.New(options()...)
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := a.Topologies(), []string{"events", "orders", "wordcount"}; !slices.Equal(got, want) {
		t.Errorf("topologies %v, want %v", got, want)
	}
	if got, want := a.Pipelines(), []string{"events", "orders"}; !slices.Equal(got, want) {
		t.Errorf("pipelines %v, want %v", got, want)
	}
	var comps bytes.Buffer
	if code := a.Run(context.Background(), []string{"components"}, &comps, &comps); code != 0 {
		t.Fatalf("components: exit %d: %s", code, comps.String())
	}
	for _, class := range []string{"gale.wordcount.LineSpout", "gale.wordcount.SplitSentence", "gale.wordcount.WordCount",
		"gale.spout.Files", "gale.bolt.Split", "gale.bolt.Count", "gale.bolt.Sum"} {
		if !strings.Contains(comps.String(), class+" ") {
			t.Errorf("gale components does not list %s:\n%s", class, comps.String())
		}
	}
	var out, errb bytes.Buffer
	if code := a.Run(context.Background(), []string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errb.String())
	}
	for _, cmd := range []string{"wordcount", "ingest", "orders", "bench", "serve", "worker", "submit", "components", "run"} {
		if !strings.Contains(out.String(), "\n  "+cmd+" ") {
			t.Errorf("gale --help does not list %s:\n%s", cmd, out.String())
		}
	}
}
