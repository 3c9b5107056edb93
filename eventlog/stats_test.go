package eventlog

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStatsCountCommitsByTime: every synced commit lands in one commit-time bucket,
// so the buckets sum to Commits, and the quantiles are bucket bounds.
func TestStatsCountCommitsByTime(t *testing.T) {
	l := openT(t, vfs.NewMem())
	defer l.Close()
	for _, id := range []string{"a", "b", "c"} {
		if err := l.Append(context.Background(), rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	s := l.Stats()
	var n uint64
	for _, c := range s.ByCommitTime {
		n += c
	}
	if s.Commits != 3 || n != 3 {
		t.Errorf("Commits %d, %d in the buckets; want 3 and 3", s.Commits, n)
	}
	if p, us := s.CommitQuantile(0.99), s.CommitQuantile(0.99).Microseconds(); us <= 0 || us&(us-1) != 0 || p != time.Duration(us)*time.Microsecond {
		t.Errorf("p99 %v is not a bucket bound", p)
	}
}

func TestCommitBuckets(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {999 * time.Nanosecond, 0}, {time.Microsecond, 1}, {3 * time.Microsecond, 2},
		{4 * time.Microsecond, 3}, {time.Millisecond, 10}, {time.Hour, CommitBuckets - 1}, {-time.Second, 0},
	} {
		if got := commitBucket(c.d); got != c.want {
			t.Errorf("commitBucket(%v) = %d, want %d", c.d, got, c.want)
		}
		if c.want < CommitBuckets-1 && c.d >= CommitBucketBound(c.want) {
			t.Errorf("%v is not under bucket %d's bound %v", c.d, c.want, CommitBucketBound(c.want))
		}
	}
	s := Stats{}
	s.ByCommitTime[3], s.ByCommitTime[10] = 98, 2
	if p50, p99, max := s.CommitQuantile(0.5), s.CommitQuantile(0.99), s.CommitQuantile(1); p50 != 8*time.Microsecond || p99 != 1024*time.Microsecond || max != 1024*time.Microsecond {
		t.Errorf("p50 %v p99 %v max %v, want 8µs 1.024ms 1.024ms", p50, p99, max)
	}
	if (Stats{}).CommitQuantile(0.5) != 0 {
		t.Error("an empty Stats has a quantile")
	}
}
