package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/transport"
)

// Lineage across hosts. A tree is kept by the recorder of the host whose spout rooted
// it: that host knows the message id, the outcome and when it started and ended. A
// bolt on another host records nothing there; it forwards what it sees of sampled
// trees (emits and acks) and every fail point to the hosts that run spouts, in
// batches every sweep (50 ms). A spout host that does not know the root drops what
// it is sent, so with spouts on several hosts each keeps the trees of its own.
//
// Every host must sample the same roots: a host without a spout samples with the
// bound its spouts' hosts sent in their greeting (the largest, if they differ), so
// the recorder configuration of the host running the spout (gale serve's
// --lineage-sample) decides for the whole topology.
//
// Forwarding is best effort, like the rest of lineage: a lost batch leaves tuples out
// of a tree (it never changes what the acker decides), and a host whose buffer is
// full drops records and counts them (Stats.LineageDropped).

// linForward is the batch of lineage records waiting to be sent to the spout hosts.
type linForward struct {
	to    []int // hosts with a spout task, this one left out
	local bool  // this host has a spout task: records are also applied here

	mu      sync.Mutex
	batch   linBatch
	n       int
	dropped uint64
}

// maxForward bounds the records waiting for the next sweep (about 2.5 MB; reasons
// are cut to lineage.MaxReasonBytes, so at most about 13 MB).
const maxForward = 10000

// forwardChunk bounds the records per message, and forwardBytes its body: a NATS
// server refuses a control message over its max_payload (1 MB by default) whole. A
// record takes about 250 bytes, but up to about 6 kB with a long reason (JSON writes
// '<' as 6 bytes), so a chunk over forwardBytes is sent in halves.
const (
	forwardChunk = 1000
	forwardBytes = 256 << 10
)

// linBatch is the body of an opLineage message.
type linBatch struct {
	Emits []linEmit `json:"e,omitempty"`
	Dones []linDone `json:"d,omitempty"`
	Fails []linFail `json:"f,omitempty"`
}

type linEmit struct {
	Root uint64       `json:"r"`
	Node lineage.Node `json:"n"`
}

type linDone struct {
	At     int64  `json:"a"`
	Root   uint64 `json:"r"`
	Node   uint64 `json:"n"`
	Task   int    `json:"t"`
	Failed bool   `json:"f,omitempty"`
	Reason string `json:"s,omitempty"`
}

type linFail struct {
	Root  uint64            `json:"r"`
	Point lineage.FailPoint `json:"p"`
}

// initLineageHosts decides, once the assignment is known, where this host's lineage
// records go, which roots it samples until spout hosts greet it, and what its own
// greeting says.
func (r *Runtime) initLineageHosts() {
	if r.lin == nil {
		return
	}
	self := r.assign.host()
	var to []int
	local := false
	for _, c := range r.topo.Components {
		if !c.IsSpout() {
			continue
		}
		for _, h := range r.hostsOf[c.ID] {
			switch {
			case h == self:
				local = true
			case !slices.Contains(to, h):
				to = append(to, h)
			}
		}
	}
	slices.Sort(to)
	r.fwd = &linForward{to: to, local: local}
	if local {
		r.sampleBelow.Store(r.lin.Threshold())
	}
}

// greeting is this host's hello body: its sample bound, if it runs a spout.
func (r *Runtime) greeting() []byte {
	if r.fwd == nil || !r.fwd.local {
		return nil
	}
	return binary.LittleEndian.AppendUint64(nil, r.lin.Threshold())
}

// peerSampling adopts the sample bound a spout host sent in its greeting, if larger.
func (r *Runtime) peerSampling(host int, body []byte) {
	if r.fwd == nil || len(body) != 8 || !slices.Contains(r.fwd.to, host) {
		return
	}
	v := binary.LittleEndian.Uint64(body)
	for {
		old := r.sampleBelow.Load()
		if v <= old || r.sampleBelow.CompareAndSwap(old, v) {
			return
		}
	}
}

// add queues a record for the spout hosts, or counts it dropped if the batch is full.
func (f *linForward) add(put func(b *linBatch)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n >= maxForward {
		f.dropped++
		return
	}
	f.n++
	put(&f.batch)
}

// linEmit records an emit in a sampled tree: here if this host runs a spout, and on
// the other spout hosts.
func (r *Runtime) linEmit(root uint64, n lineage.Node) {
	f := r.fwd
	if f.local {
		r.lin.Emit(root, n)
	}
	if len(f.to) > 0 {
		f.add(func(b *linBatch) { b.Emits = append(b.Emits, linEmit{root, n}) })
	}
}

// linDone records an ack or fail of a tuple of a sampled tree.
func (r *Runtime) linDone(d linDone) {
	f := r.fwd
	if f.local {
		r.lin.Done(d.At, d.Root, d.Node, d.Task, d.Failed, d.Reason)
	}
	if len(f.to) > 0 {
		d.Reason = lineage.ClipReason(d.Reason)
		f.add(func(b *linBatch) { b.Dones = append(b.Dones, d) })
	}
}

// linFail records an explicit fail of a tuple of any tree.
func (r *Runtime) linFail(root uint64, p lineage.FailPoint) {
	f := r.fwd
	if f.local {
		r.lin.Fail(root, p)
	}
	if len(f.to) > 0 {
		p.Reason = lineage.ClipReason(p.Reason)
		f.add(func(b *linBatch) { b.Fails = append(b.Fails, linFail{root, p}) })
	}
}

// flushForward sends the waiting records to every spout host (the sweeper).
func (r *Runtime) flushForward() {
	f := r.fwd
	if f == nil || len(f.to) == 0 {
		return
	}
	f.mu.Lock()
	b := f.batch
	f.batch, f.n = linBatch{}, 0
	f.mu.Unlock()
	for b.len() > 0 {
		var c linBatch
		c, b = b.split(forwardChunk)
		if !r.sendForward(f.to, c) {
			return
		}
	}
}

// sendForward sends c to the hosts to, in halves while its body is over
// forwardBytes; it reports false if c does not encode.
func (r *Runtime) sendForward(to []int, c linBatch) bool {
	body, err := json.Marshal(&c)
	if err != nil {
		r.log.Error("lineage: cannot encode forwarded records", "err", err)
		return false
	}
	if n := c.len(); len(body) > forwardBytes && n > 1 {
		head, rest := c.split(n / 2)
		return r.sendForward(to, head) && r.sendForward(to, rest)
	}
	self := transport.Host(r.assign.host())
	for _, h := range to {
		r.send(&transport.Message{Kind: transport.KindControl, From: self, To: transport.Host(h), Op: opLineage, Body: body})
	}
	return true
}

// len is the number of records in b.
func (b *linBatch) len() int { return len(b.Emits) + len(b.Dones) + len(b.Fails) }

// split cuts b after its first n records (emits, then acks, then fails).
func (b linBatch) split(n int) (head, rest linBatch) {
	head.Emits, rest.Emits = cut(b.Emits, n)
	head.Dones, rest.Dones = cut(b.Dones, n-len(head.Emits))
	head.Fails, rest.Fails = cut(b.Fails, n-len(head.Emits)-len(head.Dones))
	return head, rest
}

// cut splits s after at most n elements.
func cut[T any](s []T, n int) (head, rest []T) {
	n = max(0, min(n, len(s)))
	return s[:n], s[n:]
}

// lineageDropped is how many records the forward batch dropped.
func (r *Runtime) lineageDropped() uint64 {
	f := r.fwd
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// applyForwarded applies the records another host forwarded (host loop).
func (r *Runtime) applyForwarded(from int, body []byte) {
	if r.lin == nil {
		return
	}
	var b linBatch
	if err := json.Unmarshal(body, &b); err != nil {
		r.log.Error("lineage: a forwarded batch does not decode", "from_host", from, "err", err)
		return
	}
	for _, e := range b.Emits {
		r.lin.Emit(e.Root, e.Node)
	}
	for _, d := range b.Dones {
		r.lin.Done(d.At, d.Root, d.Node, d.Task, d.Failed, d.Reason)
	}
	for _, f := range b.Fails {
		r.lin.Fail(f.Root, f.Point)
	}
}

// treeQuery is the body of an opTrees request: one tree by id, or the recent trees
// of an outcome.
type treeQuery struct {
	ID      string          `json:"id,omitempty"`
	Outcome lineage.Outcome `json:"outcome,omitempty"`
	Limit   int             `json:"limit,omitempty"`
}

// treeAnswer is a host's reply to a treeQuery.
type treeAnswer struct {
	Trees    []lineage.Tree `json:"trees,omitempty"`
	Attempts []uint64       `json:"attempts,omitempty"` // of the tree found by id
}

// answerTrees answers a treeQuery from this host's recorder.
func (r *Runtime) answerTrees(body []byte) ([]byte, error) {
	var q treeQuery
	if err := json.Unmarshal(body, &q); err != nil {
		return nil, err
	}
	a := r.localTrees(q)
	return json.Marshal(a)
}

func (r *Runtime) localTrees(q treeQuery) treeAnswer {
	var a treeAnswer
	if r.lin == nil {
		return a
	}
	if q.ID != "" {
		if t, ok := r.lin.Lookup(q.ID); ok && t.Spout != "" {
			a.Trees = []lineage.Tree{t}
			if t.MsgID != "" {
				a.Attempts = r.lin.Attempts(t.MsgID)
			}
		}
		return a
	}
	a.Trees = r.lin.Recent(q.Outcome, q.Limit)
	return a
}

// spoutPeers are the other hosts that run a spout task: those that keep trees.
func (r *Runtime) spoutPeers() []int {
	if r.fwd == nil {
		return nil
	}
	return r.fwd.to
}

// ClusterTrees returns up to limit trees of outcome o (lineage.Failed, TimedOut, or
// "" for the sampled ones), newest first, from this engine's recorder and those of
// every other host that runs a spout (the hosts that keep trees), asked for by
// message as ClusterStats. The error names the hosts that did not answer; what the
// others answered is returned with it. Without WithLineage, or with a limit below 1,
// it returns nothing.
func (r *Runtime) ClusterTrees(ctx context.Context, o lineage.Outcome, limit int) ([]lineage.Tree, error) {
	if r.lin == nil || limit < 1 {
		return nil, nil
	}
	q := treeQuery{Outcome: o, Limit: limit}
	out := r.localTrees(q).Trees
	body, err := json.Marshal(q)
	if err != nil {
		return out, err
	}
	replies, err := r.ask(ctx, r.spoutPeers(), opTrees, body, "their lineage")
	answers, err2 := decodeAnswers(replies)
	err = errors.Join(err, err2)
	for _, a := range answers {
		out = append(out, a.Trees...)
	}
	slices.SortStableFunc(out, func(a, b lineage.Tree) int { return cmp.Compare(newest(b), newest(a)) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// decodeAnswers decodes the hosts' answers, in host order; one that does not decode
// is left out and named in the error.
func decodeAnswers(replies map[int][]byte) ([]treeAnswer, error) {
	var out []treeAnswer
	var errs []error
	for _, h := range slices.Sorted(maps.Keys(replies)) {
		var a treeAnswer
		if err := json.Unmarshal(replies[h], &a); err != nil {
			errs = append(errs, fmt.Errorf("engine: lineage of host %d: %w", h, err))
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// newest is a tree's latest known time.
func newest(t lineage.Tree) int64 { return max(t.StartedAt, t.EndedAt) }

// ClusterTree finds a tree by root id (16 hex digits) or message id (its newest
// attempt), here or on any other host that runs a spout, with the roots of every
// attempt of its message, oldest first. ok is false if no host keeps it; the error
// names the hosts that did not answer.
func (r *Runtime) ClusterTree(ctx context.Context, id string) (t lineage.Tree, attempts []uint64, ok bool, err error) {
	if r.lin == nil {
		return t, nil, false, nil
	}
	q := treeQuery{ID: id}
	best := r.localTrees(q)
	if len(best.Trees) == 0 || len(r.spoutPeers()) > 0 {
		body, err2 := json.Marshal(q)
		if err2 != nil {
			return t, nil, false, err2
		}
		replies, err1 := r.ask(ctx, r.spoutPeers(), opTrees, body, "their lineage")
		answers, err2 := decodeAnswers(replies)
		err = errors.Join(err1, err2)
		for _, a := range answers {
			// A message id replayed on another host: the newest attempt wins.
			if len(a.Trees) > 0 && (len(best.Trees) == 0 || a.Trees[0].StartedAt > best.Trees[0].StartedAt) {
				best = a
			}
		}
	}
	if len(best.Trees) == 0 {
		return t, nil, false, err
	}
	return best.Trees[0], best.Attempts, true, err
}
