package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/flow"
)

// Assignment says which tasks an engine hosts, as Storm's assignment of tasks to a
// worker. Hosts are numbered from 1. Of maps every task id (TaskIDs: spouts, bolts
// and ackers) to its host; a nil Of puts every task on Host (local mode). Every
// engine of a topology is given the same Of and its own Host.
type Assignment struct {
	Host int
	Of   map[int]int
}

func (a Assignment) host() int {
	if a.Of == nil {
		return max(a.Host, 1) // local mode: the zero Assignment
	}
	return a.Host
}

func (a Assignment) of(task int) int {
	if a.Of == nil {
		return a.host()
	}
	return a.Of[task]
}

// check reports what is wrong with an assignment for a topology of tasks tasks:
// this engine's host below 1, a task without a host (or with one below 1), a task
// the topology does not have.
func (a Assignment) check(tasks int) error {
	if a.Of == nil {
		return nil
	}
	if a.Host < 1 {
		return fmt.Errorf("%w: assignment for host %d: hosts are numbered from 1", topology.ErrConfig, a.Host)
	}
	for t := 1; t <= tasks; t++ {
		if a.Of[t] < 1 {
			return fmt.Errorf("%w: assignment gives task %d no host (every task 1..%d needs one, from 1)", topology.ErrConfig, t, tasks)
		}
	}
	var unknown []int
	for t := range a.Of {
		if t < 1 || t > tasks {
			unknown = append(unknown, t)
		}
	}
	if unknown != nil {
		slices.Sort(unknown)
		ids := make([]string, len(unknown))
		for i, t := range unknown {
			ids[i] = strconv.Itoa(t)
		}
		what := "task " + ids[0]
		if len(ids) > 1 {
			what = "tasks " + strings.Join(ids, ", ")
		}
		return fmt.Errorf("%w: assignment names %s, which the topology does not have (its tasks are 1..%d)", topology.ErrConfig, what, tasks)
	}
	return nil
}

// Spread deals a topology's tasks over n hosts: each component's tasks (and the
// ackers) in turn, continuing where the previous component stopped, so every host
// gets a share of every component where the parallelism allows it. n must be at
// least 1.
func Spread(topo *topology.Topology, cfg topology.Config, n int) ([]Assignment, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: spread over %d hosts: at least 1 is needed", topology.ErrConfig, n)
	}
	byComp, ackers := TaskIDs(topo, cfg)
	of := map[int]int{}
	h := 0
	deal := func(tasks []int) {
		for _, t := range tasks {
			of[t] = h%n + 1
			h++
		}
	}
	for _, c := range topo.Components {
		deal(byComp[c.ID])
	}
	deal(ackers)
	out := make([]Assignment, n)
	for i := range out {
		out[i] = Assignment{Host: i + 1, Of: of}
	}
	return out, nil
}

// hosts reports whether this engine hosts task.
func (r *Runtime) hosts(task int) bool { return r.assign.of(task) == r.assign.host() }

// peers lists the other hosts of the topology.
func (r *Runtime) peers() []int {
	if r.assign.Of == nil {
		return nil
	}
	seen := map[int]bool{r.assign.host(): true}
	var out []int
	for _, h := range r.assign.Of {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// Host-level control operations (transport.KindControl's Op).
const (
	opAck        uint8 = iota + 1 // a request was applied (ID names it)
	opStop                        // begin a graceful stop (Storm's deactivate, then kill)
	opExpire                      // the stop's deadline passed: abandon the trees left
	opStats                       // send this host's Stats
	opStatsReply                  // Body: a host's Stats (JSON)
	opEnded                       // Body: roots whose trees failed or timed out
	opHeld                        // Body: a lineage holder report (JSON)
	opHello                       // this host is up (answered once the receiver is up too); Body: its lineage sample bound if it hosts a spout
	opBye                         // this host is leaving: wait for nothing from it
	opLineage                     // Body: lineage records of trees rooted on the receiver (JSON linBatch)
	opTrees                       // send this host's lineage answer to a query (JSON treeQuery)
	opTreesReply                  // Body: a host's answer (JSON treeAnswer)
)

// hostState is the host endpoint: ends and requests re-sent until acknowledged, and
// replies awaited.
type hostState struct {
	inbox transport.Inbox
	mu    sync.Mutex
	// ends: (task, host) pairs, a task's end of every edge to that host.
	ends     *flow.Resender[endKey]
	requests *flow.Resender[uint64]
	pending  map[uint64]*transport.Message
	replies  map[uint64]awaited // asks' requests by id, until answered
	hellos   map[uint64]bool    // greetings not yet answered
	gone     map[int]bool       // hosts that said goodbye
	nextID   uint64
	heard    int64 // runtime clock of the last message received
	ctl      []*transport.Message
}

type endKey struct{ task, host int }

// awaited is an ask's request to a host: its answer goes to ch, as does a goodbye
// from that host (Op opBye), which no answer will follow.
type awaited struct {
	host int
	ch   chan *transport.Message
}

// resendEvery is how often ends, requests and probes are re-sent.
func (r *Runtime) resendEvery() time.Duration {
	if r.cfg.FlushInterval > 0 {
		return r.cfg.FlushInterval
	}
	return 10 * time.Millisecond
}

func (h *hostState) init(every time.Duration) {
	h.ends = flow.NewResender[endKey](int64(every))
	h.requests = flow.NewResender[uint64](int64(every))
	h.pending = map[uint64]*transport.Message{}
	h.replies = map[uint64]awaited{}
	h.hellos = map[uint64]bool{}
}

// greet tells every other host that this one is up, re-sent until each answers;
// ready closes when all have (at once without other hosts).
func (r *Runtime) greet() {
	peers := r.peers()
	if len(peers) == 0 {
		close(r.ready)
		return
	}
	r.requestAll(peers, opHello, r.greeting())
}

// endEdges ends every edge of an exited task to the hosts given: one end per host,
// re-sent until that host acknowledges it.
func (r *Runtime) endEdges(ep *endpoint, hosts map[int]bool) {
	now := r.nanotime()
	r.host.mu.Lock()
	for h := range hosts {
		if r.host.gone[h] {
			delete(hosts, h) // it said goodbye: nobody there waits for this end
			continue
		}
		r.host.ends.Sent(now, endKey{ep.task, h})
	}
	r.host.mu.Unlock()
	for h := range hosts {
		r.send(&transport.Message{Kind: transport.KindEnd, From: ep.task, To: transport.Host(h)})
	}
}

// request sends a control request to host h, re-sent until acknowledged.
func (r *Runtime) request(h int, op uint8, body []byte) { r.requestAll([]int{h}, op, body) }

// requestAll sends a control request to each host, re-sent until acknowledged. Every
// request is recorded before the first is sent: an answer may come at once, and the
// greetings must all be counted before one answer can find none left waiting (ready
// was closed at the first answer, then again at the next: a panic).
func (r *Runtime) requestAll(hosts []int, op uint8, body []byte) {
	now := r.nanotime()
	out := make([]*transport.Message, 0, len(hosts))
	r.host.mu.Lock()
	for _, h := range hosts {
		r.host.nextID++
		id := r.host.nextID
		m := &transport.Message{Kind: transport.KindControl, From: transport.Host(r.assign.host()), To: transport.Host(h), Op: op, ID: id, Body: body}
		r.host.pending[id] = m
		if op == opHello {
			r.host.hellos[id] = true
		}
		r.host.requests.Sent(now, id)
		out = append(out, copyMsg(m))
	}
	r.host.mu.Unlock()
	for _, m := range out {
		r.send(m)
	}
}

// copyMsg copies a message kept for re-sending: a sent message belongs to the
// transport.
func copyMsg(m *transport.Message) *transport.Message {
	c := *m
	return &c
}

// beginStop stops NextTuple calls (Storm's deactivate) here and, when asked, on
// every other host.
func (r *Runtime) beginStop(broadcast bool) {
	r.stopping.Store(true)
	r.stopOnce.Do(func() { close(r.stopCh) })
	if broadcast {
		for _, h := range r.peers() {
			r.request(h, opStop, nil)
		}
	}
}

// expireDrain marks the stop's deadline as passed here and, when asked, on every
// other host; a host told by a peer cuts blocked sends after the same grace as Stop.
func (r *Runtime) expireDrain(broadcast bool) {
	first := false
	r.drainOnce.Do(func() { close(r.drainExpired); first = true })
	if broadcast {
		for _, h := range r.peers() {
			r.request(h, opExpire, nil)
		}
	} else if first {
		r.stopping.Store(true)
		r.stopOnce.Do(func() { close(r.stopCh) })
		// time.AfterFunc on the engine's clock: the goroutine ends with the hard stop,
		// which the runtime always reaches before Done.
		t := r.clock.NewTimer(stopGrace)
		go func() {
			defer t.Stop()
			select {
			case <-t.C():
				r.hardCancel()
			case <-r.hard.Done():
			}
		}()
	}
}

// runHost serves the host endpoint: ends and their acknowledgements, requests from
// other hosts, and re-sends. It returns once every hosted task has exited and its
// ends are acknowledged (at once after a hard stop), lingering while other hosts
// still talk to it, so that an acknowledgement they lost is sent again.
func (r *Runtime) runHost(tasksDone <-chan struct{}) {
	every := r.resendEvery()
	t := r.clock.NewTicker(every)
	defer t.Stop()
	// The last lineage records of trees rooted elsewhere go before the goodbye:
	// after it the spout's host may be gone.
	defer func() { r.flushForward(); r.sayBye() }()
	finished := false
	for {
		select {
		case <-r.host.inbox.Signal():
			r.hostPoll()
		case <-t.C():
			r.hostResend()
		case <-tasksDone:
			tasksDone, finished = nil, true
		case <-r.hard.Done():
			if finished {
				return
			}
		}
		if finished {
			if r.hard.Err() != nil {
				return
			}
			// Requests (stop, its deadline) are not waited for: a host that has
			// finished needs neither, and may be gone already.
			r.host.mu.Lock()
			out := r.host.ends.Outstanding()
			quiet := r.nanotime()-r.host.heard >= lingerIntervals*int64(every)
			r.host.mu.Unlock()
			if out == 0 && (len(r.peers()) == 0 || quiet) {
				return
			}
		}
	}
}

// lingerIntervals is how many resend intervals a finished host must hear nothing
// before it leaves: a peer whose end it acknowledged, the acknowledgement lost,
// sends the end again within one interval, so leaving early takes this many losses
// in a row. Its goodbye then tells the peers to stop waiting for it anyway.
const lingerIntervals = 10

// byeCopies is how many copies of its goodbye a leaving host sends each peer: it
// cannot wait for an answer, so each copy is one more chance against loss.
const byeCopies = 3

// sayBye tells every other host that this one is leaving, so that none waits for it
// to acknowledge an end or a request, or to answer for stats.
func (r *Runtime) sayBye() {
	for _, h := range r.peers() {
		for range byeCopies {
			r.send(&transport.Message{Kind: transport.KindControl, From: transport.Host(r.assign.host()), To: transport.Host(h), Op: opBye})
		}
	}
}

// peerLeft forgets what this host waits for from host h, which has finished: its
// ends to h (h could finish only after every end it needed), its requests to h, the
// answers asks wait for from h (each is told h left), and marks h gone for
// ClusterStats.
func (r *Runtime) peerLeft(h int) {
	r.host.mu.Lock()
	defer r.host.mu.Unlock()
	if r.host.gone == nil {
		r.host.gone = map[int]bool{}
	}
	r.host.gone[h] = true
	for t := range r.endpoints {
		r.host.ends.Acked(endKey{t, h})
	}
	for id, w := range r.host.replies {
		if w.host == h {
			delete(r.host.replies, id)
			w.ch <- &transport.Message{Kind: transport.KindControl, From: transport.Host(h), Op: opBye, ID: id} // buffered: each id is answered once
		}
	}
	for id, m := range r.host.pending {
		if m.To == transport.Host(h) {
			r.host.requests.Acked(id)
			delete(r.host.pending, id)
			if r.host.hellos[id] {
				delete(r.host.hellos, id) // a peer that left before this host greeted it
				if len(r.host.hellos) == 0 {
					close(r.ready)
				}
			}
		}
	}
}

func (r *Runtime) hostResend() {
	now := r.nanotime()
	var ends []endKey
	var ids []uint64
	var msgs []*transport.Message
	r.host.mu.Lock()
	ends = r.host.ends.Due(now, ends)
	ids = r.host.requests.Due(now, ids)
	for _, id := range ids {
		msgs = append(msgs, copyMsg(r.host.pending[id]))
	}
	r.host.mu.Unlock()
	for _, k := range ends {
		r.send(&transport.Message{Kind: transport.KindEnd, From: k.task, To: transport.Host(k.host)})
	}
	for _, m := range msgs {
		r.send(m)
	}
}

// hostPoll handles the messages waiting at the host endpoint.
func (r *Runtime) hostPoll() {
	h := &r.host
	h.ctl = h.inbox.TakeControl(h.ctl[:0])
	if len(h.ctl) == 0 {
		return
	}
	h.mu.Lock()
	h.heard = r.nanotime()
	h.mu.Unlock()
	self := transport.Host(r.assign.host())
	for i, m := range h.ctl {
		h.ctl[i] = nil
		switch m.Kind {
		case transport.KindEnd:
			r.edgesEnded(m.From)
			r.send(&transport.Message{Kind: transport.KindEndAck, From: self, To: transport.Host(r.assign.of(m.From)), ID: uint64(m.From)})
		case transport.KindEndAck:
			h.mu.Lock()
			h.ends.Acked(endKey{int(m.ID), -m.From})
			h.mu.Unlock()
		case transport.KindControl:
			r.hostControl(self, m)
		default:
			r.countStray(m)
		}
	}
}

// edgesEnded records that task has ended its edges (host loop only). Ends are
// counted per consuming component, not per edge: a component's tasks all have the
// same producers, so its input ends when as many producer tasks have ended as feed
// it, and an acker's when every spout and bolt task has. So a stop costs one step
// per producer and consuming component, whatever the parallelism.
func (r *Runtime) edgesEnded(task int) {
	c := r.componentOf(task)
	if c == nil || r.endedTask[task] {
		return // an acker feeds no task through edges; or a re-sent end
	}
	r.endedTask[task] = true
	for _, cons := range r.consumerComps[c.ID] {
		if r.endedOf[cons]++; r.endedOf[cons] == r.producerTasks[cons] {
			for _, t := range r.tasksOf[cons] {
				if ep := r.endpoints[t]; ep != nil {
					ep.inputEnded()
				}
			}
		}
	}
	if r.endedAll++; r.endedAll == r.numTasks {
		for _, a := range r.ackers {
			a.ep.inputEnded()
		}
	}
}

func (r *Runtime) hostControl(self int, m *transport.Message) {
	h := &r.host
	ack := func() {
		r.send(&transport.Message{Kind: transport.KindControl, From: self, To: m.From, Op: opAck, ID: m.ID})
	}
	switch m.Op {
	case opAck:
		h.mu.Lock()
		h.requests.Acked(m.ID)
		delete(h.pending, m.ID)
		if h.hellos[m.ID] {
			delete(h.hellos, m.ID)
			if len(h.hellos) == 0 {
				close(r.ready)
			}
		}
		h.mu.Unlock()
	case opHello:
		r.peerSampling(-m.From, m.Body)
		ack()
	case opBye:
		r.peerLeft(-m.From)
	case opStop:
		r.beginStop(false)
		ack()
	case opExpire:
		r.expireDrain(false)
		ack()
	case opStats:
		body, err := json.Marshal(r.Stats())
		if err != nil {
			r.countStray(m)
			return
		}
		r.send(&transport.Message{Kind: transport.KindControl, From: self, To: m.From, Op: opStatsReply, ID: m.ID, Body: body})
	case opTrees:
		body, err := r.answerTrees(m.Body)
		if err != nil {
			r.countStray(m)
			return
		}
		r.send(&transport.Message{Kind: transport.KindControl, From: self, To: m.From, Op: opTreesReply, ID: m.ID, Body: body})
	case opStatsReply, opTreesReply:
		h.mu.Lock()
		w, ok := h.replies[m.ID]
		delete(h.replies, m.ID)
		h.mu.Unlock()
		if ok {
			w.ch <- m // buffered for every host asked; each id is answered once
		}
	case opEnded:
		roots := make([]uint64, 0, len(m.Body)/8)
		for b := m.Body; len(b) >= 8; b = b[8:] {
			roots = append(roots, binary.LittleEndian.Uint64(b))
		}
		r.noteEnded(r.nanotime(), roots, -m.From)
	case opHeld:
		var rep heldReport
		if err := json.Unmarshal(m.Body, &rep); err != nil || r.lin == nil {
			return
		}
		r.lin.Hold(rep.Root, rep.Holder)
	case opLineage:
		r.applyForwarded(-m.From, m.Body)
	default:
		r.countStray(m)
	}
}

// heldReport is a lineage holder found on one host for a tree rooted on another.
type heldReport struct {
	Root   uint64
	Holder lineage.Holder
}

// ClusterStats returns the Stats of every host of the topology, asked for by
// message: this engine's own, merged with each other host's reply. A request is
// re-sent every resend interval until answered (it or its reply may be lost), until
// ctx ends; then it fails naming the hosts that did not answer.
func (r *Runtime) ClusterStats(ctx context.Context) (Stats, error) {
	s := r.Stats()
	replies, err := r.ask(ctx, r.peers(), opStats, nil, "their stats")
	// A reply that does not decode is left out and named; the others still count.
	for _, h := range slices.Sorted(maps.Keys(replies)) {
		var other Stats
		if err2 := json.Unmarshal(replies[h], &other); err2 != nil {
			err = errors.Join(err, fmt.Errorf("engine: stats of host %d: %w", h, err2))
			continue
		}
		s.Merge(&other)
	}
	return s, err
}

// ask sends a request to each of hosts and returns their replies by host. A request
// is re-sent every resend interval until answered (it or its reply may be lost),
// until the host says goodbye, ctx ends or this engine stops; the error then names
// the hosts that did not answer, and those that said goodbye (before they were asked
// or while awaited, and also when this engine had stopped before asking), for what
// ("their stats").
func (r *Runtime) ask(ctx context.Context, hosts []int, op uint8, body []byte, what string) (map[int][]byte, error) {
	var peers, gone []int
	replies := make(chan *transport.Message, len(hosts))
	asked := map[uint64]int{} // request id -> host
	// Each host is found gone or awaited under one lock: a goodbye handled after
	// that finds its request (peerLeft), so no ask waits for a host already gone.
	r.host.mu.Lock()
	for _, h := range hosts {
		if r.host.gone[h] {
			gone = append(gone, h)
			continue
		}
		peers = append(peers, h)
		r.host.nextID++
		asked[r.host.nextID] = h
		r.host.replies[r.host.nextID] = awaited{host: h, ch: replies}
	}
	r.host.mu.Unlock()
	defer func() {
		r.host.mu.Lock()
		for id := range asked {
			delete(r.host.replies, id)
		}
		r.host.mu.Unlock()
	}()
	errGone := func() error {
		if gone == nil {
			return nil
		}
		slices.Sort(gone)
		return fmt.Errorf("engine: hosts %v have finished (said goodbye): %s are not included", gone, what)
	}
	select {
	case <-r.done:
		if len(hosts) > 0 {
			// Its host endpoint no longer runs: no reply could be read. The hosts that
			// had said goodbye before are named as such: it knows why they are missing.
			return nil, errors.Join(fmt.Errorf("engine: this engine has stopped: hosts %v not asked for %s", hosts, what), errGone())
		}
	default:
	}
	out := map[int][]byte{}
	if len(peers) == 0 {
		return out, errGone()
	}
	send := func() {
		for id, h := range asked {
			r.send(&transport.Message{Kind: transport.KindControl, From: transport.Host(r.assign.host()), To: transport.Host(h), Op: op, ID: id, Body: body})
		}
	}
	send()
	t := r.clock.NewTicker(r.resendEvery())
	defer t.Stop()
	for len(asked) > 0 {
		select {
		case m := <-replies:
			h, ok := asked[m.ID]
			if !ok {
				continue // a duplicate reply
			}
			delete(asked, m.ID)
			if m.Op == opBye {
				gone = append(gone, h) // it left while awaited: no answer will come
				continue
			}
			out[h] = m.Body
		case <-t.C():
			send()
		case <-ctx.Done():
			return out, errors.Join(fmt.Errorf("engine: hosts %v did not send %s: %w", slices.Sorted(maps.Values(asked)), what, ctx.Err()), errGone())
		case <-r.done:
			return out, errors.Join(fmt.Errorf("engine: this engine stopped before hosts %v sent %s", slices.Sorted(maps.Values(asked)), what), errGone())
		}
	}
	return out, errGone()
}

// broadcastEnded tells the other hosts which trees failed or timed out, so that
// their tasks report the tuples they hold for them.
func (r *Runtime) broadcastEnded(roots []uint64) {
	peers := r.peers()
	if len(peers) == 0 {
		return
	}
	body := make([]byte, 0, 8*len(roots))
	for _, root := range roots {
		body = binary.LittleEndian.AppendUint64(body, root)
	}
	for _, h := range peers {
		r.send(&transport.Message{Kind: transport.KindControl, From: transport.Host(r.assign.host()), To: transport.Host(h), Op: opEnded, Body: slices.Clone(body)})
	}
}

// hold records a holder in the lineage of the host whose spout rooted the tree (the
// host that said it ended).
func (r *Runtime) hold(root uint64, hd lineage.Holder) {
	h := r.endedOn(root)
	if h == 0 || h == r.assign.host() {
		if r.lin != nil {
			r.lin.Hold(root, hd)
		}
		return
	}
	body, err := json.Marshal(heldReport{Root: root, Holder: hd})
	if err != nil {
		return
	}
	r.send(&transport.Message{Kind: transport.KindControl, From: transport.Host(r.assign.host()), To: transport.Host(h), Op: opHeld, Body: body})
}
