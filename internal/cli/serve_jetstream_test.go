package cli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/gale-stream/gale/cluster/natsnode"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog/jslog"
	"github.com/gale-stream/gale/ingest"

	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/sink"
)

// gale serve --log refuses what cannot work, before it opens anything.
func TestServeJetStreamFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--log", "jetstream"}, "give --nats URL"},
		{[]string{"--log", "foo"}, `--log "foo": want pebble`},
		{[]string{"--log", "jetstream", "--nats", "nats://127.0.0.1:1", "--replicas", "0"}, "--replicas 0: JetStream keeps 1 to 5"},
		{[]string{"--log", "jetstream", "--nats", "nats://127.0.0.1:1", "--replicas", "6"}, "--replicas 6"},
		{[]string{"--sys-creds", "x.creds"}, "--sys-creds is for --log jetstream"},
		{[]string{"--spout-lease-ttl", "3s"}, "--spout-lease-ttl is for --log jetstream"},
		{[]string{"--nats", "nats://127.0.0.1:1", "--workers", "0"}, "--workers 0"},
		{[]string{"--replicas", "3"}, "give --nats URL too"},
	} {
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gale serve %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// startServeChild starts gale serve (this test binary as gale) and waits until it
// is ready; the test's end SIGKILLs it by pid if it still runs.
func startServeChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := startChild(t, args...)
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// stopServe SIGTERMs a gale serve child and waits for it; it must exit 0.
func stopServe(t *testing.T, c *child) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("gale serve after SIGTERM: %v\n%s", err, c.stderr.String())
	}
}

// durabilityOf posts one event, alone and in a batch, and returns the two
// answers' durability words.
func durabilityOf(t *testing.T, url, id string) (single, batch string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/events?ack=persisted", "application/json",
		strings.NewReader(`{"event_id":"`+id+`","source":"t","type":"t","payload":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := decodeAnswer(t, b)
	if a.Status != ingest.Persisted && a.Status != ingest.Processed {
		t.Fatalf("POST %s: %s", id, b)
	}
	as, _, err := (&ingest.Client{URL: url}).Send(context.Background(),
		[]event.Event{{ID: id + "-b", Source: "t", Type: "t", Payload: []byte(`{}`)}}, ingest.LevelPersisted, 0)
	if err != nil || len(as) != 1 {
		t.Fatalf("batch %s: %+v %v", id, as, err)
	}
	return a.Durability, as[0].Durability
}

func decodeAnswer(t *testing.T, b []byte) ingest.Answer {
	t.Helper()
	var a ingest.Answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

// gale serve --log jetstream on one embedded node (gale nats's package): the
// orders pipeline ingests a day of retail lines (retailDaySample), every one ends
// PROCESSED and is in the sink once, the stream holds each once, and the answers say
// "replicated:1+fsync" (the node's gale-sync.json, read through --nats-data).
func TestServeJetStreamOneNode(t *testing.T) {
	dir := t.TempDir()
	node, err := natsnode.Start(context.Background(), natsnode.Config{DataDir: dir + "/nats", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown(); node.WaitForShutdown() })
	c := startServeChild(t, "serve", "--log", "jetstream", "--nats", node.ClientURL(), "--nats-data", node.DataDir(),
		"--pipeline", "orders", "--data", dir+"/data", "--addr", freeAddr(t), "--log-level", "warn")
	day, dayLines := retailDaySample(t)
	in, err := OpenInputs([]string{day})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunIngest(ctx, &ingest.Client{URL: c.url}, in, ingest.DefaultSendOptions(), NewIngestProgress(nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != dayLines || rep.Final["PROCESSED"] != dayLines || len(rep.Final) != 1 || rep.Broken() != 0 {
		t.Fatalf("report %+v", rep)
	}
	if s, b := durabilityOf(t, c.url, "probe"); s != "replicated:1+fsync" || b != "replicated:1+fsync" {
		t.Errorf("durability %q (single), %q (batch); want replicated:1+fsync", s, b)
	}
	stopServe(t, c)

	nc, err := node.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ids := streamIDs(t, js, 1)
	if len(ids) != dayLines+2 { // and the two probes
		t.Errorf("the stream holds %d ids, want %d", len(ids), dayLines+2)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
	db, err := sink.Open(ctx, dir+"/data/sink.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lines, distinct int
	if err := db.SQL.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT event_id) FROM order_lines").Scan(&lines, &distinct); err != nil {
		t.Fatal(err)
	}
	if lines != dayLines || distinct != dayLines {
		t.Errorf("order_lines: %d rows, %d ids; want %d each", lines, distinct, dayLines)
	}
}

// A NATS server with a system account, its store syncing always or not, and the
// seed files of a user of an account with JetStream and of a system user.
func sysServer(t *testing.T, syncAlways bool) (url, appSeed, sysSeed string) {
	t.Helper()
	ss := newSysServer(t)
	return ss.start(t, "127.0.0.1:-1", syncAlways).ClientURL(), ss.appSeed, ss.sysSeed
}

// sysNATS is a NATS server's configuration, kept so that the server can be
// restarted on the same store with another sync_interval.
type sysNATS struct {
	dir, appSeed, sysSeed, appPub, sysPub string
}

func newSysServer(t *testing.T) *sysNATS {
	t.Helper()
	ss := &sysNATS{dir: t.TempDir()}
	seed := func(name string) (string, string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		s, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		f := filepath.Join(ss.dir, name+".nk")
		if err := os.WriteFile(f, s, 0o600); err != nil {
			t.Fatal(err)
		}
		return f, pub
	}
	ss.appSeed, ss.appPub = seed("app")
	ss.sysSeed, ss.sysPub = seed("sys")
	return ss
}

// start runs the server on listen (host:port; port -1 picks one) until the test ends.
func (ss *sysNATS) start(t *testing.T, listen string, syncAlways bool) *server.Server {
	t.Helper()
	sync := ""
	if syncAlways {
		sync = "sync_interval: always"
	}
	conf := fmt.Sprintf(`listen: %q
server_name: s1
jetstream { store_dir: %q
  %s }
accounts {
  APP { jetstream: enabled, users: [ { nkey: %s } ] }
  SYS { users: [ { nkey: %s } ] }
}
system_account: SYS
`, listen, filepath.Join(ss.dir, "js"), sync, ss.appPub, ss.sysPub)
	cf := filepath.Join(ss.dir, "nats.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	fo, err := server.ProcessConfigFile(cf)
	if err != nil {
		t.Fatal(err)
	}
	return natstest.Run(t, func(o *server.Options) { *o = *fo; o.NoLog, o.NoSigs = true, true })
}

// The servers restarted with another sync_interval: gale serve, which found
// "replicated:1+fsync" by asking at start, asks again every --durability-recheck
// and its answers say "replicated:1" from then on, and it logs the change.
func TestServeJetStreamDurabilityRecheck(t *testing.T) {
	ss := newSysServer(t)
	addr := freeAddr(t)
	srv := ss.start(t, addr, true)
	ch := startServeChild(t, "serve", "--log", "jetstream", "--nats", srv.ClientURL(), "--nkey", ss.appSeed,
		"--sys-creds", ss.sysSeed, "--durability-recheck", "100ms", "--data", t.TempDir(), "--addr", freeAddr(t), "--log-level", "warn")
	if s, b := durabilityOf(t, ch.url, "e1"); s != "replicated:1+fsync" || b != "replicated:1+fsync" {
		t.Fatalf("durability %q, %q at start", s, b)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	ss.start(t, addr, false) // the same store and port, fsync every 2 minutes
	probes := 0
	waitfor.Until(t, 30*time.Second, func() error {
		s, b := durabilityOf(t, ch.url, fmt.Sprintf("r%d", probes))
		if probes++; s != "replicated:1" || b != "replicated:1" {
			return fmt.Errorf("durability still %q, %q after the restart without sync always", s, b)
		}
		return nil
	})
	stopServe(t, ch)
	if !strings.Contains(ch.stderr.String(), "PERSISTED now means replicated:1, was ") {
		t.Errorf("the change was not logged:\n%s", ch.stderr.String())
	}
}

// The durability word of each way gale serve can tell it: the servers asked with
// --sys-creds (syncing always, or not), and neither asked nor an embedded node's
// record (unknown).
func TestServeJetStreamDurabilityWords(t *testing.T) {
	for _, c := range []struct {
		name       string
		syncAlways bool
		sys        bool
		want       string
	}{
		{"sync always, asked", true, true, "replicated:1+fsync"},
		{"default sync, asked", false, true, "replicated:1"},
		{"sync always, not asked", true, false, "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, app, sys := sysServer(t, c.syncAlways)
			args := []string{"serve", "--log", "jetstream", "--nats", url, "--nkey", app,
				"--data", t.TempDir(), "--addr", freeAddr(t), "--log-level", "warn"}
			if c.sys {
				args = append(args, "--sys-creds", sys)
			}
			ch := startServeChild(t, args...)
			if s, b := durabilityOf(t, ch.url, "e1"); s != c.want || b != c.want {
				t.Errorf("durability %q (single), %q (batch); want %q\n%s", s, b, c.want, ch.stderr.String())
			}
			if !strings.Contains(ch.stderr.String(), "PERSISTED means "+c.want) {
				t.Errorf("the start does not say what PERSISTED means:\n%s", ch.stderr.String())
			}
			stopServe(t, ch)
		})
	}
}

// natsChild is a gale nats process of a three-node cluster.
type natsChild struct {
	name, dir, client, route string
	cmd                      *exec.Cmd
	stderr                   testio.SyncBuffer
	exited                   chan struct{}
}

func (n *natsChild) start(t *testing.T, routes []string, credsFrom string) {
	t.Helper()
	args := []string{"nats", "--data", n.dir, "--name", n.name, "--listen", n.client, "--cluster-listen", n.route,
		"--routes", strings.Join(routes, ","), "--log-level", "warn"}
	if credsFrom != "" {
		args = append(args, "--creds-from", credsFrom)
	}
	n.cmd = childSpawner(args)
	n.stderr = testio.SyncBuffer{}
	n.cmd.Stderr = &n.stderr
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.exited = make(chan struct{})
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
		}
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	select {
	case <-first: // it listens
	case <-n.exited:
		t.Fatalf("gale nats %s exited: %s", n.name, n.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("gale nats %s: no URL line in 30s: %s", n.name, n.stderr.String())
	}
}

func (n *natsChild) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.exited
	}
}

// gale serve --log jetstream --replicas 3 on three gale nats processes: the
// stream's leader is kill -9'd mid-ingest, and after the ingest all three at
// once, then restarted. Every event answered PERSISTED is in the stream once and
// ends PROCESSED, once in the sink.
func TestServeJetStreamThreeNodesKilled(t *testing.T) {
	dir := t.TempDir()
	nodes := make([]*natsChild, 3)
	var routes, urls []string
	for i := range nodes {
		nodes[i] = &natsChild{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			client: freeAddr(t), route: freeAddr(t)}
		routes = append(routes, nodes[i].route)
		urls = append(urls, "nats://"+nodes[i].client)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill()
		}
	})
	creds := natsnode.CredentialsFile(nodes[0].dir)
	for i, n := range nodes {
		from := creds
		if i == 0 {
			from = ""
		}
		n.start(t, routes, from)
	}
	nc, err := natsnode.Connect(strings.Join(urls, ","), nodes[0].dir)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// JetStream's meta leader first (a quorum of the three).
	waitfor.Until(t, time.Minute, func() error {
		actx, acancel := context.WithTimeout(context.Background(), time.Second)
		defer acancel()
		if _, err := js.AccountInfo(actx); err != nil {
			return fmt.Errorf("JetStream on the three nodes: %w", err)
		}
		return nil
	})
	c := startServeChild(t, "serve", "--log", "jetstream", "--nats", strings.Join(urls, ","), "--nats-data", nodes[0].dir,
		"--replicas", "3", "--data", dir+"/data", "--addr", freeAddr(t), "--timeout", "5s", "--log-level", "warn")

	// 4 senders of 600 events each in batches of 50 at ack=persisted, resending
	// (same ids) what is not answered PERSISTED, until it is.
	const senders, perSender, batch = 4, 600, 50
	client := &ingest.Client{URL: c.url}
	var mu sync.Mutex
	persisted := map[string]bool{}
	durabilities := map[string]int{}
	half := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			for b := 0; b < perSender/batch; b++ {
				var evs []event.Event
				for i := range batch {
					id := fmt.Sprintf("s%d-%d", w, b*batch+i)
					evs = append(evs, event.Event{ID: id, Source: "t", Type: "t", Payload: []byte(fmt.Sprintf(`{"n":%d}`, b*batch+i))})
				}
				for len(evs) > 0 && ctx.Err() == nil {
					as, _, err := client.Send(ctx, evs, ingest.LevelPersisted, 0)
					if err != nil && as == nil {
						continue // no answer: send them again
					}
					var again []event.Event
					mu.Lock()
					for i, a := range as {
						switch a.Status {
						case ingest.Persisted, ingest.Processed:
							persisted[a.EventID] = true
							durabilities[a.Durability]++
						default:
							again = append(again, evs[i])
						}
					}
					if len(persisted) >= senders*perSender/3 {
						select {
						case <-half:
						default:
							close(half)
						}
					}
					mu.Unlock()
					evs = again
				}
			}
		})
	}
	<-half
	info, err := js.Stream(ctx, "gale-log")
	if err != nil {
		t.Fatal(err)
	}
	si, err := info.Info(ctx)
	if err != nil || si.Cluster == nil {
		t.Fatalf("stream info: %+v %v", si, err)
	}
	var leader *natsChild
	for _, n := range nodes {
		if n.name == si.Cluster.Leader {
			leader = n
		}
	}
	if leader == nil || si.Config.Replicas != 3 {
		t.Fatalf("stream leader %q, replicas %d", si.Cluster.Leader, si.Config.Replicas)
	}
	leader.kill()
	mu.Lock()
	t.Logf("kill -9 of the stream's leader %s after %d events answered PERSISTED", leader.name, len(persisted))
	mu.Unlock()
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the ingest did not finish: %d of %d PERSISTED", len(persisted), senders*perSender)
	}
	if len(persisted) != senders*perSender || len(durabilities) != 1 || durabilities["replicated:3+fsync"] == 0 {
		t.Fatalf("%d PERSISTED of %d; durability words %v", len(persisted), senders*perSender, durabilities)
	}

	// Every node at once, then all back.
	for _, n := range nodes {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, n := range nodes {
		<-n.exited
	}
	for i, n := range nodes {
		from := creds
		if i == 0 {
			from = ""
		}
		n.start(t, routes, from)
	}
	// The stream is read while the events are awaited: both wait for the
	// cluster to be back.
	type read struct {
		ids map[string]int
		err error
	}
	stream := make(chan read, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() {
		ids, err := readStream(rctx, js, 3)
		stream <- read{ids, err}
	}()

	// Every one ends PROCESSED (the status waits for the sink's commit), once in
	// the sink.
	waitProcessed(t, ctx, 2*time.Minute, client, slices.Collect(maps.Keys(persisted)), nil)
	r := <-stream
	if r.err != nil {
		t.Fatal(r.err)
	}
	for id := range persisted {
		if r.ids[id] != 1 {
			t.Errorf("%s answered PERSISTED: %d records in the stream", id, r.ids[id])
		}
	}
	stopServe(t, c)
	if rows, distinct := eventRows(t, dir+"/data/sink.db"); rows != len(persisted) || distinct != len(persisted) {
		t.Errorf("sink: %d rows, %d ids; want %d each", rows, distinct, len(persisted))
	}
}

// streamIDs reads gale serve's stream (prefix gale) through jslog, up to its last
// seq, and counts the records of each event id (readStream); it fails the test if
// it cannot.
func streamIDs(t *testing.T, js jetstream.JetStream, replicas int) map[string]int {
	t.Helper()
	ids, err := readStream(context.Background(), js, replicas)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// readStream reads gale serve's stream (prefix gale) through jslog, up to its
// last seq, and counts the records of each event id; it waits (bounded, and cut
// short by ctx) for a restarted or healed cluster to serve the stream, also when
// a read fails meanwhile (the stream's leader not elected yet: "no responders"),
// or comes back empty (a reader's consumer stalled by the restart is made again
// after two missed heartbeats).
func readStream(ctx context.Context, js jetstream.JetStream, replicas int) (map[string]int, error) {
	var l *jslog.Log
	err := waitfor.Err(ctx, time.Minute, func() error {
		o, err := jslog.Open(ctx, jslog.Config{JS: js, Prefix: "gale", Replicas: replicas, Timeout: 2 * time.Second, NoLease: true})
		if err != nil {
			return fmt.Errorf("the stream: %w", err)
		}
		l = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	ids := map[string]int{}
	last := l.Durable() // the stream's last seq when opened
	for from := uint64(1); from <= last; {
		// Read hands on what the reader has read ahead, a few records at a time:
		// each wait is for the next ones, so that the reader is read as it fills
		// (a reader not read stalls, and is made again after missed heartbeats).
		var recs []event.Record
		err := waitfor.Err(ctx, 30*time.Second, func() (err error) {
			if recs, err = l.Read(from, 1000); err != nil {
				return fmt.Errorf("the stream's records from seq %d (of %d): %w", from, last, err)
			}
			if len(recs) == 0 {
				return fmt.Errorf("the stream's records from seq %d (of %d) have not come", from, last)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids[r.Event.ID]++
			from = r.Seq + 1
		}
	}
	return ids, nil
}

// waitProcessed waits until every one of ids is PROCESSED, within one bound for
// them all (ctx may end it sooner), and fails the test naming one that is not and
// its last status. want, if not nil, is also checked for each id's status. The
// ids are asked for in order, statusWidth at a time (askStatuses): a wait costs
// one round of them, and a walk of thousands found PROCESSED takes a fraction of
// one request after another.
func waitProcessed(t *testing.T, ctx context.Context, within time.Duration, client *ingest.Client, ids []string, want func(id string, st ingest.EventStatus) error) {
	t.Helper()
	check := func(id string, a statusAnswer) error {
		switch {
		case a.err != nil || !a.found || a.st.Status != ingest.Processed:
			return fmt.Errorf("%s: %+v found %v, %v", id, a.st, a.found, a.err)
		case want != nil:
			if err := want(id, a.st); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		return nil
	}
	ids = slices.Clone(ids) // reordered below
	next := 0               // ids[:next] are PROCESSED
	err := waitfor.Err(ctx, within, func() error {
		for next < len(ids) {
			round := slices.Clone(ids[next:min(next+statusWidth, len(ids))])
			errs := make([]error, len(round))
			for i, a := range askStatuses(ctx, client, round) {
				errs[i] = check(round[i], a)
			}
			// The ones PROCESSED move before those not: they are not asked again.
			var not []string
			var first error
			for i, id := range round {
				if errs[i] == nil {
					ids[next] = id
					next++
				} else {
					not = append(not, id)
					first = cmp.Or(first, errs[i])
				}
			}
			copy(ids[next:], not)
			if first != nil {
				return fmt.Errorf("%d of %d PROCESSED; %w", next, len(ids), first)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// statusWidth is how many statuses askStatuses asks for at once.
const statusWidth = 16

// statusHTTP is http.DefaultClient with statusWidth connections kept per host
// (the default keeps 2): askStatuses does not dial a connection per request.
var statusHTTP = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = statusWidth
	return &http.Client{Transport: t}
}()

// statusAnswer is what GET /v1/events/{id} answered.
type statusAnswer struct {
	st    ingest.EventStatus
	found bool
	err   error
}

// askStatuses asks client for the status of each of ids, statusWidth at a time,
// and returns the answers in the order of ids.
func askStatuses(ctx context.Context, client *ingest.Client, ids []string) []statusAnswer {
	if client.HTTP == nil {
		c := *client
		c.HTTP = statusHTTP
		client = &c
	}
	out := make([]statusAnswer, len(ids))
	width := make(chan struct{}, statusWidth)
	var wg sync.WaitGroup
	for i, id := range ids {
		width <- struct{}{}
		wg.Go(func() {
			defer func() { <-width }()
			st, found, err := client.Status(ctx, id)
			out[i] = statusAnswer{st, found, err}
		})
	}
	wg.Wait()
	return out
}

// eventRows counts the rows of the events pipeline's sink at path, and their ids.
func eventRows(t *testing.T, path string) (rows, distinct int) {
	t.Helper()
	db, err := sink.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SQL.QueryRow("SELECT count(*), count(DISTINCT event_id) FROM events").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	return rows, distinct
}
