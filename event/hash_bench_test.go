package event_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/pipelines/orders"
)

// retailEvents reads the order lines of testdata/retail as events.
func retailEvents(tb testing.TB) []event.Event {
	tb.Helper()
	files, err := filepath.Glob("../testdata/retail/*.csv")
	if err != nil || len(files) == 0 {
		tb.Fatalf("testdata/retail: %v %v", files, err)
	}
	var evs []event.Event
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		err = orders.ScanCSV(f, p, func(e event.Event) error { evs = append(evs, e); return nil })
		f.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
	return evs
}

// BenchmarkHashRetail is the content hash of one real order line (ns/op per event),
// as the ingest path computes it for every event it takes in.
func BenchmarkHashRetail(b *testing.B) {
	evs := retailEvents(b)
	size := 0
	for i := range evs {
		size += len(evs[i].Payload)
	}
	b.SetBytes(int64(size / len(evs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_ = evs[i%len(evs)].Hash()
	}
}

// BenchmarkCanonicalRetail is the canonical form alone of one real order line's
// payload (ns/op per payload), the part of BenchmarkHashRetail that is not SHA-256.
func BenchmarkCanonicalRetail(b *testing.B) {
	evs := retailEvents(b)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		buf, _ = event.AppendCanonical(buf[:0], evs[i%len(evs)].Payload)
	}
}
