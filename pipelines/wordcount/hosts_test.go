package wordcount

import (
	"context"
	"testing"
	"time"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/transporttest"
)

// Word count on the test books as three engines in this process, each hosting a
// third of the tasks (the spout, three splits, three counts and three ackers dealt
// over them), that talk only through a transport which serialises every message and
// drops 1%, duplicates 0.5% and reorders 1% of them within a window of 16. Lost
// tuples and acks make trees time out and replay; duplicates are dropped by the
// receivers; the counts still equal the independent count.
func TestWordCountOnThreeHostsOverALossyTransport(t *testing.T) {
	files := testio.Books(t)
	want := referenceCount(t, files)
	var streams *codec.Streams
	faulty := transporttest.NewFaulty(transport.NewLocal(),
		transporttest.Serialize(func(m *transport.Message) (*transport.Message, error) { return codec.Clone(m, streams) }),
		transporttest.Drop(0.01), transporttest.Duplicate(0.005), transporttest.Reorder(0.01, 16),
		transporttest.Seed(11))
	cfg := quiet()
	cfg.Ackers = 3
	cfg.MessageTimeout = 2 * time.Second // a lost tuple's tree replays after 2 to 2.5 s
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Files: files, Config: cfg, Hosts: 3, Parallelism: 3, Transport: faulty,
		tap: func(topo *topology.Topology) { streams = codec.NewStreams(topo) }})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(res.Counts, want); d != "" || len(res.Counts) != len(want) {
		t.Fatalf("counts differ (%d words, want %d):\n%s", len(res.Counts), len(want), d)
	}
	f := faulty.Faults()
	if res.Lines != 97639 || res.Acked != res.Lines || res.Unacked != 0 || res.Misuse != 0 || res.ShutdownErr != nil {
		t.Fatalf("lines %d acked %d unacked %d misuse %d, stop: %v", res.Lines, res.Acked, res.Unacked, res.Misuse, res.ShutdownErr)
	}
	if res.Replays == 0 || f.Dropped == 0 || f.Duplicated == 0 || f.Reordered == 0 {
		t.Fatalf("replays %d; transport dropped %d, duplicated %d, reordered %d", res.Replays, f.Dropped, f.Duplicated, f.Reordered)
	}
	tasks := 0
	for _, c := range res.Stats.Components {
		tasks += len(c.ByTask)
	}
	if tasks != 7 || res.Stats.Acker.Tasks != 3 {
		t.Fatalf("merged stats cover %d spout and bolt tasks and %d ackers, want 7 and 3", tasks, res.Stats.Acker.Tasks)
	}
	t.Logf("%d lines, %d replays (%d timed out), %d duplicates absorbed; transport: %d sent, %d dropped, %d duplicated, %d reordered; duplicate tuples dropped by receivers: %d; %v",
		res.Lines, res.Replays, res.TimedOut, res.Duplicates, f.Sent, f.Dropped, f.Duplicated, f.Reordered, res.Stats.Transport.Duplicates, res.Elapsed)
}
