package wordcount

import (
	"context"
	"testing"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/plaintest"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/topology"
)

// Every value of every tuple of a run on the books, replays included, is plain (a
// codec built-in type), so that the topology can run across processes (issue 11); and
// the run is exact with every message sent through the codec (WithSerialization).
func TestWordCountValuesArePlain(t *testing.T) {
	files := testio.Books(t)
	var report *plaintest.Report
	res, err := Run(context.Background(), Options{Files: files, FailRate: 0.05, Seed: 3, Config: quiet(),
		RuntimeOptions: []engine.Option{engine.WithSerialization()},
		tap:            func(topo *topology.Topology) { report = plaintest.Tap(topo) }})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(res.Counts, referenceCount(t, files)); d != "" || res.Replays == 0 {
		t.Fatalf("replays %d, counts differ:\n%s", res.Replays, d)
	}
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tuples checked", report.Tuples())
}
