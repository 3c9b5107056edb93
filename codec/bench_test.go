package codec

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

const benchBatch = 256

// benchMessages are a word-count batch (word count's split tuples: a short word, its
// line's pos []uint64{line_id, low}, one value shared by the line's 8 words as split
// emits it, and its offset; one root) and an orders batch
// (8 fields: strings, int64, float64, time.Time).
func benchMessages(b *testing.B) (*Streams, map[string]*transport.Message) {
	bld := topology.NewBuilder()
	bld.SetSpout("orders", func() topology.Spout { return nil }, 1).
		Output("id", "customer", "sku", "qty", "price", "at", "currency", "note")
	bld.SetBolt("split", func() topology.Bolt { return nil }, 1).ShuffleGrouping("orders").Output("word", "pos", "off")
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	st := NewStreams(topo)
	words := []string{"gale", "storm", "winds", "the", "sailor", "harbor"}
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	wc := &transport.Message{Kind: transport.KindTuples, From: 2, To: 3, Epoch: 1, Seq: 1, Pos: benchBatch}
	or := &transport.Message{Kind: transport.KindTuples, From: 1, To: 3, Epoch: 1, Seq: 1, Pos: benchBatch}
	var pos any
	for i := range benchBatch {
		e := tupleinternal.Edge{Root: 0x9e3779b97f4a7c15 * uint64(i+1), Edge: 0xbf58476d1ce4e5b9 * uint64(i+1)}
		if i%8 == 0 { // a line of 8 words: split emits one pos value with each
			pos = []uint64{uint64(i/8) << 20, uint64(i / 16)}
		}
		wc.Tuples = append(wc.Tuples, mkTuple(topo.Component("split").Streams["default"].Source, 2, 3,
			tuple.Values{words[i%len(words)], pos, i % 80}, e))
		or.Tuples = append(or.Tuples, mkTuple(topo.Component("orders").Streams["default"].Source, 1, 3,
			tuple.Values{fmt.Sprintf("ord-%08d", i), "customer-42", "SKU-12345", int64(i % 10), 19.99 + float64(i),
				at.Add(time.Duration(i) * time.Millisecond), "EUR", "gift wrap"}, e))
	}
	return st, map[string]*transport.Message{"wordcount": wc, "orders": or}
}

func BenchmarkEncodeTuple(b *testing.B) {
	st, msgs := benchMessages(b)
	for _, name := range []string{"wordcount", "orders"} {
		m := msgs[name]
		b.Run(name, func(b *testing.B) {
			buf, err := AppendMessage(nil, m, st)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			p := start(b)
			for b.Loop() {
				if buf, err = AppendMessage(buf[:0], m, st); err != nil {
					b.Fatal(err)
				}
			}
			p.report(b, len(buf))
		})
	}
}

func BenchmarkDecodeTuple(b *testing.B) {
	st, msgs := benchMessages(b)
	for _, name := range []string{"wordcount", "orders"} {
		buf, err := AppendMessage(nil, msgs[name], st)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			p := start(b)
			for b.Loop() {
				if _, err := ReadMessage(buf, st); err != nil {
					b.Fatal(err)
				}
			}
			p.report(b, len(buf))
		})
	}
}

// perTuple reports time, allocations and bytes per tuple of a batch; call start
// before the loop.
type perTuple struct{ mallocs uint64 }

func start(b *testing.B) *perTuple {
	b.ReportAllocs()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &perTuple{mallocs: ms.Mallocs}
}

func (p *perTuple) report(b *testing.B, frame int) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := float64(b.N) * benchBatch
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/tuple")
	b.ReportMetric(float64(ms.Mallocs-p.mallocs)/n, "allocs/tuple")
	b.ReportMetric(float64(frame)/benchBatch, "B/tuple")
}
