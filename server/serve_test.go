package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
	. "github.com/gale-stream/gale/server"
)

// Shutdown answers every request it took in. A request can still meet a closed or
// reset connection (sent on a connection the server never accepted, or as it
// closed an idle one): then none of its events may be in the log, because the
// server never read it, and the client's retry with the same ids is safe.
func TestShutdownAnswersEveryRequestTakenIn(t *testing.T) {
	dir := t.TempDir()
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := &ingest.Client{URL: s.URL()}
	var answered, refused atomic.Int64
	var mu sync.Mutex
	var cut []error
	var cutIDs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				evs := make([]event.Event, 100)
				for i := range evs {
					evs[i] = event.Event{ID: fmt.Sprintf("s%d-%d-%d", w, b, i), Source: "t", Type: "t", Payload: []byte(`{}`)}
				}
				answers, _, err := c.Send(context.Background(), evs, ingest.LevelProcessed, 0)
				switch {
				case answers != nil:
					answered.Add(1)
				case errors.Is(err, syscall.ECONNREFUSED):
					refused.Add(1)
					return
				default:
					var op *net.OpError
					if errors.As(err, &op) && op.Op == "dial" {
						refused.Add(1)
						return
					}
					mu.Lock()
					cut = append(cut, err)
					for _, e := range evs {
						cutIDs = append(cutIDs, e.ID)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	waitfor.True(t, 30*time.Second, "16 answers", func() bool { return answered.Load() >= 16 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	close(stop)
	wg.Wait()
	l, err := eventlog.Open(eventlog.Options{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, id := range cutIDs {
		if _, found, err := l.Lookup(id); found || err != nil {
			t.Fatalf("%s is in the log but its request got no answer (%v); cut requests: %v", id, err, cut)
		}
	}
	t.Logf("%d answered, %d refused, %d cut before the server read them", answered.Load(), refused.Load(), len(cut))
	if answered.Load() < 16 {
		t.Fatalf("only %d answers", answered.Load())
	}
}

// A pipeline that is only a name (nothing to build) is refused at Start, naming
// it; gale serve --pipeline's unknown names are the registry's (pipeline_test.go).
func TestStartRefusesAnUnknownPipeline(t *testing.T) {
	if _, err := start(context.Background(), Options{DataDir: t.TempDir(), Pipeline: Pipeline{Name: "nope"}}); err == nil ||
		!strings.Contains(err.Error(), `pipeline "nope" has no Build`) {
		t.Fatalf("a pipeline without Build: %v", err)
	}
}

// A taken port, or a data directory another server holds, is an error naming the
// problem (not a panic), and what Start opened is closed again.
func TestStartErrorsCleanUp(t *testing.T) {
	dir := t.TempDir()
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	addr := s.URL()[len("http://"):]
	if _, err := start(context.Background(), Options{Addr: addr, DataDir: t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("taken port: %v", err)
	}
	if _, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: dir}); err == nil ||
		!strings.Contains(err.Error(), "is another gale using --data") {
		t.Fatalf("data directory in use: %v", err)
	}
}

// gale serve's default pipeline through the API: versions of one key arriving out of
// order (3, 1, 2) leave version 3 in entities, and every event once in events.
func TestOutOfOrderVersionsKeepTheNewest(t *testing.T) {
	s, err := start(context.Background(), Options{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	c := &ingest.Client{URL: s.URL()}
	for _, v := range []int64{3, 1, 2} {
		v := v
		e := event.Event{ID: fmt.Sprintf("pump-7:%d", v), Source: "devices", Type: "device_command", Key: "pump-7",
			Version: &v, Payload: []byte(fmt.Sprintf(`{"setpoint":%d}`, v*10))}
		answers, _, err := c.Send(context.Background(), []event.Event{e}, ingest.LevelProcessed, 0)
		if err != nil || answers[0].Status != ingest.Processed {
			t.Fatalf("version %d: %+v %v", v, answers, err)
		}
	}
	var version int64
	var payload string
	if err := s.DB.SQL.QueryRow(`SELECT version, payload FROM entities WHERE key = 'pump-7'`).Scan(&version, &payload); err != nil {
		t.Fatal(err)
	}
	var n int
	_ = s.DB.SQL.QueryRow(`SELECT count(*) FROM events`).Scan(&n)
	if version != 3 || payload != `{"setpoint":30}` || n != 3 {
		t.Fatalf("entities: version %d payload %s; events rows %d", version, payload, n)
	}
}
