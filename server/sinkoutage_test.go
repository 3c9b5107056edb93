package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/ingesttest"
	"github.com/gale-stream/gale/internal/pgtest"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
	. "github.com/gale-stream/gale/server"
	"github.com/gale-stream/gale/topology"
)

// getJSON GETs path from s and decodes its JSON body into v; it returns the status.
func getJSON(t *testing.T, s *Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(s.URL() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return resp.StatusCode
}

type readiness struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

func deadLetters(t *testing.T, s *Server) int {
	t.Helper()
	var dl struct {
		DeadLetters []ingest.DeadLetter `json:"dead_letters"`
	}
	if code := getJSON(t, s, "/v1/dead-letters?limit=10000", &dl); code != 200 {
		t.Fatalf("GET /v1/dead-letters: HTTP %d", code)
	}
	return len(dl.DeadLetters)
}

// waitOutage waits until /readyz reports the sink unavailable, or (the fault) some
// event is dead-lettered first, and checks it is the former.
func waitOutage(t *testing.T, s *Server, reasonWord string) readiness {
	t.Helper()
	var r readiness
	waitfor.Until(t, 60*time.Second, func() error {
		r = readiness{}
		code := getJSON(t, s, "/readyz", &r)
		dead := deadLetters(t, s)
		if dead > 0 {
			t.Fatalf("%d events dead-lettered during the sink outage (readyz %d %+v)", dead, code, r)
		}
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("the sink outage was never reported: readyz %d %+v", code, r)
		}
		if !strings.Contains(r.Reason, "sink") || !strings.Contains(r.Reason, reasonWord) {
			t.Fatalf("readyz reason %q does not name the sink and %q", r.Reason, reasonWord)
		}
		return nil
	})
	return r
}

// waitProcessed waits until every id is PROCESSED (bounded), then checks that
// none was charged an attempt beyond its first and that /readyz is 200 again.
func waitProcessed(t *testing.T, s *Server, ids []string) {
	t.Helper()
	got := ingesttest.WaitProcessed(t, 120*time.Second, ingesttest.Of(s.Service), ids)
	for _, id := range ids {
		if st := got[id]; st.Attempts != 1 {
			t.Errorf("%s PROCESSED with %d attempts charged, want 1 (the outage is not its fault); last error %q", id, st.Attempts, st.LastError)
		}
	}
	if dead := deadLetters(t, s); dead != 0 {
		t.Errorf("%d dead letters, want 0", dead)
	}
	var r readiness
	if code := getJSON(t, s, "/readyz", &r); code != 200 {
		t.Errorf("readyz after the sink came back: %d %+v", code, r)
	}
}

func post(t *testing.T, c *ingest.Client, prefix string, n, payload int, level ingest.Level) []string {
	t.Helper()
	var ids []string
	pad := strings.Repeat("x", payload)
	for i := 0; i < n; i += 100 {
		var evs []event.Event
		for j := i; j < min(i+100, n); j++ {
			id := fmt.Sprintf("%s-%05d", prefix, j)
			evs = append(evs, event.Event{ID: id, Source: "t", Type: "t", Payload: []byte(`{"pad":"` + pad + `"}`)})
			ids = append(ids, id)
		}
		answers, _, err := c.Send(context.Background(), evs, level, 0)
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		for _, a := range answers {
			if a.Status != ingest.Persisted && a.Status != ingest.Processed {
				t.Fatalf("answer %+v", a)
			}
		}
	}
	return ids
}

// metric returns the value of a sample line of /metrics ("name{labels} value").
func metric(t *testing.T, s *Server, name string) string {
	t.Helper()
	resp, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
			return f[1]
		}
	}
	return ""
}

// The reproduction: the log on a healthy disk, the SQLite sink on a 1 MiB
// tmpfs that fills up, 3,000 events. The full disk is a sink outage: /readyz turns
// 503 naming it, no event is dead-lettered or charged an attempt, a metric and one
// log line say so; when the filesystem has room again every event ends PROCESSED
// with no operator action, and the outage's end is logged and counted once.
func TestSQLiteSinkOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the sink (.ci/run runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): this test needs a root that may mount", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	logs := &testio.SyncBuffer{}
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(),
		SinkURL: filepath.Join(mnt, "sink.db"), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	c := &ingest.Client{URL: s.URL()}
	ids := post(t, c, "full", 3000, 500, ingest.LevelPersisted) // ~1.5 MB of payload
	r := waitOutage(t, s, "full")
	t.Logf("readyz during the outage: %+v", r)
	if got := metric(t, s, "gale_sink_available"); got != "0" {
		t.Errorf("gale_sink_available = %q during the outage, want 0", got)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	waitProcessed(t, s, ids)
	var n int
	if err := s.DB.SQL.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 3000 {
		t.Errorf("events rows = %d (%v), want 3000", n, err)
	}
	if got := metric(t, s, "gale_sink_available"); got != "1" {
		t.Errorf("gale_sink_available = %q after the outage, want 1", got)
	}
	if got := metric(t, s, "gale_sink_outages_total"); got != "1" {
		t.Errorf("gale_sink_outages_total = %q, want 1", got)
	}
	down, up := logs.Lines("sink unavailable"), logs.Lines("sink available again")
	if len(down) != 1 || len(up) != 1 {
		t.Errorf("log lines: %d 'sink unavailable' %q and %d 'sink available again' %q, want one each", len(down), down, len(up), up)
	}
}

// PostgreSQL stopped in the middle of a run (a server the test starts itself), then
// started again, twice: a fast shutdown (sessions end with SQLSTATE 57P01, then
// connections are refused) and an immediate one (as a crash: connections drop mid
// transaction). Events posted before, during and after each outage all end
// PROCESSED, once each in the sink, none charged an attempt for the outage.
func TestPostgresSinkDownThenBack(t *testing.T) {
	pg := pgtest.Start(t)
	logs := &testio.SyncBuffer{}
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: t.TempDir(),
		SinkURL: pg.URL(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	c := &ingest.Client{URL: s.URL()}
	var all []string
	for i, mode := range []string{"fast", "immediate"} {
		before := post(t, c, fmt.Sprintf("before%d", i), 500, 100, ingest.LevelProcessed)
		// Events in flight as the server stops: posted at persisted, not waited for.
		during := post(t, c, fmt.Sprintf("during%d", i), 1000, 100, ingest.LevelPersisted)
		pg.StopServer(mode)
		during = append(during, post(t, c, fmt.Sprintf("down%d", i), 1000, 100, ingest.LevelPersisted)...)
		r := waitOutage(t, s, "")
		t.Logf("readyz during the %s outage: %+v", mode, r)
		pg.StartServer()
		all = append(all, before...)
		all = append(all, during...)
		waitProcessed(t, s, all)
	}
	var n, distinct int
	if err := s.DB.SQL.QueryRow(`SELECT count(*), count(DISTINCT event_id) FROM events`).Scan(&n, &distinct); err != nil || n != len(all) || distinct != len(all) {
		t.Errorf("events rows = %d, distinct ids %d (%v), want %d", n, distinct, err, len(all))
	}
	if got := metric(t, s, "gale_sink_available"); got != "1" {
		t.Errorf("gale_sink_available = %q after the outages, want 1", got)
	}
	down := logs.Lines("sink unavailable")
	if len(down) < 2 {
		t.Errorf("%d 'sink unavailable' log lines, want one per outage at least: %q", len(down), down)
	}
	for _, l := range down {
		t.Log(l)
	}
}

// Issue 9 §2's second half: a damaged SQLite sink database found at a restart is a
// sink outage, never the events' fault. The server starts, takes events in as
// PERSISTED, reports /readyz 503 naming the damage, and dead-letters nothing (on the
// code before, every event was charged until dead-lettered). The way out is the
// operator's: a fresh sink database, rebuilt from the log.
func TestDamagedSQLiteSinkIsAnOutage(t *testing.T) {
	dir := t.TempDir()
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := &ingest.Client{URL: s.URL()}
	post(t, c, "first", 300, 2000, ingest.LevelProcessed)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Garbage over every page but the first (the header and the schema): the
	// tables' b-trees are what a failing disk damaged.
	path := filepath.Join(dir, "sink.db")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if fi.Size() < 3*4096 {
		t.Fatalf("sink.db is only %d bytes", fi.Size())
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, int(fi.Size())-4096), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err = start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		// Refusing to start, naming the damage, is a clear reason too.
		if !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("restart on a damaged sink: %v", err)
		}
		return
	}
	defer func() {
		// The held trees cannot complete: do not wait the drain's 30 s out.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	c = &ingest.Client{URL: s.URL()}
	post(t, c, "after", 300, 100, ingest.LevelPersisted)
	r := waitOutage(t, s, "malformed")
	t.Logf("readyz on a damaged sink: %+v", r)
}

// Review finding F: a stalled database (another connection holding SQLite's
// exclusive lock) with a message timeout shorter than the sink's fixed waits (10 s
// FlushTimeout, 5 s busy timeout) timed trees out before the stall counted as an
// outage: they were charged, and with one attempt allowed dead-lettered ("message
// timeout"), while /readyz said 200. Now the sink's waits come from the topology's
// message timeout (a third of it), so the stall is an outage first: /readyz 503
// naming it, nothing charged, and once the lock is gone every event is PROCESSED
// with attempts 1.
func TestStalledSQLiteSinkIsAnOutageBeforeTreesTimeOut(t *testing.T) {
	dir := t.TempDir()
	tc := topology.DefaultConfig()
	tc.MessageTimeout = 2 * time.Second
	o := Options{Addr: "127.0.0.1:0", DataDir: dir, Topology: &tc}
	o.Ingest.Tracker.MaxAttempts = 1 // a charged attempt is a dead letter
	s, err := start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	c := &ingest.Client{URL: s.URL()}
	post(t, c, "before", 50, 100, ingest.LevelProcessed) // the tables are in use

	other, err := sql.Open("sqlite", filepath.Join(dir, "sink.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	ids := post(t, c, "stalled", 300, 100, ingest.LevelPersisted)
	r := waitOutage(t, s, "lock")
	t.Logf("readyz during the stall: %+v", r)
	// The stall outlasts the message timeout: trees that were not kept alive would
	// time out now (the fault is the lock's length, not a wait for something).
	time.Sleep(2 * tc.MessageTimeout)
	if dead := deadLetters(t, s); dead != 0 {
		t.Fatalf("%d events dead-lettered during the stall", dead)
	}
	if _, err := lock.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, s, ids)
}

// Review finding G: a SQLite sink file deleted (or replaced) while gale serve runs
// went unnoticed: events were answered PROCESSED into an unlinked file no one can
// read, /readyz said 200. Now it is a sink outage naming the file: nothing is
// written or charged, /readyz is 503, and after a restart (which opens the file now
// at the path) every held event ends PROCESSED.
func TestSQLiteSinkFileGoneIsAnOutage(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		do           func(t *testing.T, path string)
	}{
		{"deleted", "deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", "replaced", func(t *testing.T, path string) {
			// As a restore from a copy does: a new file renamed over the old one.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+".new", b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			cl := &ingest.Client{URL: s.URL()}
			post(t, cl, "before", 50, 100, ingest.LevelProcessed)
			c.do(t, filepath.Join(dir, "sink.db"))
			ids := post(t, cl, "after", 100, 100, ingest.LevelPersisted)
			r := waitOutage(t, s, c.reason)
			t.Logf("readyz: %+v", r)
			for _, id := range ids {
				if st, err := s.Service.Status(id); err != nil || st.Status == ingest.Processed {
					t.Fatalf("%s answered %v (%v) while the sink file was %s", id, st.Status, err, c.name)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_ = s.Shutdown(ctx) // the held trees cannot complete
			s, err = start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			waitProcessed(t, s, ids)
		})
	}
}
