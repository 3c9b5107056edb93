package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/clock"
	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/flow"
)

// Option changes how Start runs a topology.
type Option func(*Runtime)

// WithTransport runs the tasks over t instead of a new in-process transport. Several
// engines (one per Assignment) share one transport to run one topology.
func WithTransport(t transport.Transport) Option { return func(r *Runtime) { r.transport = t } }

// WithAssignment makes this engine host only the tasks a assigns to a.Host (Storm's
// assignment of tasks to a worker); the others are reached through the transport.
func WithAssignment(a Assignment) Option { return func(r *Runtime) { r.assign = a } }

// WithSerialization sends every message through the codec, even in one process
// (Storm's topology.testing.always.try.serialize), and checks every emitted value:
// a value that cannot cross a process boundary fails its emit (codec.ErrUnencodable,
// naming the field and the type) here, in a test, rather than in production.
func WithSerialization() Option { return func(r *Runtime) { r.serialize = true } }

// WithClock runs the engine on c instead of the wall clock (clock.Real()): every
// clock read and timer of the engine (message timeouts and max spout pending, the
// acker's rotations, flushes, tick tuples, re-sends, Stop's deadline and grace) goes
// through it, so a test driving a clock.Fake decides when time passes. Per-input
// latencies inside a bolt's batch still come from the CPU's cycle counter, kept
// within the batch's span on c.
func WithClock(c clock.Clock) Option { return func(r *Runtime) { r.clock = c } }

// Runtime is a running topology, or the part of it one Assignment hosts. Stop it
// with Stop; Done is closed once every hosted task has exited.
type Runtime struct {
	topo      *topology.Topology
	cfg       topology.Config
	transport transport.Transport
	assign    Assignment
	serialize bool
	streams   *codec.Streams
	log       *slog.Logger
	clock     clock.Clock
	realClock bool // clock is clock.Real(): nanotime reads the time package directly
	epoch     time.Time
	epochUnix int64        // epoch in Unix nanoseconds
	finished  atomic.Int64 // when every task had exited, Unix nanoseconds (0: running)
	// incarnation names this engine's run in every message it sends (flow.Dedupe).
	incarnation uint64

	// Lineage (WithLineage): the recorder, its sampling bound, and the roots whose
	// holders are asked for after a timeout.
	lin         *lineage.Recorder
	sampleBelow atomic.Uint64
	fwd         *linForward // where records of trees rooted elsewhere go (lineage_cluster.go)
	held        heldQuery
	sweeps      atomic.Uint64 // sweeps done (runSweeper), for the tests that wait for one
	compOfTask  []*topology.Component

	numTasks   int // spout and bolt tasks are 1..numTasks
	tasksOf    map[string][]int
	ackerTasks []int
	// consumerComps lists, per component, the components that subscribe to it;
	// producerTasks counts, per component, the tasks feeding each of its tasks.
	consumerComps map[string][]string
	producerTasks map[string]int
	// hostsOf lists, per component, the hosts of its tasks; ackerHosts those of the
	// ackers.
	hostsOf    map[string][]int
	ackerHosts []int
	hostedMu   sync.Mutex
	hosted     map[string][]int // hostedOf
	// Ends seen by this host (host loop only): per producer task, and counted per
	// consuming component and for the ackers (edgesEnded).
	endedTask []bool
	endedOf   map[string]int
	endedAll  int
	// ready is closed once every other host has answered: spouts start then, so no
	// tuple is sent to a task whose engine has not registered it yet.
	ready chan struct{}

	spouts    []*spoutExec
	bolts     []*boltExec
	ackers    []*ackerExec
	endpoints map[int]*endpoint // hosted tasks
	host      hostState
	// exhaustLeft counts the hosted spout tasks that have not said they are
	// exhausted (topology.FiniteSpout); exhausted closes when it reaches 0.
	exhaustLeft atomic.Int64
	exhausted   chan struct{}

	// warns limits and counts the warnings about a wrong topology (warn.go).
	warns struct {
		mu    sync.Mutex
		gate  warnGate
		trees map[string]*treeWatch // by spout component
	}

	sendErrs atomic.Uint64 // messages the transport refused
	stray    atomic.Uint64 // messages no handler expected
	// unreachable counts messages to a host endpoint not registered.
	unreachable atomic.Uint64

	hard         context.Context // canceled on a hard stop: blocked sends give up
	start        context.Context // Start's context: its end is a hard stop
	hardCancel   context.CancelFunc
	stopping     atomic.Bool
	stopOnce     sync.Once
	stopCh       chan struct{} // closed by Stop: spouts stop calling NextTuple
	drainOnce    sync.Once
	drainExpired chan struct{} // closed when Stop's deadline passes
	tasksWG      sync.WaitGroup
	workersDone  chan struct{} // closed when every hosted spout and bolt task has exited
	done         chan struct{}
}

// nanotime is the runtime clock: nanoseconds since Start on r.clock. On the real
// clock it is time.Since on the monotonic epoch, with no interface call.
func (r *Runtime) nanotime() int64 {
	if r.realClock {
		return int64(time.Since(r.epoch))
	}
	return int64(r.clock.Since(r.epoch))
}

// arm resets t to fire at the runtime clock's deadline, now being a reading taken
// just before. It reports false, with t stopped, if the clock moved between that
// reading and the arming (a test's Advance of a fake clock): t might then fire later
// than the deadline, so the caller takes a fresh reading instead of waiting. On the
// real clock it only resets t.
func (r *Runtime) arm(t clock.Timer, now, deadline int64) bool {
	t.Reset(time.Duration(deadline - now))
	if !r.realClock && r.nanotime() != now {
		t.Stop()
		return false
	}
	return true
}

// Start validates cfg, creates the tasks this engine hosts (every task, unless
// WithAssignment says otherwise), calling Open and Prepare, which get ctx, and starts
// them. If an Open or Prepare fails, the tasks already made are closed and the error
// names the component and task. Canceling ctx stops the topology at once (no drain):
// the trees in flight are abandoned, never failed, even when a bolt fails them
// because ctx was cancelled (see the package doc). Use Stop for a graceful shutdown.
func Start(ctx context.Context, topo *topology.Topology, cfg topology.Config, opts ...Option) (*Runtime, error) {
	if topo == nil {
		return nil, fmt.Errorf("%w: nil topology", topology.ErrTopology)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runtime{
		topo: topo, cfg: cfg, log: cfg.Logger, clock: clock.Real(),
		tasksOf:       map[string][]int{},
		consumerComps: map[string][]string{},
		producerTasks: map[string]int{},
		endpoints:     map[int]*endpoint{},
		stopCh:        make(chan struct{}),
		drainExpired:  make(chan struct{}),
		done:          make(chan struct{}),
		exhausted:     make(chan struct{}),
		workersDone:   make(chan struct{}),
		incarnation:   nonzeroID(),
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	for _, o := range opts {
		o(r)
	}
	if r.clock == nil {
		r.clock = clock.Real()
	}
	r.realClock = r.clock == clock.Real()
	r.epoch = r.clock.Now()
	r.epochUnix = r.epoch.UnixNano()
	r.warns.gate.every = int64(warnEvery)
	ownTransport := r.transport == nil
	if ownTransport {
		r.transport = transport.NewLocal()
	}
	r.streams = codec.NewStreams(topo)
	r.tasksOf, r.ackerTasks = TaskIDs(topo, cfg)
	r.numTasks = 0
	for _, c := range topo.Components {
		r.numTasks += c.Parallelism
	}
	r.compOfTask = make([]*topology.Component, r.numTasks+1)
	for _, c := range topo.Components {
		for _, t := range r.tasksOf[c.ID] {
			r.compOfTask[t] = c
		}
		seen := map[string]bool{}
		for _, in := range c.Inputs {
			if !seen[in.Component] {
				seen[in.Component] = true
				r.producerTasks[c.ID] += topo.Component(in.Component).Parallelism
				r.consumerComps[in.Component] = append(r.consumerComps[in.Component], c.ID)
			}
		}
	}
	if err := r.assign.check(r.numTasks + len(r.ackerTasks)); err != nil {
		return nil, err
	}
	r.hostsOf = map[string][]int{}
	hostSet := func(tasks []int) []int {
		seen := map[int]bool{}
		var hs []int
		for _, t := range tasks {
			if h := r.assign.of(t); !seen[h] {
				seen[h] = true
				hs = append(hs, h)
			}
		}
		return hs
	}
	for _, c := range topo.Components {
		r.hostsOf[c.ID] = hostSet(r.tasksOf[c.ID])
	}
	r.ackerHosts = hostSet(r.ackerTasks)
	r.initLineageHosts()
	r.endedTask = make([]bool, r.numTasks+1)
	r.endedOf = map[string]int{}
	r.ready = make(chan struct{})
	r.start = ctx
	r.hard, r.hardCancel = context.WithCancel(context.Background())
	if err := r.build(ctx); err != nil {
		r.hardCancel()
		r.unregister() // a retry of this Start on the same transport can register again
		return nil, err
	}
	r.exhaustLeft.Store(int64(len(r.spouts)))
	for _, s := range r.spouts {
		r.tasksWG.Add(1)
		go func() { defer r.taskExited(s.e.ep); s.run() }()
	}
	for _, b := range r.bolts {
		r.tasksWG.Add(1)
		go func() { defer r.taskExited(b.e.ep); b.run() }()
	}
	ackersWG := &sync.WaitGroup{}
	for _, a := range r.ackers {
		ackersWG.Add(1)
		go func() { defer ackersWG.Done(); a.run() }()
	}
	flusher := make(chan struct{})
	tasksDone := make(chan struct{})
	if cfg.FlushInterval > 0 {
		go func() { defer close(flusher); r.runFlusher(tasksDone) }()
	} else {
		close(flusher)
	}
	sweeper := make(chan struct{})
	if r.lin != nil {
		go func() { defer close(sweeper); r.runSweeper() }()
	} else {
		close(sweeper)
	}
	hostDone := make(chan struct{})
	go func() { defer close(hostDone); r.runHost(tasksDone) }()
	r.greet()
	// The owner of every goroutine above: once every hosted task has exited and the
	// host has seen its ends acknowledged, the rest stop, then Done closes.
	go func() {
		r.tasksWG.Wait()
		close(r.workersDone)
		r.flushWarnings() // no task is left to add to them
		ackersWG.Wait()
		close(tasksDone)
		<-hostDone
		r.hardCancel()
		<-sweeper
		<-flusher
		r.unregister()
		if ownTransport {
			_ = r.transport.Close()
		}
		r.finished.Store(r.unixNano(r.nanotime()))
		close(r.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			r.stopping.Store(true)
			r.stopOnce.Do(func() { close(r.stopCh) })
			r.drainOnce.Do(func() { close(r.drainExpired) })
			r.hardCancel()
		case <-r.done:
		}
	}()
	return r, nil
}

// TaskIDs returns the global task ids Start gives a topology's tasks: spouts and
// bolts from 1 in declaration order, then the ackers. Every engine of a topology
// numbers them alike, so an Assignment can name them.
func TaskIDs(topo *topology.Topology, cfg topology.Config) (byComponent map[string][]int, ackers []int) {
	byComponent = map[string][]int{}
	next := 1
	for _, c := range topo.Components {
		ids := make([]int, c.Parallelism)
		for i := range ids {
			ids[i] = next
			next++
		}
		byComponent[c.ID] = ids
	}
	for range cfg.Ackers {
		ackers = append(ackers, next)
		next++
	}
	return byComponent, ackers
}

// hostedOf returns the tasks of component comp this engine hosts, made once and
// shared by every producer's local-or-shuffle routes (a copy each would grow with the
// square of the tasks).
func (r *Runtime) hostedOf(comp string) []int {
	r.hostedMu.Lock()
	defer r.hostedMu.Unlock()
	if hs, ok := r.hosted[comp]; ok {
		return hs
	}
	var hs []int
	for _, t := range r.tasksOf[comp] {
		if r.hosts(t) {
			hs = append(hs, t)
		}
	}
	if r.hosted == nil {
		r.hosted = map[string][]int{}
	}
	r.hosted[comp] = hs
	return hs
}

// windowOf is the credit window of every edge into task: its receive queue shared
// among its producers.
func (r *Runtime) windowOf(task int) uint64 {
	producers := r.numTasks // an acker hears from every spout and bolt task
	if c := r.componentOf(task); c != nil {
		producers = r.producerTasks[c.ID]
	}
	return flow.Window(r.cfg.ReceiveQueue, r.cfg.BatchSize, producers)
}

// send hands a message to the transport, through the codec first with
// WithSerialization. A refused message is counted (Stats.TransportErrors) and
// logged, and otherwise treated as lost: the acker's timeout covers it.
func (r *Runtime) send(m *transport.Message) {
	m.Epoch = r.incarnation
	if r.serialize {
		c, err := codec.Clone(m, r.streams)
		if err != nil {
			r.sendFailed(m, err)
			return
		}
		m = c
	}
	if err := r.transport.Send(m); err != nil {
		if m.To < 0 && errors.Is(err, transport.ErrUnknownEndpoint) {
			// A host endpoint that is not there: a host not started yet (a greeting
			// is re-sent until it is up) or one that has left (its goodbye may still
			// be on the way). Normal at the edges of a run: counted, not logged.
			r.unreachable.Add(1)
			return
		}
		r.sendFailed(m, err)
	}
}

func (r *Runtime) sendFailed(m *transport.Message, err error) {
	if n := r.sendErrs.Add(1); n <= 10 || n%1000 == 0 {
		r.log.Error("transport refused a message", "kind", m.Kind.String(), "from", m.From, "to", m.To, "err", err, "errors_so_far", n)
	}
}

// countStray counts a message no handler expected (a kind sent to the wrong
// endpoint): a protocol error, never silently absorbed.
func (r *Runtime) countStray(m *transport.Message) {
	if n := r.stray.Add(1); n <= 10 || n%1000 == 0 {
		r.log.Error("unexpected message", "kind", m.Kind.String(), "op", m.Op, "from", m.From, "to", m.To, "stray_so_far", n)
	}
}

// runFlusher sends, every FlushInterval, what each spout and bolt task holds in
// batches that are not full (Storm 2's flush tuple, without going through the
// tasks' queues): a task inside a slow NextTuple or Execute does not hold back what
// it emitted or acked. It stops once every hosted task has exited.
func (r *Runtime) runFlusher(tasksDone <-chan struct{}) {
	emitters := make([]*emitter, 0, len(r.spouts)+len(r.bolts))
	for _, s := range r.spouts {
		emitters = append(emitters, s.e)
	}
	for _, b := range r.bolts {
		emitters = append(emitters, b.e)
	}
	t := r.clock.NewTicker(r.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			for _, e := range emitters {
				e.flushHeld()
			}
		case <-tasksDone:
			return
		}
	}
}

func (r *Runtime) taskContext(c *topology.Component, task, index int) topology.TaskContext {
	return topology.TaskContext{
		Component: c.ID, TaskID: task, TaskIndex: index, Parallelism: c.Parallelism,
		ComponentTasks: func(comp string) []int { return slices.Clone(r.tasksOf[comp]) },
		Logger:         r.log.With("component", c.ID, "task", task),
		Topology:       r.topo,
		Stopping:       r.stopCh,
	}
}

// unregister removes this engine's endpoints from the transport: the host's and
// every hosted task's.
func (r *Runtime) unregister() {
	if r.host.inbox != nil {
		r.transport.Unregister(transport.Host(r.assign.host()))
	}
	for task := range r.endpoints {
		r.transport.Unregister(task)
	}
}

// register makes a hosted task's endpoint.
func (r *Runtime) register(task int) (*endpoint, error) {
	inbox, err := r.transport.Register(task)
	if err != nil {
		return nil, fmt.Errorf("engine: task %d: %w", task, err)
	}
	ep := newEndpoint(r, task, inbox)
	r.endpoints[task] = ep
	return ep, nil
}

// build makes every hosted task, opening spouts and preparing bolts in declaration
// order.
func (r *Runtime) build(ctx context.Context) (err error) {
	var opened []func()
	defer func() {
		if err != nil {
			for _, closeFn := range opened {
				closeFn()
			}
		}
	}()
	r.host.init(r.resendEvery())
	if r.host.inbox, err = r.transport.Register(transport.Host(r.assign.host())); err != nil {
		return fmt.Errorf("engine: host %d: %w", r.assign.host(), err)
	}
	for _, c := range r.topo.Components {
		for i, task := range r.tasksOf[c.ID] {
			if !r.hosts(task) {
				continue
			}
			ep, err := r.register(task)
			if err != nil {
				return err
			}
			tc := r.taskContext(c, task, i)
			e, err := newEmitter(r, ep, c, tc.Logger)
			if err != nil {
				return err
			}
			if c.IsSpout() {
				s := &spoutExec{e: e, rt: r, ep: ep, state: newSpoutState(r.spoutConfig(), r.nanotime())}
				e.stats.latency = &Histogram{}
				s.spout = c.Spout()
				s.finite, _ = s.spout.(topology.FiniteSpout)
				s.activating, _ = s.spout.(topology.ActivatingSpout)
				if err := callErr(func() error { return s.spout.Open(ctx, tc, s) }); err != nil {
					return fmt.Errorf("spout %q task %d: Open: %w", c.ID, task, err)
				}
				opened = append(opened, func() { _ = callErr(s.spout.Close) })
				r.spouts = append(r.spouts, s)
				continue
			}
			b := &boltExec{e: e, rt: r, ep: ep, wake: make(chan struct{}, 1)}
			b.cur.Store(-1)
			if r.lin != nil {
				e.beforeBlock = b.copyHeld
			}
			if r.cfg.LatencyMetrics {
				e.stats.execLat, e.stats.procLat = &Histogram{}, &Histogram{}
			}
			// As for spouts, a task whose Prepare failed is not cleaned up; the tasks
			// prepared before it are.
			prepare := func() error { return b.bolt.Prepare(ctx, tc, b) }
			if c.Basic != nil {
				b.basic = c.Basic()
				b.cleanup = b.basic.Cleanup
				prepare = func() error { return b.basic.Prepare(ctx, tc) }
			} else {
				b.bolt = c.Bolt()
				b.cleanup = b.bolt.Cleanup
				b.drainer, _ = b.bolt.(topology.Drainer)
			}
			if err := callErr(prepare); err != nil {
				return fmt.Errorf("bolt %q task %d: Prepare: %w", c.ID, task, err)
			}
			opened = append(opened, func() { _ = callErr(b.cleanup) })
			r.bolts = append(r.bolts, b)
		}
	}
	for _, task := range r.ackerTasks {
		if !r.hosts(task) {
			continue
		}
		ep, err := r.register(task)
		if err != nil {
			return err
		}
		r.ackers = append(r.ackers, &ackerExec{rt: r, task: task, ep: ep, ledger: acker.New(ackerBuckets),
			outs: map[int][]acker.Outcome{}})
	}
	return nil
}

// callErr runs user code and turns a panic into an error.
func callErr(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn()
}

// taskExited ends the edges of a spout or bolt task that has exited: to every task
// of its consumers and to every acker (they stop once all their producers ended).
func (r *Runtime) taskExited(ep *endpoint) {
	hosts := map[int]bool{}
	for _, cons := range r.consumerComps[r.componentOf(ep.task).ID] {
		for _, h := range r.hostsOf[cons] {
			hosts[h] = true
		}
	}
	for _, h := range r.ackerHosts {
		hosts[h] = true
	}
	r.endEdges(ep, hosts)
	r.tasksWG.Done()
}

// interrupted reports whether a stop has cut work off: Start's context is done, or
// Stop's deadline passed (or the hard stop that follows). From then on a tree's
// failure or timeout is the stop's doing, not the tree's: it is abandoned, never
// delivered as Fail. Start's context is read directly, not through the goroutine
// that watches it, so a bolt's "context canceled" can never reach a spout first.
func (r *Runtime) interrupted() bool {
	if r.start.Err() != nil || r.hard.Err() != nil {
		return true
	}
	select {
	case <-r.drainExpired:
		return true
	default:
		return false
	}
}

// stopGrace is how long Stop waits, after its deadline, first for queued tuples to
// drain and then for tasks to leave user code.
const stopGrace = time.Second

// ErrShutdownTimeout is returned by Stop when trees were still pending at its deadline.
var ErrShutdownTimeout = errors.New("gale: shutdown deadline passed with trees pending")

// Stop shuts the topology down gracefully: spouts stop calling NextTuple, bolts that
// implement topology.Drainer are told to write what they hold whenever their queue is
// empty, every pending tree is waited for until it is acked, failed or timed out
// (bounded by ctx's deadline, or Config.ShutdownTimeout if ctx has none), queues drain
// in topological order, and every task is closed. It returns as soon as the trees are
// done, or ErrShutdownTimeout (with the count) if trees were abandoned at the
// deadline; those trees got neither Ack nor Fail, and nothing failing or timing out
// after the deadline is delivered as Fail. If user code does
// not return, Stop returns about 2 s after its deadline with ErrShutdownTimeout and Done
// stays open. Do not call Stop from inside a task: it waits for every task to finish.
func (r *Runtime) Stop(ctx context.Context) error {
	r.beginStop(true)
	// Config.ShutdownTimeout is measured on the engine's clock; a deadline of ctx is
	// the caller's.
	var deadline <-chan time.Time
	if _, ok := ctx.Deadline(); !ok && r.cfg.ShutdownTimeout > 0 {
		t := r.clock.NewTimer(r.cfg.ShutdownTimeout)
		defer t.Stop()
		deadline = t.C()
	}
	expired := false
	select {
	case <-r.done:
	case <-ctx.Done():
		expired = true
	case <-deadline:
		expired = true
	}
	if expired {
		r.expireDrain(true)
		// Spouts give up their pending trees now; bolts still drain what is queued.
		// After a short grace, blocked sends are cut; after another, Stop gives up on
		// tasks stuck in user code (Done then closes whenever they return).
		grace := r.clock.NewTimer(stopGrace)
		defer grace.Stop()
		select {
		case <-r.done:
		case <-grace.C():
			r.hardCancel()
			grace.Reset(stopGrace)
			select {
			case <-r.done:
			case <-grace.C():
				return fmt.Errorf("%w: tasks still inside user code (Execute, NextTuple, Close or Cleanup has not returned); Done closes when they return", ErrShutdownTimeout)
			}
		}
	}
	abandoned := 0
	for _, s := range r.spouts {
		abandoned += int(s.abandoned.Load())
	}
	if abandoned > 0 {
		return fmt.Errorf("%w: %d trees", ErrShutdownTimeout, abandoned)
	}
	return nil
}

// componentOf returns the component of a spout or bolt task, or nil.
func (r *Runtime) componentOf(task int) *topology.Component {
	if task <= 0 || task >= len(r.compOfTask) {
		return nil
	}
	return r.compOfTask[task]
}

// Topology returns the running topology.
func (r *Runtime) Topology() *topology.Topology { return r.topo }

// Config returns the configuration the topology runs with.
func (r *Runtime) Config() topology.Config { return r.cfg }

// AckerTasks returns the acker task ids.
func (r *Runtime) AckerTasks() []int { return slices.Clone(r.ackerTasks) }

// Started is when Start was called.
func (r *Runtime) Started() time.Time { return r.epoch }

// Finished is when every task had exited (zero until Done is closed): a UI shows a
// finished job's run time, not a running uptime.
func (r *Runtime) Finished() time.Time {
	if ns := r.finished.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Exhausted is closed when every spout task this engine hosts has said that its
// input is done (topology.FiniteSpout) with no tree of its in flight: every tree
// its spouts emitted has completed (a failed one was replayed, and the replay
// completed, or the spout gave up on it), and no spout will emit again. It never
// closes when a hosted spout is not a FiniteSpout, or when the engine hosts no
// spout. Nothing stops by itself then: the caller stops the runtime (Stop, which
// drains the bolts' queues and calls Cleanup). Without acker tasks nothing is
// tracked, so a tree is complete at its emit and Exhausted says only that the
// spouts are done; Stop still executes what is queued before Cleanup.
// Stats shows it per spout task (ComponentStats.Exhausted).
func (r *Runtime) Exhausted() <-chan struct{} { return r.exhausted }

// spoutExhausted counts a spout task that latched exhausted.
func (r *Runtime) spoutExhausted() {
	if r.exhaustLeft.Add(-1) == 0 {
		close(r.exhausted)
	}
}

// Done is closed when every task has exited.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// Tasks returns the global task ids of a component.
func (r *Runtime) Tasks(component string) []int { return slices.Clone(r.tasksOf[component]) }

// Stats returns every component's counters and the ackers'. It never waits for a task:
// each task's counters are as of its last flush (the end of a batch, or before a send
// that may block), so during a run counts of different tasks, or of one task read
// mid-batch, may be from slightly different moments (a bolt's Acked can lead its
// Executed); spout Pending is read live. After Done every count is exact.
func (r *Runtime) Stats() Stats {
	s := Stats{Components: map[string]*ComponentStats{}}
	for _, c := range r.topo.Components {
		s.Order = append(s.Order, c.ID)
		cs := &ComponentStats{ID: c.ID, Spout: c.IsSpout(), Tasks: c.Parallelism, Misuse: map[string]uint64{}}
		if cs.Spout {
			cs.CompleteLatency = &Histogram{}
		}
		s.Components[c.ID] = cs
	}
	for _, sp := range r.spouts {
		cs, ts := s.Components[sp.e.comp.ID], sp.e.taskEntry()
		sp.e.snapshot(ts)
		sp.skip.mu.Lock()
		skipped := sp.skip.total
		if sp.skip.on {
			skipped += max(r.nanotime()-sp.skip.since, 0)
		}
		sp.skip.mu.Unlock()
		ts.SkippedMaxSpout = time.Duration(skipped)
		ts.Pending = int(sp.pending.Load())
		ts.Abandoned = int(sp.abandoned.Load())
		if sp.exhaustedPub.Load() {
			ts.Exhausted = 1
		}
		cs.add(ts)
	}
	for _, b := range r.bolts {
		cs, ts := s.Components[b.e.comp.ID], b.e.taskEntry()
		b.e.snapshot(ts)
		// A batch may be taken just before its sender counts it in: never below 0.
		ts.QueueDepth = b.ep.queueDepth()
		cs.add(ts)
	}
	s.Acker.Tasks = len(r.ackers)
	for _, a := range r.ackers {
		a.snapshot(&s.Acker)
	}
	ts := r.transport.Stats()
	s.Transport = TransportStats{Sent: ts.Sent, Errors: r.sendErrs.Load(), Dropped: ts.Dropped,
		Stray: r.stray.Load(), Unreachable: r.unreachable.Load(), LastError: ts.LastError}
	for _, ep := range r.endpoints {
		ep.cmu.Lock()
		s.Transport.Duplicates += ep.dupes
		ep.cmu.Unlock()
	}
	s.LineageDropped = r.lineageDropped()
	return s
}
