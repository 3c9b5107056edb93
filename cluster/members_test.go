package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/clock"
)

// waitMember returns the next event of kind for worker name.
func waitMember(t *testing.T, ch <-chan MemberEvent, d time.Duration, kind MemberEventKind, name string) MemberEvent {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed waiting for %s %s", name, kind)
			}
			if ev.Kind == kind && ev.Worker.Name == name {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %s %s within %v", name, kind, d)
		}
	}
}

// waitJoined returns the Joined events of the workers named, in any order (other
// events are dropped).
func waitJoined(t *testing.T, ch <-chan MemberEvent, d time.Duration, names ...string) map[string]MemberEvent {
	t.Helper()
	got := map[string]MemberEvent{}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(got) < len(names) {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed waiting for %v to join", names)
			}
			if ev.Kind == Joined && slices.Contains(names, ev.Worker.Name) {
				got[ev.Worker.Name] = ev
			}
		case <-timer.C:
			t.Fatalf("only %d of %v joined within %v", len(got), names, d)
		}
	}
	return got
}

func TestOpenBucketsAndConfig(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	s := openStore(t, url, Config{Prefix: prefix, HeartbeatTTL: time.Second, LeaseTTL: 2 * time.Second})
	if got, want := s.Buckets(), [4]string{prefix + "-workers", prefix + "-lease", prefix + "-topologies", prefix + "-assignments"}; got != want {
		t.Errorf("buckets %v, want %v", got, want)
	}
	// A member that says nothing takes the cluster's TTLs.
	js := openStore(t, url, Config{Prefix: prefix, HeartbeatTTL: time.Second, LeaseTTL: 2 * time.Second}).js
	s2, err := Open(ctxT(t, 10*time.Second), js, Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if c := s2.Config(); c.HeartbeatTTL != time.Second || c.LeaseTTL != 2*time.Second {
		t.Errorf("TTLs taken from the buckets: heartbeat %v lease %v, want 1s 2s", c.HeartbeatTTL, c.LeaseTTL)
	}
	// One that asks for other TTLs is refused, naming both.
	_, err = Open(ctxT(t, 10*time.Second), js, Config{Prefix: prefix, HeartbeatTTL: 5 * time.Second})
	if !errors.Is(err, ErrConfig) || err.Error() != "cluster: bad configuration: bucket "+prefix+"-workers has a TTL of 1s, this process asks for 5s (every member must use the same)" {
		t.Errorf("TTL mismatch: %v", err)
	}
	for _, c := range []Config{{Prefix: "a.b"}, {HeartbeatTTL: 500 * time.Millisecond}, {Replicas: 7}} {
		if _, err := Open(ctxT(t, 10*time.Second), js, c); !errors.Is(err, ErrConfig) {
			t.Errorf("Open(%+v): %v, want ErrConfig", c, err)
		}
	}
}

// NoCreate binds a cluster that exists and creates nothing where there is none.
func TestOpenNoCreate(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	nc := connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctxT(t, 10*time.Second), js, Config{Prefix: prefix, NoCreate: true})
	var nce *NoClusterError
	if !errors.As(err, &nce) || nce.Bucket != prefix+"-workers" || err.Error() != `cluster: no cluster with prefix "`+prefix+`": bucket `+prefix+`-workers does not exist` {
		t.Fatalf("Open with NoCreate and no cluster: %v", err)
	}
	for name := range js.KeyValueStoreNames(ctxT(t, 10*time.Second)).Name() {
		t.Errorf("Open with NoCreate created bucket %s", name)
	}
	openStore(t, url, Config{Prefix: prefix, HeartbeatTTL: time.Second})
	s, err := Open(ctxT(t, 10*time.Second), js, Config{Prefix: prefix, NoCreate: true})
	if err != nil || s.Config().HeartbeatTTL != time.Second {
		t.Fatalf("Open with NoCreate of an existing cluster: %v", err)
	}
}

// Two workers heartbeat and are listed with what they said; one that stops beating
// is gone after the TTL (the server's expiry, seen by the watch), while the other,
// beating every TTL/3, stays.
func TestHeartbeatsAndExpiry(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	watcher := openStore(t, url, Config{Prefix: prefix})
	ch, err := watcher.WatchWorkers(ctxT(t, 30*time.Second), true)
	if err != nil {
		t.Fatal(err)
	}
	live := openStore(t, url, Config{Prefix: prefix})
	// The silent worker's clock never moves: it beats once, at Run's start.
	silent := openStore(t, url, Config{Prefix: prefix, Clock: clock.NewFake(time.Now())})
	h1, _ := heartbeat(t, live, "w1", 2)
	h2, _ := heartbeat(t, silent, "w2", 3)
	joined := waitJoined(t, ch, 5*time.Second, "w1", "w2")
	j2 := joined["w2"]

	ws, err := watcher.Workers(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Name != "w1" || ws[1].Name != "w2" {
		t.Fatalf("workers %+v, want w1 and w2", ws)
	}
	if w := ws[1]; w.Slots != 3 || w.Host != "127.0.0.1" || w.Module != "(test)" || w.Incarnation != h2.Info().Incarnation || w.Incarnation == h1.Info().Incarnation || w.Revision == 0 || w.Beat.IsZero() {
		t.Errorf("w2 listed as %+v", w)
	}

	// w2 goes when the server expires its key: a TTL after its only beat, not before.
	beats := 0
	var left MemberEvent
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
wait:
	for {
		select {
		case ev := <-ch:
			switch {
			case ev.Worker.Name == "w1" && ev.Kind == Beat:
				beats++
			case ev.Worker.Name == "w1":
				t.Fatalf("w1: %s", ev.Kind)
			case ev.Kind == Left:
				left = ev
				break wait
			}
		case <-timer.C:
			t.Fatal("w2 not gone within 10s")
		}
	}
	if !left.Expired {
		t.Errorf("w2 left without expiring: %+v", left)
	}
	gone := left.At.Sub(j2.At)
	if gone < testTTL {
		t.Errorf("w2 gone %v after its last beat, before the TTL of %v", gone, testTTL)
	}
	t.Logf("w2 gone %v after its last beat (TTL %v); w1 beat %d times meanwhile", gone, testTTL, beats)
	// w1 beats every TTL/3: at least twice within a TTL.
	if beats < 2 {
		t.Errorf("w1 beat %d times in %v, want at least 2", beats, gone)
	}
	ws, err = watcher.Workers(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Name != "w1" {
		t.Errorf("workers after w2's expiry: %+v", ws)
	}
}

// A worker that stops gracefully deletes its key: gone at once, not after the TTL.
func TestGracefulLeave(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	s := openStore(t, url, Config{Prefix: prefix, HeartbeatTTL: 5 * time.Second})
	ch, err := s.WatchWorkers(ctxT(t, 30*time.Second), false)
	if err != nil {
		t.Fatal(err)
	}
	_, stop := heartbeat(t, s, "w1", 1)
	j := waitMember(t, ch, 5*time.Second, Joined, "w1")
	stop()
	l := waitMember(t, ch, 5*time.Second, Left, "w1")
	if l.Expired || l.At.Sub(j.At) >= 5*time.Second {
		t.Errorf("graceful leave: %+v, %v after joining", l, l.At.Sub(j.At))
	}
}

// A worker silent past the TTL (paused) finds its key expired at its next beat and
// writes it again: it rejoins, and says so.
func TestRejoinAfterExpiry(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	watcher := openStore(t, url, Config{Prefix: prefix})
	ch, err := watcher.WatchWorkers(ctxT(t, 30*time.Second), true)
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Now())
	s := openStore(t, url, Config{Prefix: prefix, Clock: fake})
	h, _ := heartbeat(t, s, "w1", 1)
	waitMember(t, ch, 5*time.Second, Joined, "w1")
	waitMember(t, ch, 5*time.Second, Left, "w1")
	if err := fake.BlockUntil(ctxT(t, 5*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	fake.Advance(testTTL / 3) // the paused worker's next beat
	j := waitMember(t, ch, 5*time.Second, Joined, "w1")
	if j.Worker.Incarnation != h.Info().Incarnation {
		t.Errorf("rejoined as %q, want its own incarnation %q", j.Worker.Incarnation, h.Info().Incarnation)
	}
	// Its next beat follows the rejoin's bookkeeping.
	fake.Advance(testTTL / 3)
	waitMember(t, ch, 5*time.Second, Beat, "w1")
	if n := h.Rejoins(); n != 1 {
		t.Errorf("Rejoins() = %d, want 1", n)
	}
}

// Two live workers cannot share a name: the second's Run fails, naming the first.
func TestNameInUse(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	s := openStore(t, url, Config{Prefix: prefix})
	ch, err := s.WatchWorkers(ctxT(t, 30*time.Second), false)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := heartbeat(t, s, "w1", 1)
	waitMember(t, ch, 5*time.Second, Joined, "w1")
	h, err := openStore(t, url, Config{Prefix: prefix}).NewHeartbeat(WorkerInfo{Name: "w1", Host: "other", PID: 7})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = h.Run(ctxT(t, 10*time.Second))
	if !errors.Is(err, ErrNameInUse) {
		t.Fatalf("second w1: %v, want ErrNameInUse", err)
	}
	// It waited for a previous run's key to expire (a TTL and a beat) before giving up.
	if d := time.Since(start); d < testTTL {
		t.Errorf("gave up after %v, before the TTL", d)
	}
	t.Logf("second w1 refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	ws, err := s.Workers(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Incarnation != first.Info().Incarnation {
		t.Errorf("workers %+v, want the first w1 only", ws)
	}
	if _, err := s.NewHeartbeat(WorkerInfo{Name: "a.b"}); !errors.Is(err, ErrConfig) {
		t.Errorf("name a.b: %v", err)
	}
}
