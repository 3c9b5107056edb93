package jslog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
)

// lookupCounter is the log, counting the ingest service's Lookups.
type lookupCounter struct {
	*Log
	n atomic.Int64
}

func (l *lookupCounter) Lookup(id string) (eventlog.Entry, bool, error) {
	l.n.Add(1)
	return l.Log.Lookup(id)
}

// ingest.Service on the JetStream log publishes a new event without looking its
// id up first (the stream's expected-last-subject-sequence is the dedupe); only a
// refused publish is looked up: a resend whose answer was lost is the duplicate,
// an id another serve process stored with other content a conflict, with the same
// content a duplicate. Each id is stored once.
func TestServicePublishesFirstOnTheJetStreamLog(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	l := &lookupCounter{Log: open(t, js)}
	other := open(t, js) // another serve process's
	svc, err := ingest.New(ingest.Config{Log: l})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx := context.Background()
	ev := func(id, payload string) event.Event {
		return event.Event{ID: id, Source: "orders", Type: "order_line", Payload: []byte(payload)}
	}
	var evs []event.Event
	for i := range 20 {
		evs = append(evs, ev(fmt.Sprintf("n%d", i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	for i, r := range svc.Submit(ctx, evs, ingest.LevelPersisted, 0) {
		if r.Err != nil || r.Duplicate || r.Status.Status != ingest.Persisted || r.Status.Seq != uint64(i+1) {
			t.Fatalf("new event %d: %+v", i, r)
		}
	}
	if n := l.n.Load(); n != 0 {
		t.Fatalf("%d lookups for 20 new events, want 0", n)
	}
	// n7's answer was lost: its resend.
	r := svc.Submit(ctx, []event.Event{ev("n7", `{"n":7}`)}, ingest.LevelPersisted, 0)[0]
	if r.Err != nil || !r.Duplicate || r.Status.Status != ingest.Persisted || r.Status.Seq != 8 {
		t.Fatalf("resend of n7: %+v, want a PERSISTED duplicate at seq 8", r)
	}
	y := rec("y", 0, `{"q":1}`)
	if err := other.Append(ctx, y); err != nil || y.Seq != 21 {
		t.Fatalf("y from the other process: seq %d, %v", y.Seq, err)
	}
	r = svc.Submit(ctx, []event.Event{ev("y", `{"p":1}`)}, ingest.LevelPersisted, 0)[0]
	if !errors.Is(r.Err, ingest.ErrConflict) || r.Status.Seq != 21 || r.Status.PayloadHash != y.Hash.String() {
		t.Fatalf("y with other content: %+v, want a conflict with y at seq 21", r)
	}
	r = svc.Submit(ctx, []event.Event{ev("y", `{"q":1}`)}, ingest.LevelPersisted, 0)[0]
	if r.Err != nil || !r.Duplicate || r.Status.Seq != 21 {
		t.Fatalf("y with the same content: %+v, want a duplicate of seq 21", r)
	}
	info, err := l.Stream().Info(ctx)
	if err != nil || info.State.Msgs != 21 {
		t.Fatalf("stream holds %v records (%v), want 21", info.State.Msgs, err)
	}
	c := svc.Counts()
	if got := c.Events["orders"].ByStatus; got[ingest.Accepted] != 20 || got[ingest.Persisted] != 20 || got[ingest.FailedRetryable] != 0 {
		t.Errorf("orders counted %v, want 20 ACCEPTED and 20 PERSISTED", got)
	}
	if c.Duplicates != 2 {
		t.Errorf("duplicates = %d, want 2", c.Duplicates)
	}
	if st := svc.Stats().Steps; st[ingest.StepReceived] != 20 {
		t.Errorf("steps %v, want 20 received", st)
	}
}

// Copies of the same ids sent at once, from one process and from two on the same
// stream: each id is stored once, and every answer for an id agrees on its seq
// (PERSISTED, every copy but one a duplicate).
func TestConcurrentCopiesAgreeOnTheJetStreamLog(t *testing.T) {
	js := openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL())
	var svcs []*ingest.Service
	for range 2 { // two serve processes
		svc, err := ingest.New(ingest.Config{Log: open(t, js)})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		svcs = append(svcs, svc)
	}
	const ids, copies = 30, 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	seqs := map[string]map[uint64]int{}
	fresh := map[string]int{}
	for c := range copies {
		wg.Go(func() {
			svc := svcs[c%2]
			for i := range ids {
				id := fmt.Sprintf("r%d", (i+c)%ids)
				ev := event.Event{ID: id, Source: "orders", Type: "order_line", Payload: []byte(`{"n":1}`)}
				r := svc.Submit(context.Background(), []event.Event{ev}, ingest.LevelPersisted, 0)[0]
				if r.Err != nil || r.Status.Status != ingest.Persisted {
					t.Errorf("%s: %+v", id, r)
					continue
				}
				mu.Lock()
				if seqs[id] == nil {
					seqs[id] = map[uint64]int{}
				}
				seqs[id][r.Status.Seq]++
				if !r.Duplicate {
					fresh[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range ids {
		id := fmt.Sprintf("r%d", i)
		if len(seqs[id]) != 1 || fresh[id] != 1 {
			t.Errorf("%s: answered at seqs %v, new %d times; want one seq, new once", id, seqs[id], fresh[id])
		}
	}
	l := open(t, js)
	if l.Durable() != ids {
		t.Errorf("%d records stored, want %d", l.Durable(), ids)
	}
}
