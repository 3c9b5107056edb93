package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/waitfor"
)

// On a log several serve processes share, a dead letter may be resubmitted
// through another process while the spout's process still holds the old
// generation in memory (its final document is stored, but the flush that
// wrote it has not forgotten it yet, or a reader keeps it). The record of the
// new generation must be processed, not skipped as if it were the older one:
// skipped, it was finished without running, PERSISTED for good.
func TestNewerGenerationFromAnotherProcessIsProcessed(t *testing.T) {
	healed := make(chan struct{})
	sink := newSink(func(id string) int {
		select {
		case <-healed:
			return 0
		default:
			return 1000
		}
	})
	// A flush only at the end: the dead letter stays in memory throughout.
	r := startRig(t, vfs.NewMem(), sink, Config{FlushEvery: time.Hour, Tracker: TrackerConfig{MaxAttempts: 1}})
	ctx := context.Background()
	e := event.Event{ID: "bad", Source: "s", Type: "t", Payload: []byte(`{}`)}
	if res := r.svc.Submit(ctx, []event.Event{e}, LevelPersisted, 0); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	waitfor.True(t, 10*time.Second, "the dead letter", func() bool { return r.svc.Stats().Steps[StepDeadLetter] == 1 })
	close(healed)
	// Another process's :retry: the record of generation 1, appended to the log.
	if err := r.log.Append(ctx, &event.Record{ReceivedAt: time.Now().UnixNano(), Hash: e.Hash(), Generation: 1, Event: e}); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "generation 1 processed", func() bool {
		applied, _ := sink.count("bad")
		return applied == 1
	})
}
