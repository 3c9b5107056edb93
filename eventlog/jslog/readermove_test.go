package jslog

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/internal/natstest"
)

// Read at a new position again and again, each move stopping a reader while its
// consumer may still be being made: one consumer is left, the current reader's.
// A stop used to cancel the creation and delete at once; the server could take
// the create after the delete, and the consumer was left behind (every run of
// 2,000 moves left one).
func TestReaderMovesLeaveOneConsumer(t *testing.T) {
	srv := natstest.Run(t, natstest.JetStream(t, ""))
	js := openJS(t, srv.ClientURL())
	l := open(t, js)
	appendN(t, l, 1, 10)
	before := countsOf(t, srv)
	maxc := 0
	for i := range 2000 {
		_, _ = l.Read(uint64(1+i%2*5), 1)
		if i%100 == 0 {
			maxc = max(maxc, countsOf(t, srv).consumers)
		}
	}
	// Settle on one position and read it out.
	recs, err := readTo(t, l, 3, 10, 10)
	if err != nil || len(recs) != 8 || recs[0].Seq != 3 {
		t.Fatalf("read after moves: %d %v", len(recs), err)
	}
	after := countsOf(t, srv)
	t.Logf("2000 moves: max consumers %d, now %d, API %d", maxc, after.consumers, after.api-before.api)
	if after.consumers != 1 {
		t.Errorf("%d consumers, want 1", after.consumers)
	}
}

// lateCreate is JetStream whose consumer creations wait for release; one whose
// context ends first answers at once, and reaches the server only after release:
// as the server may take a create after the delete sent behind it.
type lateCreate struct {
	jetstream.JetStream
	release chan struct{}
	asked   chan struct{} // one send per creation asked for
	late    sync.WaitGroup
}

func (j *lateCreate) CreateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	j.asked <- struct{}{}
	select {
	case <-j.release:
		return j.JetStream.CreateConsumer(ctx, stream, cfg)
	case <-ctx.Done():
		j.late.Go(func() {
			<-j.release
			_, _ = j.JetStream.CreateConsumer(context.Background(), stream, cfg)
		})
		return nil, ctx.Err()
	}
}

// A Close while the reader's consumer is being made leaves no consumer: the
// creation is waited for, then the consumer deleted. It used to be cut short and
// a delete sent at once, which the server could take first, leaving the consumer.
func TestCloseDuringConsumerCreation(t *testing.T) {
	srv := natstest.Run(t, natstest.JetStream(t, ""))
	js := &lateCreate{JetStream: openJS(t, srv.ClientURL()), release: make(chan struct{}), asked: make(chan struct{}, 16)}
	l, err := Open(context.Background(), Config{JS: js, Prefix: "t", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1, 3)
	if _, err := l.Read(1, 1); err != nil {
		t.Fatal(err)
	}
	<-js.asked // the reader's creation is in flight
	rd := l.rd
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	// Release once the stop has reached the reader, as the race had it.
	select {
	case <-rd.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the reader")
	}
	close(js.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	js.late.Wait()
	if c := countsOf(t, srv).consumers; c != 0 {
		t.Fatalf("%d consumers left after Close, want 0", c)
	}
}
