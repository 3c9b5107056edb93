package natstransport_test

import (
	"testing"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/transport"
)

// Nothing is left running once the transports, connections and server are closed
// (TestMain checks the same of the whole package).
func TestNoGoroutineLeft(t *testing.T) {
	before, _ := leaktest.Count()
	t.Run("run", func(t *testing.T) {
		url := runServer(t).ClientURL()
		prefix := newPrefix()
		a, b := newTransport(t, url, prefix), newTransport(t, url, prefix)
		in, err := b.Register(2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Register(1); err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 100; seq++ {
			if err := a.Send(&transport.Message{Kind: transport.KindAcks, From: 1, To: 2, Seq: seq, Acks: []acker.Msg{{Kind: acker.Ack, Root: seq}}}); err != nil {
				t.Fatal(err)
			}
		}
		var got []*transport.Message
		for len(got) < 100 {
			got = in.TakeControl(got)
			if len(got) < 100 {
				<-in.Signal()
			}
		}
		b.Unregister(2)
	}) // its cleanups close the transports, connections and server
	if n, stacks := leaktest.Settle(before); n > before {
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, stacks)
	}
}
