package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/sink"
)

// metricOf reads one sample of /metrics whose line starts with prefix ("" and
// false if the process does not answer in 2s or has none).
func metricOf(url, prefix string) (string, bool) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			return f[len(f)-1], true
		}
	}
	return "", false
}

// The holder of the log spout's lease is SIGSTOPped mid-ingest for longer than
// its lease (a long GC pause, a VM frozen), then SIGCONTed. The other serve
// process takes the log spout over; the paused one, back, must know it lost the
// lease and read nothing more (one reader at a time), its offset writes must not
// move the committed offset back, and it must answer for events the other
// processed. Every line ends PROCESSED, once in the sink and in the stream.
func TestServeJetStreamHolderPausedPastItsLease(t *testing.T) {
	// A sink each: a SQLite file shared with a stopped process stays locked by
	// its open transaction, which would stop the other too (a shared sink for
	// real is a server, PostgreSQL).
	sr := startSharedServes(t, func(dir, name string) string { return dir + "/" + name + ".db" })
	a, b, dir, js := sr.a, sr.b, sr.dir, sr.js
	aPid := a.cmd.Process.Pid
	// Runs before startServeChild's SIGKILL (cleanups run last first): never
	// leave a stopped process behind.
	t.Cleanup(func() { _ = syscall.Kill(aPid, syscall.SIGCONT) })
	if v, _ := metricOf(a.url, "gale_jslog_spout_lease_held "); v != "1" {
		t.Fatalf("the first serve does not hold the lease (%q)", v)
	}
	ctx := context.Background()
	docsKV, err := js.KeyValue(ctx, "gale-logdocs")
	if err != nil {
		t.Fatal(err)
	}
	holderPid := func() int {
		for _, c := range []*child{a, b} {
			if sr.holds(c) {
				return c.cmd.Process.Pid
			}
		}
		return -1
	}
	// The committed offset, watched throughout (every value stored): it never goes
	// back.
	var mu sync.Mutex
	var offsets []uint64
	var regress []string
	watch, err := docsKV.Watch(ctx, "committed")
	if err != nil {
		t.Fatal(err)
	}
	watchDone := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			var e jetstream.KeyValueEntry
			select {
			case <-stopWatch:
				return
			case u, ok := <-watch.Updates():
				if !ok {
					return
				}
				e = u
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the end of the values stored before the watch, or a delete
			}
			c, _ := strconv.ParseUint(string(e.Value()), 10, 64)
			mu.Lock()
			if n := len(offsets); n > 0 && c < offsets[n-1] {
				regress = append(regress, fmt.Sprintf("%d after %d", c, offsets[n-1]))
			}
			offsets = append(offsets, c)
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-watchDone:
		default:
			close(stopWatch)
			<-watchDone
		}
		_ = watch.Stop()
	}()

	var dbs []*sink.DB
	for _, name := range []string{"a", "b"} {
		db, err := sink.Open(ctx, dir+"/"+name+".db")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	// rows counts the lines in both sinks, and the distinct ids among them.
	rows := func() (n, distinct int) {
		ids := map[string]bool{}
		for _, db := range dbs {
			r, err := db.SQL.Query("SELECT event_id FROM order_lines")
			if err != nil {
				continue
			}
			for r.Next() {
				var id string
				_ = r.Scan(&id)
				ids[id] = true
				n++
			}
			_ = r.Close()
		}
		return n, len(ids)
	}
	ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	done, lines := ingestRetail(t, ictx, b.url)
	// SIGSTOP at 1,500 of the day's 3,108 lines, and SIGCONT once the second
	// serve has processed 500 more; 700 and 300 of the 1,500 under -race.
	stopAt, more := 1500, 500
	if raceEnabled {
		stopAt, more = 700, 300
	}
	waitRows := func(n int, within time.Duration) {
		t.Helper()
		waitfor.Until(t, within, func() error {
			if _, got := rows(); got < n {
				return fmt.Errorf("%d lines in the sinks, want %d", got, n)
			}
			return nil
		})
	}
	waitRows(stopAt, 2*time.Minute)
	if err := syscall.Kill(aPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, stoppedAt := rows()
	waitfor.Until(t, 20*time.Second, func() error {
		if p := holderPid(); p != b.cmd.Process.Pid {
			return fmt.Errorf("the lease holder is pid %d after the holder's SIGSTOP, want the second serve's %d", p, b.cmd.Process.Pid)
		}
		return nil
	})
	tookOver := time.Now()
	waitRows(stoppedAt+more, time.Minute) // the second reads the log now
	// The log spout says so when it finds the lease lost (only after the SIGCONT:
	// a stopped process writes nothing).
	const lostLine = "no longer holds the log spout's lease; emitting nothing"
	lostBefore := strings.Count(a.stderr.String(), lostLine)
	if err := syscall.Kill(aPid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("paused at %d rows; the second serve took over; SIGCONT %v after the takeover", stoppedAt, time.Since(tookOver).Round(time.Millisecond))
	// Back, the first knows it lost the lease, and from then on emits nothing.
	var emitted string
	waitfor.Until(t, 10*time.Second, func() error {
		if held, ok := metricOf(a.url, "gale_jslog_spout_lease_held "); !ok || held != "0" {
			return fmt.Errorf("the first serve says it holds the lease (%q) after SIGCONT", held)
		}
		emitted, _ = metricOf(a.url, `gale_emitted_total{component="events"`)
		return nil
	})
	// A NextTuple call under way when SIGSTOP struck finishes after SIGCONT (it
	// checked the lease before the pause). The spout's next call finds the lease
	// lost, logs it, and emits nothing from then on; its count reaches /metrics
	// at the flush that ends that call's batch (or at a scrape while the task is
	// idle): once the line is logged, the count is the one two reads in a row
	// agree on, and it must not move again. One call emits at most a recovered
	// chunk (32 records).
	first := emitted
	waitfor.Until(t, 10*time.Second, func() error {
		if n := strings.Count(a.stderr.String(), lostLine); n == lostBefore {
			return fmt.Errorf("the paused serve's log spout has not logged %q since the SIGCONT", lostLine)
		}
		return nil
	})
	last := ""
	waitfor.Until(t, 10*time.Second, func() error {
		now, _ := metricOf(a.url, `gale_emitted_total{component="events"`)
		if now != last {
			last = now
			return fmt.Errorf("the paused serve's spout still emits after it knew it lost the lease (%s, then %s)", first, now)
		}
		emitted = now
		return nil
	})
	if f, e := atoiOr(first), atoiOr(emitted); e-f > 32 {
		t.Errorf("the paused serve emitted %d tuples after it knew it lost the lease, more than one NextTuple call's", e-f)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Sent != lines || r.rep.Final["PROCESSED"] != lines || len(r.rep.Final) != 1 || r.rep.Broken() != 0 {
		t.Fatalf("report %+v", r.rep)
	}
	if after, _ := metricOf(a.url, `gale_emitted_total{component="events"`); after != emitted {
		t.Errorf("the paused serve emitted %s tuples in all, %s once its count settled after it knew it lost the lease: it read the log while the other held it", after, emitted)
	}
	if p := holderPid(); p != b.cmd.Process.Pid {
		t.Errorf("lease holder pid %d at the end, want the second serve's %d", p, b.cmd.Process.Pid)
	}
	n, distinct := rows()
	if distinct != lines {
		t.Errorf("order_lines: %d ids in the two sinks, want %d", distinct, lines)
	}
	t.Logf("%d rows in the two sinks: %d lines processed by both (at least once: the paused one's trees in flight)", n, n-distinct)
	// The first answers for events the second processed (the last one sent, say).
	var lastID string
	_ = dbs[1].SQL.QueryRow("SELECT event_id FROM order_lines ORDER BY rowid DESC LIMIT 1").Scan(&lastID)
	if st, found, err := (&ingest.Client{URL: a.url}).Status(ctx, lastID); err != nil || !found || st.Status != ingest.Processed {
		t.Errorf("the first serve's status of %s: %+v %v, want PROCESSED", lastID, st, err)
	}
	if resp, err := http.Get(a.url + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("the first serve's /readyz after SIGCONT: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// Fenced writes are told once, not at every flush.
	if n := strings.Count(a.stderr.String(), "committed offset not moved"); n > 3 {
		t.Errorf("the paused serve logged %d times that its offset was not moved", n)
	}
	close(stopWatch)
	<-watchDone
	mu.Lock()
	if len(regress) > 0 {
		t.Errorf("the committed offset went back: %v", regress)
	}
	if len(offsets) == 0 {
		t.Error("the committed offset was never seen")
	} else {
		t.Logf("committed offset stored %d times while watched, last %d", len(offsets), offsets[len(offsets)-1])
	}
	mu.Unlock()
	stopServe(t, a)
	stopServe(t, b)
	ids := streamIDs(t, js, 1)
	if len(ids) != lines {
		t.Errorf("the stream holds %d ids, want %d", len(ids), lines)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
}

// atoiOr is a metric's value as an integer (0 if it is not one).
func atoiOr(v string) int {
	f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
	return int(f)
}
