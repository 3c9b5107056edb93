package natstransport_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// BenchmarkTuples sends KindTuples batches of word-count-shaped tuples (a word and an
// int64) from one connection to another through an embedded server, at most
// window tuples in flight (as credit would), and reports messages/s, tuples/s and
// ns/tuple, encoding and decoding included.
//
//	go test -run XXX -bench Tuples -benchtime 3s ./transport/natstransport/
func BenchmarkTuples(b *testing.B) {
	const window = 1 << 14
	for _, size := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			url := runServer(b).ClientURL()
			prefix := newPrefix()
			streams := codec.NewStreams(batchTopology())
			snd, rcv := newTransportOf(b, url, prefix, streams), newTransportOf(b, url, prefix, streams)
			in, err := rcv.Register(2)
			if err != nil {
				b.Fatal(err)
			}
			src := batchTopology().Component("words").Streams[tuple.DefaultStream].Source
			ts := make([]*tuple.Tuple, size)
			for i := range ts {
				ts[i] = tuple.New(src, 1, tuple.Values{fmt.Sprintf("word%d", i%100), int64(i)})
			}
			taken := make(chan int, 1)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { // the consumer: takes every batch, reports the total
				defer close(done)
				total := 0
				var got []*transport.Message
				for {
					select {
					case <-in.Signal():
					case <-stop:
						return
					}
					got = in.TakeTuples(got[:0])
					for _, m := range got {
						total += len(m.Tuples)
					}
					clear(got)
					select {
					case <-taken:
					default:
					}
					taken <- total
				}
			}()
			defer func() { close(stop); <-done }()
			b.ResetTimer()
			start := time.Now()
			sent, seen := 0, 0
			for i := range b.N {
				for sent-seen >= window {
					seen = <-taken
				}
				m := &transport.Message{Kind: transport.KindTuples, From: 1, To: 2, Epoch: 1, Seq: uint64(i + 1), Pos: uint64(sent + size), Tuples: ts}
				if err := snd.Send(m); err != nil {
					b.Fatal(err)
				}
				sent += size
			}
			for seen < sent {
				select {
				case seen = <-taken:
				case <-time.After(30 * time.Second):
					b.Fatalf("%d of %d tuples arrived; receiver %+v", seen, sent, rcv.Stats())
				}
			}
			el := time.Since(start)
			b.StopTimer()
			if s := rcv.Stats(); s.Dropped != 0 || s.Errors != 0 {
				b.Fatalf("receiver stats %+v", s)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
			b.ReportMetric(float64(sent)/el.Seconds(), "tuples/s")
			b.ReportMetric(float64(el.Nanoseconds())/float64(sent), "ns/tuple")
		})
	}
}
