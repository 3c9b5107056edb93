package lineage

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
)

// Outcome of a tree.
type Outcome string

// Tree outcomes.
const (
	Pending   Outcome = "pending"   // still in flight (or its end was not seen)
	Completed Outcome = "completed" // every tuple acked: the spout got Ack
	Failed    Outcome = "failed"    // a tuple failed: the spout got Fail
	TimedOut  Outcome = "timed_out" // the message timeout passed: the spout got Fail
)

// Node states.
const (
	NodePending = "pending"
	NodeAcked   = "acked"
	NodeFailed  = "failed"
)

// Config bounds what a Recorder keeps.
type Config struct {
	// Sample is the fraction of roots whose whole tree is recorded, in [0, 1].
	// Default (DefaultConfig) 0.01. Failed and timed-out trees are kept whatever it is.
	Sample float64
	// MaxTrees bounds the sampled trees kept, and separately the failed and timed-out
	// ones: the oldest are dropped first. Default 500 each.
	MaxTrees int
	// MaxNodes bounds the tuples recorded per tree; further ones are counted as
	// truncated. Default 200.
	MaxNodes int
}

// DefaultConfig samples 1% of roots and keeps 500 sampled and 500 failed or timed-out
// trees of at most 200 tuples each. A recorded tuple takes about 250 bytes, so the
// worst case (every kept tree full) is about 2 × 500 × 200 × 250 B = 50 MB; trees of
// word count's size (a line and its words) take a few MB in all. Message ids are kept
// to MaxIDBytes and reasons to MaxReasonBytes.
func DefaultConfig() Config { return Config{Sample: 0.01, MaxTrees: 500, MaxNodes: 200} }

// Bounds on the strings kept per tree: longer ones are cut, marked with "…".
const (
	MaxIDBytes     = 256
	MaxReasonBytes = 1024
)

// clip cuts s to n bytes (on a rune boundary) and marks the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

// ClipReason cuts a reason as the recorder keeps it (MaxReasonBytes, marked): for a
// caller that sends reasons on to a recorder elsewhere.
func ClipReason(s string) string { return clip(s, MaxReasonBytes) }

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case !(c.Sample >= 0 && c.Sample <= 1):
		return fmt.Errorf("lineage: Sample = %v, must be in [0, 1]", c.Sample)
	case c.MaxTrees < 1:
		return fmt.Errorf("lineage: MaxTrees = %d, must be >= 1", c.MaxTrees)
	case c.MaxNodes < 1:
		return fmt.Errorf("lineage: MaxNodes = %d, must be >= 1", c.MaxNodes)
	}
	return nil
}

// Node is one tuple of a recorded tree: emitted by Component/Task to ToComponent/ToTask,
// anchored to Parents (node ids; none for a spout tuple). Times are Unix nanoseconds.
type Node struct {
	ID          uint64
	Parents     []uint64
	Component   string
	Task        int
	Stream      string
	ToComponent string
	ToTask      int
	EmittedAt   int64
	State       string // NodePending, NodeAcked or NodeFailed
	DoneByTask  int
	DoneAt      int64
	Reason      string
}

// Holder is a tuple of a tree that a task received and had neither acked nor failed
// when the tree ended: where a stuck tree is stuck.
type Holder struct {
	Node        uint64 // the tuple's id (its node in a sampled tree); one entry per tuple
	Component   string // the task holding it
	Task        int
	Since       int64 // when that task began executing it
	SourceComp  string
	SourceTask  int
	Stream      string
	FoundAt     int64
	FromLineage bool // derived from the recorded nodes, not from a task's held list
}

// FailPoint is where an explicit fail happened.
type FailPoint struct {
	Node       uint64 // 0 when the tree was not sampled
	Component  string
	Task       int
	SourceComp string
	SourceTask int
	Stream     string
	At         int64
	Reason     string
}

// Tree is what is known of one tuple tree.
type Tree struct {
	Root      uint64
	MsgID     string
	Spout     string
	SpoutTask int
	Sampled   bool
	Outcome   Outcome
	Reason    string
	StartedAt int64
	EndedAt   int64
	Nodes     []Node // sampled trees only, in emit order
	Truncated int    // nodes not recorded (MaxNodes)
	Fails     []FailPoint
	Holders   []Holder
}

type tree struct {
	Tree
	inFails   bool // counted in the failures FIFO
	inSampled bool // counted in the sampled FIFO
}

// Stats count what the recorder kept and dropped.
type Stats struct {
	Sampled, Failures int    // trees kept now
	Evicted           uint64 // trees dropped to stay within MaxTrees
	Truncated         uint64 // nodes not recorded (MaxNodes)
}

// Recorder keeps the lineage of sampled trees and of every failed or timed-out tree,
// within Config's bounds. It is a passive store: callers pass every time in (Unix
// nanoseconds) and it reads no clock and starts no goroutine. Safe for concurrent use.
type Recorder struct {
	cfg       Config
	threshold uint64

	mu       sync.Mutex
	trees    map[uint64]*tree
	byMsg    map[string][]uint64 // msg id -> roots, oldest first (replays get new roots)
	sampled  []uint64            // FIFO of sampled roots
	failures []uint64            // FIFO of failed and timed-out roots
	// Fail points of unsampled trees whose end the spout has not reported yet, kept
	// apart (at most MaxTrees, oldest dropped) so that fails of trees long gone never
	// push ended trees out of the failures FIFO.
	early      map[uint64][]FailPoint
	earlyOrder []uint64
	stats      Stats
}

// New returns a Recorder; cfg must be valid (see Validate).
func New(cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Recorder{cfg: cfg, trees: map[uint64]*tree{}, byMsg: map[string][]uint64{}, early: map[uint64][]FailPoint{}}
	switch {
	case cfg.Sample >= 1:
		r.threshold = math.MaxUint64
	case cfg.Sample > 0:
		r.threshold = uint64(cfg.Sample * (1 << 64))
	}
	return r, nil
}

// Sampled reports whether root's whole tree is recorded. Root ids are uniform random,
// so comparing with a threshold samples the configured fraction with no shared state:
// every task decides the same way for the same root.
func (r *Recorder) Sampled(root uint64) bool { return root != 0 && root < r.threshold }

// Threshold is the bound Sampled compares with (for callers that inline the test).
func (r *Recorder) Threshold() uint64 { return r.threshold }

// Config returns the recorder's configuration.
func (r *Recorder) Config() Config { return r.cfg }

// Start records a sampled root emitted by a spout task, with its first tuples.
func (r *Recorder) Start(at int64, root uint64, msgID, spout string, task int, nodes []Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.getLocked(root, true, false)
	t.Spout, t.SpoutTask, t.StartedAt, t.Sampled = spout, task, at, true
	r.setMsgLocked(t, msgID)
	for _, n := range nodes {
		r.addNodeLocked(t, n)
	}
}

// Emit records a tuple of a sampled tree.
func (r *Recorder) Emit(root uint64, n Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.trees[root]; t != nil {
		r.addNodeLocked(t, n)
	}
}

// Done records the ack or fail of a tuple of a sampled tree. Across processes the
// ack may be heard before the emit (each comes from the host that saw it): the node
// is then added with what is known, and the emit fills in the rest.
func (r *Recorder) Done(at int64, root, node uint64, task int, failed bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.trees[root]
	if t == nil {
		return
	}
	i := t.find(node)
	if i < 0 {
		if len(t.Nodes) >= r.cfg.MaxNodes {
			// Its emit is (or will be) the one counted as truncated: an ack of a
			// tuple not recorded counts nothing.
			return
		}
		r.addNodeLocked(t, Node{ID: node})
		i = len(t.Nodes) - 1
	}
	n := &t.Nodes[i]
	n.State, n.DoneByTask, n.DoneAt, n.Reason = NodeAcked, task, at, clip(reason, MaxReasonBytes)
	if failed {
		n.State = NodeFailed
	}
	if t.Outcome == TimedOut && at <= t.EndedAt {
		// Heard after the timeout (forwarded from another host), done before it: the
		// guess that it was held, made at the end, was wrong.
		t.Holders = slices.DeleteFunc(t.Holders, func(h Holder) bool { return h.FromLineage && h.Node == node })
	}
}

// Fail records an explicit fail of a tuple of any tree, sampled or not.
func (r *Recorder) Fail(root uint64, p FailPoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.Reason = clip(p.Reason, MaxReasonBytes)
	if t := r.trees[root]; t != nil {
		addFail(&t.Tree, p)
		return
	}
	// The spout's End usually follows: keep the point until then.
	if _, ok := r.early[root]; !ok {
		r.earlyOrder = append(r.earlyOrder, root)
		for len(r.earlyOrder) > r.cfg.MaxTrees {
			delete(r.early, r.earlyOrder[0])
			r.earlyOrder = r.earlyOrder[1:]
		}
		if cap(r.earlyOrder) > 4*r.cfg.MaxTrees {
			r.earlyOrder = append([]uint64(nil), r.earlyOrder...)
		}
	}
	if fs := r.early[root]; len(fs) < maxFails {
		r.early[root] = append(fs, p)
	}
}

const maxFails = 16 // fail points kept per tree

func addFail(t *Tree, p FailPoint) {
	if len(t.Fails) < maxFails {
		t.Fails = append(t.Fails, p)
	}
	if t.Outcome == Pending && t.Reason == "" {
		t.Reason = p.Reason
	}
}

// End records how a tree ended, as the spout saw it. A completed tree is kept only if
// sampled; a failed or timed-out one always.
func (r *Recorder) End(at int64, root uint64, msgID, spout string, task int, started int64, o Outcome, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.trees[root]
	if t == nil {
		if o == Completed {
			return
		}
		t = r.getLocked(root, false, true)
	}
	if o != Completed && !t.inFails {
		r.pushFailureLocked(t)
	}
	if fs, ok := r.early[root]; ok {
		delete(r.early, root) // its slot in earlyOrder is skipped when it comes up
		for _, p := range fs {
			addFail(&t.Tree, p)
		}
	}
	t.Spout, t.SpoutTask, t.StartedAt = spout, task, started
	t.Outcome, t.EndedAt = o, at
	if reason != "" {
		t.Reason = clip(reason, MaxReasonBytes)
	}
	r.setMsgLocked(t, msgID)
	if o == TimedOut {
		// For a sampled tree the recorded nodes already tell which tuples are stuck.
		for _, n := range t.Nodes {
			if n.State == NodePending {
				t.Holders = append(t.Holders, Holder{Node: n.ID, Component: n.ToComponent, Task: n.ToTask,
					Since: n.EmittedAt, SourceComp: n.Component, SourceTask: n.Task, Stream: n.Stream,
					FoundAt: at, FromLineage: true})
			}
		}
	}
}

// Hold records a tuple of an ended tree that a task still held when asked. A report
// for a tree no longer kept is dropped.
func (r *Recorder) Hold(root uint64, h Holder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.trees[root]
	if t == nil {
		return
	}
	for i, o := range t.Holders {
		if h.Node != 0 && o.Node == h.Node && !o.FromLineage {
			return // the same tuple reported again: the first report stands
		}
		if o == h {
			return
		}
		if h.Node != 0 && o.Node == h.Node {
			// The task's own report is better than the guess from the lineage: it
			// knows when execution began.
			t.Holders[i] = h
			return
		}
	}
	if len(t.Holders) < 64 {
		t.Holders = append(t.Holders, h)
	}
}

// getLocked returns root's tree, creating it in the sampled or failures FIFO.
func (r *Recorder) getLocked(root uint64, sampled, failure bool) *tree {
	t := r.trees[root]
	if t == nil {
		t = &tree{Tree: Tree{Root: root, Outcome: Pending}}
		r.trees[root] = t
		if sampled {
			t.inSampled = true
			r.sampled = append(r.sampled, root)
			r.stats.Sampled++
			r.trimLocked(&r.sampled, false)
		}
	}
	if failure && !t.inFails {
		r.pushFailureLocked(t)
	}
	return t
}

func (r *Recorder) pushFailureLocked(t *tree) {
	t.inFails = true
	r.failures = append(r.failures, t.Root)
	r.stats.Failures++
	r.trimLocked(&r.failures, true)
}

// trimLocked drops the oldest trees of a FIFO beyond MaxTrees. A sampled tree that
// failed lives on in the failures FIFO.
func (r *Recorder) trimLocked(q *[]uint64, failures bool) {
	for len(*q) > r.cfg.MaxTrees {
		root := (*q)[0]
		*q = (*q)[1:]
		t := r.trees[root]
		if t == nil {
			continue
		}
		if failures {
			r.stats.Failures--
			t.inFails = false
			if t.inSampled {
				continue
			}
		} else {
			r.stats.Sampled--
			t.inSampled = false
			if t.inFails {
				continue
			}
		}
		r.dropLocked(t)
	}
	if cap(*q) > 4*r.cfg.MaxTrees {
		*q = append([]uint64(nil), *q...) // let the dropped prefix be collected
	}
}

func (r *Recorder) dropLocked(t *tree) {
	delete(r.trees, t.Root)
	delete(r.early, t.Root)
	r.stats.Evicted++
	if t.MsgID != "" {
		roots := slices.DeleteFunc(r.byMsg[t.MsgID], func(x uint64) bool { return x == t.Root })
		if len(roots) == 0 {
			delete(r.byMsg, t.MsgID)
		} else {
			r.byMsg[t.MsgID] = roots
		}
	}
}

// setMsgLocked names a tree's message once: the first id given is the one indexed
// (a spout may change a message id it passed by pointer between emit and end).
func (r *Recorder) setMsgLocked(t *tree, msgID string) {
	if t.MsgID != "" || msgID == "" {
		return
	}
	t.MsgID = clip(msgID, MaxIDBytes)
	r.byMsg[t.MsgID] = append(r.byMsg[t.MsgID], t.Root)
}

// find returns the position of node id in t.Nodes, or -1. A linear search from the
// newest (at most MaxNodes): cheaper than a map per sampled tree, and a tuple is
// usually acked soon after it is emitted.
func (t *tree) find(id uint64) int {
	for i := len(t.Nodes) - 1; i >= 0; i-- {
		if t.Nodes[i].ID == id {
			return i
		}
	}
	return -1
}

// addNodeLocked adds an emitted tuple, or fills in one whose ack was heard first
// (its Component not known yet), or counts it truncated if the tree is full.
func (r *Recorder) addNodeLocked(t *tree, n Node) {
	if i := t.find(n.ID); i >= 0 {
		if o := &t.Nodes[i]; o.Component == "" {
			n.State, n.DoneByTask, n.DoneAt, n.Reason = o.State, o.DoneByTask, o.DoneAt, o.Reason
			n.Parents = slices.Clone(n.Parents)
			*o = n
		}
		return
	}
	if len(t.Nodes) >= r.cfg.MaxNodes {
		t.Truncated++
		r.stats.Truncated++
		return
	}
	if n.State == "" {
		n.State = NodePending
	}
	n.Parents = slices.Clone(n.Parents)
	t.Nodes = append(t.Nodes, n)
}

// Lookup finds a tree by root id (16 hex digits) or by message id (the newest tree of
// that message: a replay roots a new tree). It returns a copy.
func (r *Recorder) Lookup(id string) (Tree, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if roots := r.byMsg[id]; len(roots) > 0 {
		if t := r.trees[roots[len(roots)-1]]; t != nil {
			return r.copyLocked(t), true
		}
	}
	if len(id) == 16 {
		if root, err := strconv.ParseUint(id, 16, 64); err == nil {
			if t := r.trees[root]; t != nil {
				return r.copyLocked(t), true
			}
		}
	}
	return Tree{}, false
}

// Attempts lists the roots recorded for a message id, oldest first.
func (r *Recorder) Attempts(msgID string) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byMsg[msgID])
}

func (r *Recorder) copyLocked(t *tree) Tree {
	c := t.Tree
	c.Nodes = slices.Clone(t.Nodes)
	// In emit order: a node whose ack came first (from another host) was added then.
	slices.SortStableFunc(c.Nodes, func(a, b Node) int { return cmp.Compare(a.EmittedAt, b.EmittedAt) })
	c.Fails = slices.Clone(t.Fails)
	c.Holders = slices.Clone(t.Holders)
	return c
}

// Recent returns up to limit trees, newest first: outcome Failed or TimedOut from the
// failures kept, or "" for the sampled trees. Nodes are left out.
func (r *Recorder) Recent(o Outcome, limit int) []Tree {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.sampled
	if o != "" {
		q = r.failures
	}
	var out []Tree
	for i := len(q) - 1; i >= 0 && len(out) < limit; i-- {
		t := r.trees[q[i]]
		if t == nil || (o != "" && t.Outcome != o) {
			continue
		}
		c := t.Tree
		c.Nodes, c.Fails, c.Holders = nil, nil, nil
		out = append(out, c)
	}
	return out
}

// Stats returns the counts of kept and dropped trees.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}
