package wordcount

// Cluster mode: the word-count topology with its state in JetStream, so that a task
// can move to another process (a worker killed, its tasks restarted elsewhere) and
// the counts stay exact. See the package doc, and changelog.go for the count tasks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/topology"
)

// ClusterOptions configure the cluster-mode word-count topology (NewClusterTopology).
type ClusterOptions struct {
	// Files are the input files, absolute paths, read by whichever worker runs the
	// spout (every worker must see the same files at the same paths).
	Files []string
	// FailRate, Seed and Parallelism are as in Options.
	FailRate    float64
	Seed        uint64
	Parallelism int
	// Config is the topology config the topology runs with. Ackers must be > 0:
	// cluster mode is built on tracked lines (an occurrence is acked only once it is
	// stored, and the spout's committed offset is its acked prefix).
	Config topology.Config
	// JS reaches the KV bucket and the changelog stream (EnsureClusterState makes
	// them). nil is refused by the tasks' Open and Prepare, not by
	// NewClusterTopology, which touches no server.
	JS jetstream.JetStream
	// Bucket names the KV bucket and, with "-changelog", the changelog stream
	// (letters, digits, '-' and '_'), e.g. "gale-wordcount".
	Bucket string
	// Run names this run's key and subjects in them (letters, digits, '-' and '_').
	// Required: a task started again with the same Run resumes that run.
	Run string
	// CommitInterval is how often the spout commits its low watermark (default
	// 100 ms); FlushInterval bounds how long a count task holds an occurrence
	// before writing its changelog batch (default 20 ms).
	CommitInterval, FlushInterval time.Duration
	// Generation is the cluster assignment's generation this build runs (0 outside a
	// cluster): a spout claims the offsets key only from an equal or older
	// generation's spout, so a generation started late (after its successor's
	// spout claimed) cannot make the newer spout stale.
	Generation uint64

	opTimeout time.Duration // tests: clusterOpTimeout if 0
}

// Defaults of ClusterOptions.
const (
	DefaultCommitInterval = 100 * time.Millisecond
	DefaultFlushInterval  = 20 * time.Millisecond
)

// clusterOpTimeout bounds one KV or stream request of a task (a claim, a commit, a
// changelog write): a request lost with a server must not hold a task for ever.
const clusterOpTimeout = 5 * time.Second

var clusterNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// validate checks the options; every error names the field.
func (o *ClusterOptions) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("wordcount: ClusterOptions."+format, a...)
	}
	switch {
	case len(o.Files) == 0:
		return bad("Files: no input files")
	case len(o.Files) >= 1<<24:
		return bad("Files: %d files, at most %d", len(o.Files), 1<<24-1)
	case !(o.FailRate >= 0 && o.FailRate < 1): // also refuses NaN
		return bad("FailRate %v, must be in [0, 1)", o.FailRate)
	case o.Parallelism < 0 || o.Parallelism > topology.MaxParallelism:
		return bad("Parallelism %d, must be in [0, %d] (0: 2)", o.Parallelism, topology.MaxParallelism)
	case o.Config.Ackers <= 0:
		return bad("Config.Ackers = %d: cluster mode needs acker tasks (lines are tracked: an occurrence is acked once stored, the spout commits its acked prefix)", o.Config.Ackers)
	case o.Bucket == "" || !clusterNameRE.MatchString(o.Bucket):
		return bad("Bucket %q: use letters, digits, '-' and '_' (it names a KV bucket and a stream)", o.Bucket)
	case o.Run == "" || !clusterNameRE.MatchString(o.Run):
		return bad("Run %q: required, letters, digits, '-' and '_' (it names this run's key and subjects)", o.Run)
	case o.CommitInterval < 0:
		return bad("CommitInterval %v, must be >= 0 (0: %v)", o.CommitInterval, DefaultCommitInterval)
	case o.FlushInterval < 0:
		return bad("FlushInterval %v, must be >= 0 (0: %v)", o.FlushInterval, DefaultFlushInterval)
	}
	for i, f := range o.Files {
		if !filepath.IsAbs(f) {
			return bad("Files[%d] %q: not an absolute path (the spout may run in another process, in another directory)", i, f)
		}
	}
	if err := o.Config.Validate(); err != nil {
		return fmt.Errorf("wordcount: ClusterOptions.Config: %w", err)
	}
	return nil
}

// clusterConf is what the tasks of a cluster topology share: the options, read only.
type clusterConf struct {
	files          []string
	js             jetstream.JetStream
	bucket, run    string
	commitInterval time.Duration
	flushInterval  time.Duration
	opTimeout      time.Duration
	generation     uint64
}

func (c *clusterConf) timeout() time.Duration { return orDefault(c.opTimeout, clusterOpTimeout) }

func (c *clusterConf) check() error {
	if c.js == nil {
		return errors.New("wordcount: ClusterOptions.JS is nil: cluster mode keeps its state in JetStream")
	}
	return nil
}

// NewClusterTopology returns the word-count topology in cluster mode: its spout
// commits its offsets to JetStream KV and its count tasks keep changelogs in a
// JetStream stream (see the package doc). It has exactly the shape of the local
// topology (Run's) for the same parallelism: same components, kinds, streams,
// fields, groupings and parallelism, so the same fingerprint. Building it touches
// no server: the tasks bind the bucket and the stream in Open and Prepare, with the
// context the engine gives them.
func NewClusterTopology(o ClusterOptions) (*topology.Topology, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	conf := &clusterConf{
		files: append([]string(nil), o.Files...), js: o.JS, bucket: o.Bucket, run: o.Run, generation: o.Generation,
		commitInterval: orDefault(o.CommitInterval, DefaultCommitInterval),
		flushInterval:  orDefault(o.FlushInterval, DefaultFlushInterval),
		opTimeout:      orDefault(o.opTimeout, clusterOpTimeout),
	}
	fail := failures{rate: o.FailRate, seed: o.Seed}
	par := o.Parallelism
	if par <= 0 {
		par = 2
	}
	// The shape of build's topology (without its test-only interpose bolt);
	// TestClusterTopologyFingerprint holds them equal.
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return &clusterSpout{conf: conf} }, 1).Output(lineFields...)
	b.SetBasicBolt("split", func() topology.BasicBolt { return &splitBolt{failures: fail} }, par).
		ShuffleGrouping("lines").Output(splitFields...)
	b.SetBolt("count", func() topology.Bolt { return &changelogCount{failures: fail, conf: conf} }, par).
		FieldsGrouping("split", "word")
	return b.Build()
}

func orDefault(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// Names in JetStream. The KV bucket is Bucket; the spout's key in it "<Run>.lines".
// The changelog stream is "<Bucket>-changelog", holding subjects
// "wordcount.changelog.<Bucket>.>"; count task i (its index among the count tasks,
// 0 to Parallelism-1) appends to "wordcount.changelog.<Bucket>.<Run>.<i>". The
// subjects start with their own token so that they never overlap gale's transport
// subjects ("gale." by default).
func spoutKey(run string) string             { return run + ".lines" }
func changelogStream(bucket string) string   { return bucket + "-changelog" }
func changelogSubjects(bucket string) string { return "wordcount.changelog." + bucket + ".>" }
func changelogRun(bucket, run string) string { return "wordcount.changelog." + bucket + "." + run }
func changelogSubject(bucket, run string, task int) string {
	return changelogRun(bucket, run) + "." + strconv.Itoa(task)
}

// maxChangelogMsg is the largest changelog message written (the server's default
// max_payload is 1 MiB); the stream refuses larger ones.
const maxChangelogMsg = 512 << 10

// EnsureClusterState creates the KV bucket and the changelog stream of bucket (file
// storage, replicas copies) if they are missing; existing ones are left as they are.
// The process that submits a cluster run calls it before the tasks start.
func EnsureClusterState(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) error {
	if !clusterNameRE.MatchString(bucket) {
		return fmt.Errorf("wordcount: bucket %q: use letters, digits, '-' and '_'", bucket)
	}
	if replicas < 1 || replicas > 5 {
		return fmt.Errorf("wordcount: %d replicas: JetStream keeps 1 to 5", replicas)
	}
	if _, err := js.KeyValue(ctx, bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket,
			Description: "gale word count: the spouts' committed offsets, key <run>.lines",
			Storage:     jetstream.FileStorage, Replicas: replicas})
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) { // made meanwhile
			return fmt.Errorf("wordcount: KV bucket %s: %w", bucket, err)
		}
	} else if err != nil {
		return fmt.Errorf("wordcount: KV bucket %s: %w", bucket, err)
	}
	name := changelogStream(bucket)
	if _, err := js.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name,
			Description: "gale word count: the count tasks' changelogs, subject wordcount.changelog.<bucket>.<run>.<task>",
			Subjects:    []string{changelogSubjects(bucket)}, Storage: jetstream.FileStorage,
			Replicas: replicas, MaxMsgSize: maxChangelogMsg})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("wordcount: stream %s: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("wordcount: stream %s: %w", name, err)
	}
	return nil
}

// ClusterCommit is the spout's committed progress: the value of key "<Run>.lines"
// (JSON). The counters are summed over the spout's incarnations (every Open of the
// spout task, in whichever process).
type ClusterCommit struct {
	// Low is the low watermark, an OccurrenceID: every line before it has been
	// acked, so its words are in the changelogs. A spout resumes reading there.
	Low uint64 `json:"low"`
	// Done: every line of every file is acked (Low == OccurrenceID(Files, 0)).
	Done bool `json:"done"`
	// Files is the number of input files.
	Files int `json:"files"`
	// Start is where the incarnation that wrote this value started (the Low it
	// read when it opened); Owner names that incarnation.
	Start uint64 `json:"start"`
	Owner string `json:"owner"`
	// Generation is the cluster generation of that incarnation (0 outside a cluster).
	Generation uint64 `json:"generation,omitempty"`
	// Incarnations is the number of times the spout task opened; Resumes those that
	// started from a committed Low > 0.
	Incarnations uint64 `json:"incarnations"`
	Resumes      uint64 `json:"resumes"`
	// Lines read (a line read again by a later incarnation counts again), lines
	// acked, replays (re-emits after a fail or timeout) and lost lines (unreadable
	// or changed before a replay).
	Lines   uint64 `json:"lines"`
	Acked   uint64 `json:"acked"`
	Replays uint64 `json:"replays"`
	Lost    uint64 `json:"lost"`
	// Revision is the KV revision the value was read at (not stored).
	Revision uint64 `json:"-"`
}

// ClusterProgress returns the spout's committed progress of run, or the zero value
// (and no error) if nothing is committed yet.
func ClusterProgress(ctx context.Context, js jetstream.JetStream, bucket, run string) (ClusterCommit, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return ClusterCommit{}, fmt.Errorf("wordcount: KV bucket %s: %w", bucket, err)
	}
	c, _, err := readCommit(ctx, kv, spoutKey(run))
	return c, err
}

// readCommit reads the commit at key: the zero value and revision 0 if none.
func readCommit(ctx context.Context, kv jetstream.KeyValue, key string) (ClusterCommit, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ClusterCommit{}, 0, nil
	}
	if err != nil {
		return ClusterCommit{}, 0, fmt.Errorf("wordcount: read %s: %w", key, err)
	}
	c, err := decodeCommit(e)
	return c, e.Revision(), err
}

func decodeCommit(e jetstream.KeyValueEntry) (ClusterCommit, error) {
	var c ClusterCommit
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return c, fmt.Errorf("wordcount: %s revision %d: %w", e.Key(), e.Revision(), err)
	}
	c.Revision = e.Revision()
	return c, nil
}

// WaitClusterDone watches run's commit until it says done (or ctx ends) and returns
// it.
func WaitClusterDone(ctx context.Context, js jetstream.JetStream, bucket, run string) (ClusterCommit, error) {
	return watchCommit(ctx, js, bucket, run, func(c ClusterCommit) bool { return c.Done })
}

// watchCommit watches run's commit (a KV watch: its current value, then every
// update) until until returns true for one, and returns that one; on ctx's end, the
// last seen and ctx's error.
func watchCommit(ctx context.Context, js jetstream.JetStream, bucket, run string, until func(ClusterCommit) bool) (ClusterCommit, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return ClusterCommit{}, fmt.Errorf("wordcount: KV bucket %s: %w", bucket, err)
	}
	// nats.go ends a watch when the context it was made with ends.
	wctx, cancel := context.WithCancel(ctx)
	w, err := kv.Watch(wctx, spoutKey(run))
	if err != nil {
		cancel()
		return ClusterCommit{}, fmt.Errorf("wordcount: watch %s: %w", spoutKey(run), err)
	}
	defer func() {
		cancel()
		_ = w.Stop()
		for range w.Updates() { // closed once the watch has stopped
		}
	}()
	var last ClusterCommit
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				if err := ctx.Err(); err != nil {
					return last, err
				}
				return last, fmt.Errorf("wordcount: watch %s ended", spoutKey(run))
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the end of the current values, or a delete
			}
			c, err := decodeCommit(e)
			if err != nil {
				return last, err
			}
			if last = c; until(c) {
				return c, nil
			}
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// ErrStaleSpout is reported by a spout whose commit was refused because another
// incarnation of the spout task (on another worker) has written since: this one is
// stale, and stops committing and emitting.
var ErrStaleSpout = errors.New("wordcount: stale spout: another incarnation of the spout task committed since")

// spoutCommitter writes one spout incarnation's commits to its key, each a
// compare-and-set on the revision it read or wrote last. Not safe for concurrent
// use.
type spoutCommitter struct {
	kv    jetstream.KeyValue
	key   string
	files int
	owner string
	gen   uint64        // the cluster generation of this incarnation (0: none)
	rev   uint64        // the revision this incarnation read or wrote last
	base  ClusterCommit // as claimed: the earlier incarnations' counters
	last  ClusterCommit // the value at rev
	stale error         // set once refused: every later commit is refused at once
}

// spoutCounts is what one incarnation adds to its commit.
type spoutCounts struct{ low, lines, acked, replays, lost uint64 }

func newOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%08x", host, os.Getpid(), rand.Uint32())
}

// claim makes this incarnation the key's writer: it reads the commit and writes it
// back as its own (one more incarnation, a resume if Low > 0) with a compare-and-set,
// so that a stale incarnation's next commit is refused even if this one has nothing
// to commit yet. It returns the committed Low, where this incarnation starts.
func (c *spoutCommitter) claim(ctx context.Context) (ClusterCommit, error) {
	for range 10 {
		prev, rev, err := readCommit(ctx, c.kv, c.key)
		if err != nil {
			return prev, err
		}
		if rev != 0 && prev.Files != c.files {
			return prev, fmt.Errorf("wordcount: %s was committed by a run over %d files, this spout has %d: another input under the same Run", c.key, prev.Files, c.files)
		}
		if rev != 0 && c.gen != 0 && prev.Generation > c.gen {
			return prev, fmt.Errorf("%w: %s is claimed by generation %d's spout (%s), this is generation %d's", ErrStaleSpout, c.key, prev.Generation, prev.Owner, c.gen)
		}
		next := prev
		next.Files, next.Owner, next.Start, next.Generation = c.files, c.owner, prev.Low, c.gen
		next.Incarnations++
		if prev.Low > 0 {
			next.Resumes++
		}
		next.Done = prev.Low == OccurrenceID(c.files, 0)
		data, err := json.Marshal(next)
		if err != nil {
			return prev, err
		}
		if rev == 0 {
			rev, err = c.kv.Create(ctx, c.key, data)
		} else {
			rev, err = c.kv.Update(ctx, c.key, data, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another incarnation wrote meanwhile: read again
		}
		if err != nil {
			return prev, fmt.Errorf("wordcount: claim %s: %w", c.key, err)
		}
		next.Revision = rev
		c.rev, c.base, c.last = rev, next, next
		return next, nil
	}
	return ClusterCommit{}, fmt.Errorf("wordcount: claim %s: refused 10 times in a row", c.key)
}

// commit writes the incarnation's progress if it changed, on the revision it holds.
// The low only moves forward. A refusal because another incarnation wrote returns
// ErrStaleSpout, now and for every later call.
func (c *spoutCommitter) commit(ctx context.Context, s spoutCounts) error {
	if c.stale != nil {
		return c.stale
	}
	next := c.base
	next.Low = max(s.low, c.last.Low)
	next.Done = next.Low == OccurrenceID(c.files, 0)
	next.Lines += s.lines
	next.Acked += s.acked
	next.Replays += s.replays
	next.Lost += s.lost
	next.Revision = c.last.Revision
	if next == c.last {
		return nil
	}
	data, err := json.Marshal(next)
	if err != nil {
		return err
	}
	for range 2 {
		rev, err := c.kv.Update(ctx, c.key, data, c.rev)
		if err == nil {
			next.Revision = rev
			c.rev, c.last = rev, next
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("wordcount: commit %s: %w", c.key, err) // try again next time
		}
		// Refused. If the key holds our own value at a later revision, a write whose
		// answer was lost did land: take its revision and write again. Anything else
		// is another incarnation's.
		e, gerr := c.kv.Get(ctx, c.key)
		if errors.Is(gerr, jetstream.ErrKeyNotFound) { // deleted: the run was reset
			c.stale = fmt.Errorf("%w: %s was deleted", ErrStaleSpout, c.key)
			return c.stale
		}
		if gerr != nil {
			return fmt.Errorf("wordcount: commit %s: %w (and reading it: %w)", c.key, err, gerr)
		}
		cur, derr := decodeCommit(e)
		if derr != nil || cur.Owner != c.owner || e.Revision() <= c.rev {
			c.stale = fmt.Errorf("%w: %s revision %d is %s's (this is %s, at revision %d)", ErrStaleSpout, c.key, e.Revision(), cur.Owner, c.owner, c.rev)
			return c.stale
		}
		c.rev = e.Revision()
	}
	return fmt.Errorf("wordcount: commit %s: refused twice", c.key)
}

// clusterSpout is the line spout of cluster mode: it starts at the committed low
// watermark and a goroutine of its own commits the low as it advances.
type clusterSpout struct {
	lineSpout
	conf *clusterConf
	prog progress
	com  *spoutCommitter
	out  topology.SpoutCollector
	ctx  context.Context

	low     atomic.Uint64 // set on the task goroutine (lowMoved), read by the committer
	stale   atomic.Bool
	errMu   sync.Mutex
	errs    []error // the committer's, reported by the task goroutine
	failing bool    // the committer's last commit failed (its errors are reported once)
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (s *clusterSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	if err := s.conf.check(); err != nil {
		return err
	}
	kv, err := s.conf.js.KeyValue(ctx, s.conf.bucket)
	if err != nil {
		return fmt.Errorf("wordcount: KV bucket %s (made by EnsureClusterState): %w", s.conf.bucket, err)
	}
	s.com = &spoutCommitter{kv: kv, key: spoutKey(s.conf.run), files: len(s.conf.files), owner: newOwner(), gen: s.conf.generation}
	cctx, cancel := context.WithTimeout(ctx, s.conf.timeout())
	claimed, err := s.com.claim(cctx)
	cancel()
	if err != nil {
		return err
	}
	s.prog.done = make(chan struct{})
	s.lineSpout = lineSpout{names: s.conf.files, p: &s.prog, start: claimed.Low,
		lowMoved: func(low uint64) { s.low.Store(low) }}
	if err := s.lineSpout.Open(ctx, tc, out); err != nil {
		return err
	}
	s.out, s.ctx = out, ctx
	s.low.Store(s.lineSpout.low())
	s.stop = make(chan struct{})
	s.wg.Add(1)
	go s.commitLoop()
	return nil
}

// commitLoop commits about every commit interval until Close (or the end of the
// Open context, or a refusal).
func (s *clusterSpout) commitLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.conf.commitInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
			if s.commitNow(s.ctx) != nil && s.stale.Load() {
				return
			}
		}
	}
}

// commitNow commits the spout's progress; only one goroutine at a time calls it (the
// committer, then Close once the committer has stopped).
func (s *clusterSpout) commitNow(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, s.conf.timeout())
	defer cancel()
	p := &s.prog
	err := s.com.commit(cctx, spoutCounts{low: s.low.Load(), lines: p.lines.Load(), acked: p.acked.Load(),
		replays: p.replays.Load(), lost: p.lost.Load()})
	s.errMu.Lock()
	defer s.errMu.Unlock()
	switch {
	case errors.Is(err, ErrStaleSpout):
		s.stale.Store(true)
		s.errs = append(s.errs, err)
	case err != nil && !s.failing: // the first of a run of failures
		s.errs = append(s.errs, err)
	}
	s.failing = err != nil
	return err
}

// report hands the committer's errors to the collector (task goroutine only).
func (s *clusterSpout) report() {
	s.errMu.Lock()
	errs := s.errs
	s.errs = nil
	s.errMu.Unlock()
	for _, err := range errs {
		s.out.ReportError(err)
	}
}

// NextTuple emits as the line spout does, unless the spout is stale: another
// incarnation owns the input now.
func (s *clusterSpout) NextTuple() {
	s.report()
	if s.stale.Load() {
		return
	}
	s.lineSpout.NextTuple()
}

func (s *clusterSpout) Ack(msgID any) {
	s.lineSpout.Ack(msgID)
	s.report()
}

// Close stops the committer, commits once more (unless stale) and closes the files.
func (s *clusterSpout) Close() error {
	if s.stop == nil { // Open failed
		return s.lineSpout.Close()
	}
	close(s.stop)
	s.wg.Wait()
	var err error
	if !s.stale.Load() {
		// The Open context may have ended (a hard stop): the acked prefix is still
		// worth committing. Close may not use the collector: an error is returned
		// (the engine logs it).
		err = s.commitNow(context.WithoutCancel(s.ctx))
	}
	return errors.Join(err, s.lineSpout.Close())
}

// ClusterCounts is the outcome of a cluster run, read from its changelogs.
type ClusterCounts struct {
	// Counts maps every word to its occurrences, each occurrence counted once.
	Counts map[string]uint64
	// Words is the number of occurrences counted (the sum of Counts); Duplicates
	// the occurrences found again after their first record (written by a stale
	// task, or a write whose answer was lost): read, not counted.
	Words, Duplicates uint64
	// Messages is the number of changelog messages read.
	Messages uint64
}

// ReadClusterCounts reads the changelogs of run's count tasks (parallelism tasks, 0
// meaning 2, as ClusterOptions) and sums them, counting every occurrence once
// across all of them. Records under a task index beyond parallelism are an error:
// the run had more count tasks than said.
func ReadClusterCounts(ctx context.Context, js jetstream.JetStream, bucket, run string, parallelism int) (ClusterCounts, error) {
	res := ClusterCounts{Counts: map[string]uint64{}}
	if parallelism <= 0 {
		parallelism = 2
	}
	stream, err := js.Stream(ctx, changelogStream(bucket))
	if err != nil {
		return res, fmt.Errorf("wordcount: stream %s: %w", changelogStream(bucket), err)
	}
	filter := changelogRun(bucket, run) + ".*"
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return res, fmt.Errorf("wordcount: stream %s: %w", changelogStream(bucket), err)
	}
	if len(info.State.Subjects) == 0 {
		return res, nil
	}
	for subj := range info.State.Subjects {
		i, err := strconv.Atoi(strings.TrimPrefix(subj, changelogRun(bucket, run)+"."))
		if err != nil || i < 0 || i >= parallelism {
			return res, fmt.Errorf("wordcount: changelog subject %s: not one of %d count tasks", subj, parallelism)
		}
	}
	seen := NewOccurrences()
	_, err = readChangelog(ctx, stream, filter, 0, func(occ uint64, word string) {
		if !seen.Apply(occ, 0) {
			res.Duplicates++
			return
		}
		res.Counts[word]++
		res.Words++
	}, &res.Messages)
	return res, err
}
