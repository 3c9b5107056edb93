// Package bench measures gale's ingest path: the raw fdatasync limit of the disk
// under the data directory, and PERSISTED answers through the HTTP API. It is the
// engine of `gale bench ingest`; figures come from real runs, never from tests.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/eventlog/jslog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/ingest/access"
	"github.com/gale-stream/gale/metrics/ingestmetrics"
)

// IngestOptions configure Ingest.
type IngestOptions struct {
	// Dir holds the bench's files (a log per row and the raw file); it must be on the
	// disk to measure. Emptied rows are removed afterwards.
	Dir string
	// Events are the real events whose source, type, key and payload are sent
	// (cycled, each with a fresh event_id). Required.
	Events []event.Event
	// Clients is the number of concurrent single-event clients (default 64).
	Clients int
	// BatchClients and BatchSize shape the NDJSON rows (default 8 clients × 1000).
	BatchClients, BatchSize int
	// Duration of each row (default 5s).
	Duration time.Duration
	// Rows selects rows by number (1 to MaxRow); empty runs all. Rows 5 to 8 run
	// on three embedded NATS nodes (sync_interval: always) started once, in Dir.
	Rows []int
	// Metrics adds gale serve's ingest metrics to the HTTP rows (requests by route
	// and code, group commit histograms, the service's and log's counters) and
	// gathers them every second, as a Prometheus scrape does, to measure their cost.
	Metrics bool
	// Auth puts gale serve's access guard (ingest/access) in front of the HTTP rows,
	// with a tokens file of one write:* token that every request sends, to measure
	// its cost.
	Auth bool
	// Slices, above 1, runs each raw JetStream row and the log row compared with it
	// in turns, Duration/Slices at a time (each slice on a fresh stream; the pair's
	// order alternates), and adds the slices up: on a machine whose load drifts,
	// both rows see the same share of it.
	Slices int
}

// Row is one measured line.
type Row struct {
	Name     string
	Requests uint64 // answers (or syncs, for the disk rows)
	Events   uint64 // events (records) acknowledged
	Errors   uint64 // answers other than the expected status
	Elapsed  time.Duration
	Latency  *engine.Histogram // per request (per record for disk rows)
	Log      eventlog.Stats    // the log's group commits (HTTP rows)
	// Counted is what gale_http_requests_total counted (HTTP rows with Metrics).
	Counted uint64
	// Num is the row's number (1 to MaxRow).
	Num int
	// VsRaw is, for a JetStream log row, its events/s over those of raw JetStream
	// at the same replicas (row RawNum), when both ran.
	VsRaw  float64
	RawNum int
}

// EventsPerSec is the throughput of acknowledged events.
func (r Row) EventsPerSec() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// Ingest runs every row in turn and returns them.
func Ingest(ctx context.Context, o IngestOptions) ([]Row, error) {
	if len(o.Events) == 0 {
		return nil, errors.New("bench: no events to send")
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if o.BatchClients <= 0 {
		o.BatchClients = 8
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	bodies := make([][]byte, len(o.Events))
	size := 0
	for i, e := range o.Events {
		bodies[i] = eventJSON(nil, e, "x")
		r := event.Record{Event: e}
		size += len(r.Encode(nil))
	}
	recBytes := size / len(o.Events)
	var rows []Row
	want := func(n int) bool {
		if len(o.Rows) == 0 {
			return true
		}
		for _, r := range o.Rows {
			if r == n {
				return true
			}
		}
		return false
	}
	var js *jsCluster
	defer func() {
		if js != nil {
			js.close()
		}
	}()
	cluster := func() (*jsCluster, error) {
		var err error
		if js == nil {
			js, err = startJSCluster(ctx, o.Dir)
		}
		return js, err
	}
	type runner = func(IngestOptions) (Row, error)
	jsRow := func(f func(context.Context, IngestOptions, *jsCluster, int) (Row, error), replicas int) runner {
		return func(o IngestOptions) (Row, error) {
			c, err := cluster()
			if err != nil {
				return Row{}, fmt.Errorf("bench: the NATS cluster: %w", err)
			}
			return f(ctx, o, c, replicas)
		}
	}
	runs := []runner{
		func(o IngestOptions) (Row, error) { return diskRow(ctx, o, 1, recBytes) },
		func(o IngestOptions) (Row, error) { return diskRow(ctx, o, o.Clients, recBytes) },
		func(o IngestOptions) (Row, error) { return httpRow(ctx, o, false) },
		func(o IngestOptions) (Row, error) { return httpRow(ctx, o, true) },
		jsRow(rawJSRow, 1),
		jsRow(jsLogRow, 1),
		jsRow(rawJSRow, 3),
		jsRow(jsLogRow, 3),
	}
	byNum := map[int]int{} // row number -> index in rows
	for i := 0; i < len(runs); i++ {
		if !want(i + 1) {
			continue
		}
		if (i+1 == 5 || i+1 == 7) && o.Slices > 1 && want(i+2) {
			raw, lg, err := slicedPair(o, runs[i], runs[i+1])
			raw.Num, lg.Num = i+1, i+2
			for _, r := range []Row{raw, lg} {
				if r.Name != "" {
					byNum[r.Num] = len(rows)
					rows = append(rows, r)
				}
			}
			if err != nil {
				return rows, err
			}
			i++
			continue
		}
		r, err := runs[i](o)
		r.Num = i + 1
		if err != nil {
			if r.Name != "" {
				rows = append(rows, r)
			}
			return rows, err
		}
		byNum[i+1] = len(rows)
		rows = append(rows, r)
	}
	// The JetStream log's rows against raw JetStream at the same replicas.
	for logRow, rawRow := range map[int]int{6: 5, 8: 7} {
		li, ok1 := byNum[logRow]
		ri, ok2 := byNum[rawRow]
		if ok1 && ok2 && rows[ri].Events > 0 {
			rows[li].VsRaw = rows[li].EventsPerSec() / rows[ri].EventsPerSec()
			rows[li].RawNum = rawRow
		}
	}
	return rows, nil
}

// slicedPair runs raw and its log row in o.Slices turns of o.Duration/o.Slices
// each, raw first in the even turns and the log first in the odd ones, and adds
// each one's turns up.
func slicedPair(o IngestOptions, raw, log func(IngestOptions) (Row, error)) (Row, Row, error) {
	n := o.Slices
	o.Duration /= time.Duration(n)
	var out [2]Row
	for k := range n {
		for j := range 2 {
			if k%2 == 1 {
				j = 1 - j
			}
			r, err := []func(IngestOptions) (Row, error){raw, log}[j](o)
			out[j] = addSlice(out[j], r, n)
			if err != nil {
				return out[0], out[1], err
			}
		}
	}
	return out[0], out[1], nil
}

// addSlice adds slice r of n to the row acc.
func addSlice(acc, r Row, n int) Row {
	if r.Name == "" {
		return acc
	}
	// Each slice's stream has its own leader (the client is on it, whichever).
	name, _, _ := strings.Cut(r.Name, ", client on the stream leader ")
	name += fmt.Sprintf(", client on the stream leader, in %d slices", n)
	if acc.Latency == nil {
		acc.Latency = &engine.Histogram{}
	}
	acc.Name = name
	acc.Requests += r.Requests
	acc.Events += r.Events
	acc.Errors += r.Errors
	acc.Elapsed += r.Elapsed
	if r.Latency != nil {
		acc.Latency.Merge(r.Latency)
	}
	return acc
}

// MaxRow is the number of the last row.
const MaxRow = 8

// eventJSON appends one event as the API takes it, with the id suffix.
func eventJSON(dst []byte, e event.Event, id string) []byte {
	dst = append(dst, `{"event_id":`...)
	dst = strconv.AppendQuote(dst, id)
	dst = append(dst, `,"source":`...)
	dst = strconv.AppendQuote(dst, e.Source)
	dst = append(dst, `,"type":`...)
	dst = strconv.AppendQuote(dst, e.Type)
	if e.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = strconv.AppendQuote(dst, e.Key)
	}
	dst = append(dst, `,"payload":`...)
	dst = append(dst, e.Payload...)
	return append(dst, '}')
}

// diskRow appends recBytes-sized records to a growing file from writers
// goroutines; one flusher goroutine writes whatever is waiting and fdatasyncs once
// per group (group commit), then acknowledges the group. No HTTP, no Pebble: the
// disk's own limit for the same bytes.
func diskRow(ctx context.Context, o IngestOptions, writers, recBytes int) (Row, error) {
	path := filepath.Join(o.Dir, fmt.Sprintf("raw-%d.wal", writers))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return Row{}, fmt.Errorf("bench: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	type req struct{ done chan struct{} }
	reqs := make(chan req, writers)
	var syncs atomic.Uint64
	var werr atomic.Pointer[error]
	flusherDone := make(chan struct{})
	go func() {
		defer close(flusherDone)
		rec := bytes.Repeat([]byte{'r'}, recBytes)
		var buf []byte
		var group []req
		for r := range reqs {
			group = append(group[:0], r)
		drain:
			for {
				select {
				case r, ok := <-reqs:
					if !ok {
						break drain
					}
					group = append(group, r)
				default:
					break drain
				}
			}
			buf = buf[:0]
			for range group {
				buf = append(buf, rec...)
			}
			if _, err := f.Write(buf); err != nil {
				werr.Store(&err)
			} else if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				werr.Store(&err)
			}
			syncs.Add(1)
			for _, r := range group {
				close(r.done)
			}
		}
	}()
	row := Row{Name: fmt.Sprintf("disk: %d-byte records, fdatasync group commit, %d writer(s)", recBytes, writers)}
	if writers == 1 {
		row.Name = fmt.Sprintf("disk: %d-byte records, one fdatasync per record, 1 writer", recBytes)
	}
	hists := make([]engine.Histogram, writers)
	var n atomic.Uint64
	stop := time.Now().Add(o.Duration)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(stop) {
				t0 := time.Now()
				r := req{done: make(chan struct{})}
				reqs <- r
				<-r.done
				hists[w].Record(int64(time.Since(t0)))
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	row.Elapsed = time.Since(start)
	close(reqs)
	<-flusherDone
	if p := werr.Load(); p != nil {
		return row, fmt.Errorf("bench: %s: %w", path, *p)
	}
	row.Requests, row.Events = syncs.Load(), n.Load()
	row.Latency = merge(hists)
	return row, ctx.Err()
}

func merge(hs []engine.Histogram) *engine.Histogram {
	out := &engine.Histogram{}
	for i := range hs {
		out.Merge(&hs[i])
	}
	return out
}

// rawClient is a minimal HTTP/1.1 keep-alive client, as load generators such as
// wrk are: a request is bytes written, an answer is a status line, headers and a
// Content-Length body. net/http's client cost as much CPU as the server it loads,
// on the same two cores.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	body []byte
}

func (c *rawClient) do(req []byte) (int, []byte, error) {
	if _, err := c.conn.Write(req); err != nil {
		return 0, nil, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(h) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(h, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if length < 0 {
		return code, nil, fmt.Errorf("answer without Content-Length (HTTP %d)", code)
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	_, err = io.ReadFull(c.r, c.body)
	return code, c.body, err
}

// httpRow serves the ingest API over a fresh log (no topology: the row measures
// PERSISTED answers) and posts single events from o.Clients clients, or NDJSON
// batches from o.BatchClients clients.
func httpRow(ctx context.Context, o IngestOptions, batch bool) (Row, error) {
	return serveRow(ctx, o, batch, nil)
}

// serveRow is httpRow on the Pebble log (jl nil) or on a JetStream log (jl; then
// without metrics, which count the Pebble log's group commits).
func serveRow(ctx context.Context, o IngestOptions, batch bool, jl *jslog.Log) (Row, error) {
	name := "single"
	if batch {
		name = "batch"
	}
	dir := filepath.Join(o.Dir, "log-"+name)
	defer os.RemoveAll(dir)
	var (
		im  *ingestmetrics.Metrics
		err error
		l   *eventlog.Log
		il  ingest.Log = jl
	)
	if jl != nil {
		o.Metrics = false
	}
	reg := prometheus.NewRegistry()
	lo := eventlog.Options{Dir: dir}
	if o.Metrics {
		if im, err = ingestmetrics.New(reg); err != nil {
			return Row{}, err
		}
		lo.OnCommit = im.OnCommit
	}
	if jl == nil {
		if l, err = eventlog.Open(lo); err != nil {
			return Row{}, err
		}
		defer l.Close()
		il = l
	}
	svc, err := ingest.New(ingest.Config{Log: il, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return Row{}, err
	}
	defer svc.Close()
	if o.Metrics {
		if err := im.Register(svc, l); err != nil {
			return Row{}, err
		}
		scrapes := time.NewTicker(time.Second)
		done := make(chan struct{})
		var scraper sync.WaitGroup
		scraper.Add(1)
		go func() {
			defer scraper.Done()
			for {
				select {
				case <-done:
					return
				case <-scrapes.C:
					_, _ = reg.Gather()
				}
			}
		}()
		defer func() { scrapes.Stop(); close(done); scraper.Wait() }()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Row{}, err
	}
	var h http.Handler
	auth := ""
	if o.Auth {
		// A token file as an operator writes it: the digest, a scope.
		secret := fmt.Sprintf("bench-%d-0123456789abcdef", time.Now().UnixNano())
		d := sha256.Sum256([]byte(secret))
		tokens := filepath.Join(o.Dir, "tokens-"+name)
		if err := os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(d[:])+" write:*\n"), 0o600); err != nil {
			return Row{}, err
		}
		defer os.Remove(tokens)
		g, err := access.New(access.Options{TokensFile: tokens})
		if err != nil {
			return Row{}, err
		}
		g.AllowHosts([]string{ln.Addr().String()})
		h = g.Wrap(svc.Handler(ingest.HTTPOptions{Admit: g.Admit}))
		auth = "Authorization: Bearer " + secret + "\r\n"
	} else {
		h = svc.Handler(ingest.HTTPOptions{})
	}
	if o.Metrics {
		h = im.Wrap(h)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	clients := o.Clients
	per := 1
	row := Row{Name: fmt.Sprintf("HTTP: one event per request, ack=persisted, %d clients", clients)}
	if batch {
		clients, per = o.BatchClients, o.BatchSize
		row.Name = fmt.Sprintf("HTTP: NDJSON batches of %d, ack=persisted, %d clients", per, clients)
		url += "/v1/events:batch?ack=persisted"
	} else {
		url += "/v1/events?ack=persisted"
	}
	if jl != nil {
		row.Name = fmt.Sprintf("HTTP on the JetStream log R%d (%s): one event per request, ack=persisted, %d clients", jl.Replicas(), jl.Durability(), clients)
	}
	if o.Auth {
		row.Name += ", bearer token (write:*)"
	}
	if o.Metrics {
		row.Name += ", metrics"
	}
	path := url[strings.Index(url[len("http://"):], "/")+len("http://"):]
	hostport := ln.Addr().String()
	hists := make([]engine.Histogram, clients)
	var reqs, evs, errs atomic.Uint64
	var firstErr atomic.Pointer[string]
	fail := func(format string, a ...any) {
		errs.Add(1)
		s := fmt.Sprintf(format, a...)
		firstErr.CompareAndSwap(nil, &s)
	}
	stop := time.Now().Add(o.Duration)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", hostport)
			if err != nil {
				fail("dial: %v", err)
				return
			}
			defer conn.Close()
			cl := &rawClient{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
			var body, req []byte
			next := c
			for i := 0; ctx.Err() == nil && time.Now().Before(stop); i++ {
				body = body[:0]
				for j := range per {
					e := o.Events[next%len(o.Events)]
					next += clients
					body = eventJSON(body, e, fmt.Sprintf("bench-%s-%d-%d-%d", name, c, i, j))
					body = append(body, '\n')
				}
				req = append(req[:0], "POST "...)
				req = append(req, path...)
				req = append(req, " HTTP/1.1\r\nHost: "...)
				req = append(req, hostport...)
				req = append(req, "\r\n"...)
				req = append(req, auth...)
				req = append(req, "Content-Type: application/json\r\nContent-Length: "...)
				req = strconv.AppendInt(req, int64(len(body)), 10)
				req = append(req, "\r\n\r\n"...)
				req = append(req, body...)
				t0 := time.Now()
				code, answer, err := cl.do(req)
				if err != nil {
					fail("%v", err)
					return
				}
				hists[c].Record(int64(time.Since(t0)))
				reqs.Add(1)
				got := uint64(bytes.Count(answer, []byte(`"status":"PERSISTED"`)))
				evs.Add(got)
				if code != 200 || got != uint64(per) {
					fail("HTTP %d: %.200s", code, answer)
				}
			}
		}()
	}
	wg.Wait()
	row.Elapsed = time.Since(start)
	row.Requests, row.Events, row.Errors = reqs.Load(), evs.Load(), errs.Load()
	row.Latency = merge(hists)
	if l != nil {
		row.Log = l.Stats()
	}
	if o.Metrics {
		// Every handler has returned, so has counted its request.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := srv.Shutdown(sctx)
		cancel()
		if err != nil {
			return row, err
		}
		mfs, err := reg.Gather()
		if err != nil {
			return row, err
		}
		for _, mf := range mfs {
			if mf.GetName() == "gale_http_requests_total" {
				for _, m := range mf.GetMetric() {
					row.Counted += uint64(m.GetCounter().GetValue())
				}
			}
		}
	}
	if p := firstErr.Load(); p != nil {
		return row, fmt.Errorf("bench: %s: %d bad answers, the first: %s", row.Name, row.Errors, *p)
	}
	return row, ctx.Err()
}
