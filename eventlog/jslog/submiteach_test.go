package jslog

import (
	"context"
	"errors"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/natstest"
)

// SubmitEach answers each record of a batch on its own: the new ids are stored
// (Seq set) beside one the stream refuses because it is stored already, which is
// ErrExists (Exists says so) with nothing written; Submit still gives the batch's
// first error.
func TestSubmitEachOutcomePerRecord(t *testing.T) {
	l := open(t, openJS(t, natstest.Run(t, natstest.JetStream(t, "")).ClientURL()))
	ctx := context.Background()
	b0 := rec("b", 0, `{"n":2}`)
	if err := l.Append(ctx, b0); err != nil || b0.Seq != 1 {
		t.Fatalf("b: seq %d, %v", b0.Seq, err)
	}
	a, b, c := rec("a", 0, `{"n":1}`), rec("b", 0, `{"n":2}`), rec("c", 0, `{"n":3}`)
	ch := make(chan []error, 1)
	if err := l.SubmitEach([]*event.Record{a, b, c}, func(errs []error) { ch <- errs }); err != nil {
		t.Fatal(err)
	}
	errs := <-ch
	if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], ErrExists) || !l.Exists(errs[1]) {
		t.Fatalf("outcomes %v, want nil, ErrExists, nil", errs)
	}
	if a.Seq != 2 || b.Seq != 0 || c.Seq != 3 || l.Durable() != 3 {
		t.Fatalf("seqs a %d b %d c %d, durable %d; want 2 0 3, 3", a.Seq, b.Seq, c.Seq, l.Durable())
	}
	if e, ok, err := l.Lookup("b"); err != nil || !ok || e.Seq != 1 {
		t.Fatalf("Lookup(b): %+v %v %v, want the first record at seq 1", e, ok, err)
	}
	if l.Exists(errors.New("other")) || l.Exists(nil) || l.Exists(ErrNotStored) {
		t.Fatal("Exists true for an error that is not ErrExists")
	}
	// Submit: the batch's first error, the others stored all the same.
	d, b2 := rec("d", 0, `{}`), rec("b", 0, `{"n":2}`)
	if err := l.Append(ctx, d, b2); !errors.Is(err, ErrExists) || d.Seq != 4 {
		t.Fatalf("Append(d, b again): %v, d at seq %d; want ErrExists, 4", err, d.Seq)
	}
	info, err := l.Stream().Info(ctx)
	if err != nil || info.State.Msgs != 4 {
		t.Fatalf("stream holds %v records (%v), want 4", info.State.Msgs, err)
	}
}
