package testio

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestSyncBufferTakesConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "writer=%d line=%d\n", i, j)
			}
		})
	}
	wg.Wait()
	if n := len(b.Lines()); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
	if got := b.Lines("writer=3", "line=42"); len(got) != 1 || got[0] != "writer=3 line=42" {
		t.Fatalf("Lines(writer=3, line=42) = %q", got)
	}
	if !strings.HasPrefix(b.String(), "writer=") {
		t.Fatalf("String() = %.40q", b.String())
	}
}

func TestBookLines(t *testing.T) {
	lines := BookLines(t)
	if len(lines) < 4000 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l, "\r\n") {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}
