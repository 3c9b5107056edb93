package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/tuple"
)

func TestLocalBackpressureAndControl(t *testing.T) {
	l := NewLocal()
	in, err := l.Register(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(1, 1); err == nil {
		t.Fatal("registering a task twice succeeded")
	}
	ctx := context.Background()
	if err := l.SendTuples(ctx, 1, []*tuple.Tuple{nil}); err != nil {
		t.Fatal(err)
	}
	// The queue holds one batch: the next send blocks until its context ends.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.SendTuples(cctx, 1, []*tuple.Tuple{nil}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send to a full queue: %v", err)
	}
	// Control never blocks, however much is queued, and signals the receiver.
	for i := range 10_000 {
		if err := l.SendAcks(1, []acker.Msg{{Root: uint64(i + 1), Kind: acker.Ack}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-in.Signal():
	default:
		t.Fatal("no signal for waiting control messages")
	}
	got := in.TakeAcks(nil)
	if len(got) != 10_000 || got[9_999].Root != 10_000 {
		t.Fatalf("took %d acks", len(got))
	}
	if again := in.TakeAcks(got); len(again) != 0 {
		t.Fatalf("second take returned %d", len(again))
	}
	_ = l.SendOutcomes(1, []acker.Outcome{{Root: 9}})
	if o := in.TakeOutcomes(nil); len(o) != 1 || o[0].Root != 9 {
		t.Fatalf("outcomes %v", o)
	}
	if err := l.SendAcks(99, nil); !errors.Is(err, ErrUnknownTask) {
		t.Fatalf("unknown task: %v", err)
	}
	<-in.Tuples()
	l.CloseTuples(1)
	l.CloseTuples(1) // twice is harmless
	if _, ok := <-in.Tuples(); ok {
		t.Fatal("queue not closed")
	}
}
