package eventlog

import (
	"context"
	"fmt"
	"testing"

	"github.com/gale-stream/gale/event"
)

// BenchmarkLookupMiss is the dedupe check every new event pays: a Get of an id the
// index does not hold, with 200k ids in it.
func BenchmarkLookupMiss(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < benchBatches; i++ {
		batch := make([]*event.Record, 0, 1000)
		for j := 0; j < 1000; j++ {
			batch = append(batch, rec(fmt.Sprintf("2010-12-01:%d-%d", i, j)))
		}
		if err := l.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := l.Lookup(fmt.Sprintf("2010-12-02:%d", i)); ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

var benchBatches = 200
