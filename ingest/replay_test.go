package ingest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// replayLog is a log in memory for Replay: records by seq, some seqs absent, one
// unreadable (a Read reaching it returns the records before it and an error, as
// eventlog.Log.Read does), some ids dead letters.
type replayLog struct {
	recs    map[uint64]event.Record
	damaged uint64
	dead    map[string]bool
}

func (l *replayLog) Read(from uint64, n int) ([]event.Record, error) {
	var seqs []uint64
	for s := range l.recs {
		if s >= from {
			seqs = append(seqs, s)
		}
	}
	if l.damaged >= from {
		seqs = append(seqs, l.damaged)
	}
	slices.Sort(seqs)
	var out []event.Record
	for _, s := range seqs {
		if s == l.damaged {
			return out, fmt.Errorf("checksum mismatch at seq %d", s)
		}
		if len(out) == n {
			break
		}
		out = append(out, l.recs[s])
	}
	return out, nil
}

func (l *replayLog) Get(ns eventlog.Namespace, id string) ([]byte, bool, error) {
	if ns == eventlog.DeadLetter && l.dead[id] {
		return []byte(`{}`), true, nil
	}
	return nil, false, nil
}

// poisonBolt fails the event e12 every time and acks the others.
type poisonBolt struct{ topology.BaseBasicBolt }

func (*poisonBolt) Execute(t *tuple.Tuple, _ topology.BasicCollector) error {
	rec, err := SpoutRecord(t)
	if err != nil {
		return err
	}
	if rec.Event.ID == "e12" {
		return errors.New("poison")
	}
	return nil
}

// A replay emits every record the log holds from From to To, as the log spout's
// tuples; writes what completes, tries a failing record MaxAttempts times and an
// unreadable one not at all, and names the seqs the log does not hold: a run
// before its first kept record (trimmed, dead letters apart), runs a salvage
// recorded lost (also past To), and a run no one recorded.
func TestReplayWritesReportsFailuresAndGaps(t *testing.T) {
	l := &replayLog{recs: map[uint64]event.Record{}, damaged: 8, dead: map[string]bool{"e4": true}}
	for _, s := range []uint64{4, 6, 7, 11, 12} {
		id := fmt.Sprintf("e%d", s)
		l.recs[s] = event.Record{Seq: s, Event: event.Event{ID: id, Source: "s", Type: "t", Payload: []byte(`{}`)}}
	}
	r := NewReplay(l, 1, 12, 2)
	b := topology.NewBuilder()
	b.SetSpout("log", r.Spout(), 1).Output(SpoutFields...)
	b.SetBasicBolt("write", func() topology.BasicBolt { return &poisonBolt{} }, 2).ShuffleGrouping("log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := engine.Start(ctx, topo, topology.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-ctx.Done():
		t.Fatalf("the replay did not finish: %+v", r.Result(nil))
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	lost := []eventlog.LostRange{{From: 9, To: 9, IDs: []string{"e9"}}, {From: 14, To: 15}}
	res := r.Result(lost)
	if res.First != 4 || res.Last != 12 || res.Written != 4 || r.Written() != 4 {
		t.Errorf("first %d last %d written %d (%d); want 4, 12, 4", res.First, res.Last, res.Written, r.Written())
	}
	if len(res.Failed) != 2 || res.Failed[0].Seq != 8 || !strings.Contains(res.Failed[0].Reason, "reading the log: checksum mismatch") ||
		res.Failed[1].Seq != 12 || res.Failed[1].ID != "e12" || !strings.Contains(res.Failed[1].Reason, "(after 2 attempts)") {
		t.Errorf("failed %+v; want seq 8 unreadable, then e12 after 2 attempts", res.Failed)
	}
	want := []ReplayGap{{From: 1, To: 3, Trimmed: true}, {From: 5, To: 5, Trimmed: true},
		{From: 9, To: 9, Lost: &lost[0]}, {From: 10, To: 10}, {From: 14, To: 15, Lost: &lost[1]}}
	if !reflect.DeepEqual(res.Missing, want) {
		t.Errorf("missing %+v\nwant    %+v", res.Missing, want)
	}
	if got := r.NotWritten(); got != "1..3, 5, 8..10, 12" {
		t.Errorf("not written: %q", got)
	}
}

// A replay's spout reads one sequence: a second task is refused at open, not
// left to emit every record twice.
func TestReplaySpoutRefusesParallelism(t *testing.T) {
	r := NewReplay(&replayLog{}, 1, 1, 1)
	err := r.Spout()().Open(context.Background(), topology.TaskContext{Parallelism: 2}, nil)
	if err == nil || !strings.Contains(err.Error(), "parallelism 1, not 2") {
		t.Fatalf("open with 2 tasks: %v", err)
	}
}
