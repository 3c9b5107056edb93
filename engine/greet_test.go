package engine

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
)

// ackedHellos is a transport on which each greeting is answered before the next one
// leaves: Send of a hello returns only once that hello's ack has been handed to the
// greeting host (bounded by a timeout), and then lets the greeting host's goroutines
// run. A host that counted its greetings as it sent them saw all (one) answered,
// started its spouts early, and closed its ready channel again at the next answer.
type ackedHellos struct {
	transport.Transport
	mu    sync.Mutex
	acked map[[2]uint64]chan struct{} // (host endpoint, request id) -> closed when its ack is sent
}

func (a *ackedHellos) waiter(ep int, id uint64) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := [2]uint64{uint64(ep), id}
	ch := a.acked[k]
	if ch == nil {
		ch = make(chan struct{})
		a.acked[k] = ch
	}
	return ch
}

func (a *ackedHellos) Send(m *transport.Message) error {
	if m.Kind == transport.KindControl && m.Op == opAck {
		err := a.Transport.Send(m)
		ch := a.waiter(m.To, m.ID)
		a.mu.Lock()
		select {
		case <-ch: // a re-sent request's ack again
		default:
			close(ch)
		}
		a.mu.Unlock()
		return err
	}
	if m.Kind != transport.KindControl || m.Op != opHello || m.Seq > 0 {
		return a.Transport.Send(m)
	}
	from, id := m.From, m.ID
	err := a.Transport.Send(m)
	if err != nil { // the peer is not up yet: this hello is re-sent later
		return err
	}
	select {
	case <-a.waiter(from, id):
		for range 1000 { // let the greeting host's loop take the ack
			runtime.Gosched()
		}
	case <-time.After(5 * time.Second):
	}
	return err
}

func TestGreetingsAnsweredOneByOneStartSpoutsOnce(t *testing.T) {
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: newRecorder(), n: 10} }, 3).Output("id")
	b.SetBolt("sink", ackAll, 3).ShuffleGrouping("s")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	for round := range 5 {
		tr := &ackedHellos{Transport: transport.NewLocal(), acked: map[[2]uint64]chan struct{}{}}
		var rts []*Runtime
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range mustSpread(t, topo, cfg, 3) {
			wg.Add(1)
			go func() { // hosts start together, so the later ones' greetings are answered at once
				defer wg.Done()
				rt, err := Start(context.Background(), topo, cfg, WithTransport(tr), WithAssignment(a))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				rts = append(rts, rt)
				mu.Unlock()
			}()
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, rt := range rts {
			if err := rt.Stop(ctx); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
			<-rt.Done()
		}
		cancel()
	}
}
