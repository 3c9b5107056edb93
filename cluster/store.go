package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/clock"
)

// Defaults of Config.
const (
	DefaultPrefix       = "gale"
	DefaultHeartbeatTTL = 3 * time.Second
	DefaultLeaseTTL     = 3 * time.Second
	DefaultOpTimeout    = 5 * time.Second
)

// Key names that are not topologies.
const (
	leaseKey = "scheduler" // in the lease bucket
	fenceKey = "_fence"    // in the assignments bucket: the scheduler term writing it
)

// Config says where a cluster keeps its state and how fast it notices a loss.
type Config struct {
	// Prefix starts the name of every bucket (Prefix-workers, Prefix-lease,
	// Prefix-topologies, Prefix-assignments), so several clusters or tests share
	// one NATS server. Letters, digits, '-' and '_'; DefaultPrefix if empty.
	Prefix string
	// Replicas is the number of copies JetStream keeps of each bucket: 1 on a
	// single node, 3 on a three-node cluster (each bucket survives the loss of one
	// node). 0 takes the existing buckets' (1 when creating them).
	Replicas int
	// HeartbeatTTL is how long a worker not heard from stays live: the workers
	// bucket's TTL, enforced by the server. Workers beat every HeartbeatTTL/3. 0
	// takes the existing bucket's (DefaultHeartbeatTTL when creating it); at least
	// 1 s (the server's minimum for the markers that announce an expiry).
	HeartbeatTTL time.Duration
	// LeaseTTL is how long a scheduler that stopped renewing keeps its lease: the
	// lease bucket's TTL. The holder renews every LeaseTTL/3. 0 takes the existing
	// bucket's (DefaultLeaseTTL when creating it); at least 1 s.
	LeaseTTL time.Duration
	// Storage is the buckets' storage: jetstream.FileStorage (the zero value) or
	// MemoryStorage.
	Storage jetstream.StorageType
	// OpTimeout bounds each KV operation (DefaultOpTimeout if 0).
	OpTimeout time.Duration
	// Clock decides when to beat, renew and give up a lease (clock.Real() if nil).
	// The expiry of keys is the server's, on its own clock.
	Clock clock.Clock
	// NoCreate binds the buckets only if they exist: a missing one is a
	// *NoClusterError. For processes that look at or ask a cluster (gale submit,
	// kill, cluster status): buckets they made would have default TTLs that the
	// workers, joining later with their own, would then disagree with.
	NoCreate bool
}

// NoClusterError is Open's error when Config.NoCreate is set and a bucket of the
// cluster does not exist.
type NoClusterError struct {
	Prefix string
	Bucket string
}

func (e *NoClusterError) Error() string {
	return fmt.Sprintf("cluster: no cluster with prefix %q: bucket %s does not exist", e.Prefix, e.Bucket)
}

// Store is a cluster's state in JetStream KV: the buckets, bound. It is safe for
// concurrent use.
type Store struct {
	cfg         Config
	js          jetstream.JetStream
	workers     jetstream.KeyValue
	lease       jetstream.KeyValue
	topologies  jetstream.KeyValue
	assignments jetstream.KeyValue
}

// ErrConfig is wrapped by every error in a Config, or between a Config and the
// buckets it found.
var ErrConfig = errors.New("cluster: bad configuration")

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// nameRE is what a topology or worker name may be: a KV key without dots or
// slashes, starting with a letter or digit (keys starting with '_' are gale's).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_=-]*$`)

// checkName reports what is wrong with a topology or worker name.
func checkName(what, name string) error {
	if !nameRE.MatchString(name) || len(name) > 200 {
		return fmt.Errorf("%w: %s name %q: use letters, digits, '-', '_' and '=' (starting with a letter or digit, at most 200)", ErrConfig, what, name)
	}
	return nil
}

// CheckTopologyName reports what is wrong with a topology name: the cluster's
// rule, for a name that comes from elsewhere than the registry (a topology
// file's name:).
func CheckTopologyName(name string) error { return checkName("topology", name) }

// Open binds the cluster's buckets on js, creating those missing (unless
// cfg.NoCreate). A bucket that exists keeps its configuration: a Config that asks
// for another TTL or replica count is an error naming both (every member of a
// cluster must agree); zero fields take the buckets'.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("%w: prefix %q: use letters, digits, '-' and '_'", ErrConfig, cfg.Prefix)
	}
	if cfg.Replicas < 0 || cfg.Replicas > 5 {
		return nil, fmt.Errorf("%w: %d replicas: JetStream keeps 1 to 5", ErrConfig, cfg.Replicas)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"heartbeat TTL", cfg.HeartbeatTTL}, {"lease TTL", cfg.LeaseTTL}} {
		if d.v != 0 && d.v < time.Second {
			return nil, fmt.Errorf("%w: %s %v: at least 1s (the server's minimum for expiry markers)", ErrConfig, d.name, d.v)
		}
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	s := &Store{js: js}
	var err error
	// Heartbeats and the lease expire: their buckets have a TTL and markers, so that
	// a watcher sees an expiry as a delete.
	if s.workers, cfg.HeartbeatTTL, err = bind(ctx, js, cfg, "workers", "gale workers' heartbeats", cfg.HeartbeatTTL, DefaultHeartbeatTTL); err != nil {
		return nil, err
	}
	if s.lease, cfg.LeaseTTL, err = bind(ctx, js, cfg, "lease", "gale scheduler lease", cfg.LeaseTTL, DefaultLeaseTTL); err != nil {
		return nil, err
	}
	if s.topologies, _, err = bind(ctx, js, cfg, "topologies", "gale topologies as submitted (requests)", 0, 0); err != nil {
		return nil, err
	}
	if s.assignments, _, err = bind(ctx, js, cfg, "assignments", "gale assignments, written by the scheduler", 0, 0); err != nil {
		return nil, err
	}
	s.cfg = cfg
	return s, nil
}

// bind binds bucket Prefix-name, creating it with ttl (def if 0; none if def is 0
// too) when missing, and returns the bucket's TTL.
func bind(ctx context.Context, js jetstream.JetStream, cfg Config, name, desc string, ttl, def time.Duration) (jetstream.KeyValue, time.Duration, error) {
	bucket := cfg.Prefix + "-" + name
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && cfg.NoCreate {
		return nil, 0, &NoClusterError{Prefix: cfg.Prefix, Bucket: bucket}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kc := jetstream.KeyValueConfig{Bucket: bucket, Description: desc, Storage: cfg.Storage, Replicas: max(cfg.Replicas, 1)}
		if def > 0 {
			kc.TTL = cmpOr(ttl, def)
			kc.LimitMarkerTTL = kc.TTL
		}
		kv, err = js.CreateKeyValue(ctx, kc)
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket) // created meanwhile by another member
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: bucket %s: %w", bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: bucket %s: %w", bucket, err)
	}
	have := st.Config()
	if cfg.Replicas != 0 && have.Replicas != cfg.Replicas {
		return nil, 0, fmt.Errorf("%w: bucket %s has %d replicas, this process asks for %d", ErrConfig, bucket, have.Replicas, cfg.Replicas)
	}
	if def > 0 {
		if ttl != 0 && have.TTL != ttl {
			return nil, 0, fmt.Errorf("%w: bucket %s has a TTL of %v, this process asks for %v (every member must use the same)", ErrConfig, bucket, have.TTL, ttl)
		}
		if have.TTL <= 0 || have.LimitMarkerTTL <= 0 {
			return nil, 0, fmt.Errorf("%w: bucket %s has no TTL or no expiry markers: not made by gale", ErrConfig, bucket)
		}
	}
	return kv, have.TTL, nil
}

func cmpOr(v, def time.Duration) time.Duration {
	if v != 0 {
		return v
	}
	return def
}

// Config returns the configuration in use, the buckets' TTLs filled in.
func (s *Store) Config() Config { return s.cfg }

// Buckets names the four buckets: workers, lease, topologies, assignments.
func (s *Store) Buckets() [4]string {
	return [4]string{s.workers.Bucket(), s.lease.Bucket(), s.topologies.Bucket(), s.assignments.Bucket()}
}

// op bounds one KV operation.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.OpTimeout)
}

// isWrongLastSeq reports whether err is JetStream's refusal of a conditional write
// (code 10071, or 10164 on a replicated stream).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// isGone reports whether an entry is a delete, a purge or an expiry marker.
func isGone(e jetstream.KeyValueEntry) bool {
	return e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge
}

// watch starts a watch of keys (">" for all) in kv, living as long as ctx (nats.go
// unsubscribes when the context a watch was made with ends, and holds a goroutine
// until then); stop ends it and waits for its channel to close. Making it takes
// at most OpTimeout: a request lost with a JetStream node would otherwise wait for
// ever, since the context cannot carry a deadline.
func (s *Store) watch(ctx context.Context, kv jetstream.KeyValue, keys string) (w jetstream.KeyWatcher, stop func(), err error) {
	wctx, cancel := context.WithCancel(ctx)
	late := time.AfterFunc(s.cfg.OpTimeout, cancel)
	w, err = kv.Watch(wctx, keys)
	stop = func() {
		cancel()
		// nats.go's callback blocks on a full channel, holding the lock its close
		// needs: drain until closed.
		_ = w.Stop()
		for range w.Updates() {
		}
	}
	if !late.Stop() {
		if err == nil {
			stop()
		}
		return nil, nil, fmt.Errorf("cluster: watch %s %s: no answer within %v", kv.Bucket(), keys, s.cfg.OpTimeout)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return w, stop, nil
}
