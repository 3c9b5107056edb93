package wordcount

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/gale-stream/gale/topology"
)

// BenchmarkWordCount runs the word-count job end to end on the testdata books (read 4
// times per run, about 3.7 million words) and reports words/s, with tracking on (1
// acker task, max spout pending 5000) and off (0 ackers).
func BenchmarkWordCount(b *testing.B) {
	books, err := filepath.Glob("../../testdata/books/*.txt")
	if err != nil || len(books) == 0 {
		b.Fatal("no testdata books")
	}
	var files []string
	for range 4 {
		files = append(files, books...)
	}
	for _, tc := range []struct {
		name   string
		ackers int
	}{{"tracking=on", 1}, {"tracking=off", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := topology.DefaultConfig()
			cfg.Ackers = tc.ackers
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			var words uint64
			var secs float64
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				res, err := Run(context.Background(), Options{Files: files, Config: cfg})
				if err != nil {
					b.Fatal(err)
				}
				if res.Unacked != 0 || res.Misuse != 0 {
					b.Fatalf("unacked %d, misuse %d", res.Unacked, res.Misuse)
				}
				words += res.Words
				secs += res.Elapsed.Seconds()
			}
			b.ReportMetric(float64(words)/secs, "words/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
