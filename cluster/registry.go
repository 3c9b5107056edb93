package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
)

// Env is what a registered topology is built with on a worker (or in the process
// that submits it, to compute its fingerprint): the submit arguments, and the
// cluster's connection for the state its tasks keep in JetStream.
type Env struct {
	// Topology is the name it was submitted under; Args its flags as submitted.
	Topology string
	Args     []string
	// Worker names the process building it ("" in the submitter).
	Worker string
	// Generation is the assignment's generation the worker builds it for (0 in the
	// submitter): state a task claims (a spout's offsets) can refuse an older
	// generation's claim after a newer one's.
	Generation uint64
	// Conn and JS reach the cluster's NATS; Prefix is the cluster's (Config.Prefix),
	// to name the topology's own buckets and streams after.
	Conn   *nats.Conn
	JS     jetstream.JetStream
	Prefix string
	// Components are the component classes of the binary (app.WithComponent),
	// for a factory that builds its topology from classes; nil outside package
	// app.
	Components *component.Registry
	// Source is set for a topology submitted as a file (gale submit --file): then
	// Document is its resolved document (fetched by the worker, checked against
	// Source.Digest) and the registry's file factory builds it (SetFileFactory).
	// Resources is the directory its resources (gale submit --resources DIR) are
	// unpacked in on this worker, an absolute path ("" without resources, and in
	// the submitter): shell components run there, as Storm runs them in the jar's
	// resources/.
	Source    *Source
	Document  []byte
	Resources string
}

// Deployment is a registered topology built for one run: what the engine starts.
// Building it must not touch NATS or files; its tasks do that in Open and Prepare.
type Deployment struct {
	Topology *topology.Topology
	Config   topology.Config
	// Options are further engine options (the worker adds its transport and
	// assignment).
	Options []engine.Option
	// Close, if set, is called once the engine has stopped.
	Close func() error
}

// Factory builds a registered topology from its submit arguments. A bad argument
// is an error naming it.
type Factory func(ctx context.Context, env Env) (*Deployment, error)

// ErrUnknownTopology: no topology of that name is registered in this build.
var ErrUnknownTopology = errors.New("cluster: topology not in this build")

// Registry holds the topologies compiled into a binary, by name: Go cannot ship
// code the way Storm ships a jar, so a worker runs what its own build registered,
// after checking that its fingerprint is the submitter's. Safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	m     map[string]Factory
	files Factory
}

// SetFileFactory sets what builds topologies submitted as files (Env.Source set;
// FileFactory), whatever their name: nil, the default, refuses them.
func (r *Registry) SetFileFactory(f Factory) {
	r.mu.Lock()
	r.files = f
	r.mu.Unlock()
}

// Register adds topology name. A name is letters, digits, '-' and '_' (it names
// subjects and keys); registering one twice is an error.
func (r *Registry) Register(name string, f Factory) error {
	if err := checkName("topology", name); err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("%w: topology %q registered without a factory", ErrConfig, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]Factory{}
	}
	if _, ok := r.m[name]; ok {
		return fmt.Errorf("%w: topology %q registered twice", ErrConfig, name)
	}
	r.m[name] = f
	return nil
}

// Names lists the registered topologies, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Build builds topology env.Topology with env.Args, or, if env.Source is set, the
// topology file env.Document with the file factory. An unregistered name (or a
// file without a file factory) is an error wrapping ErrUnknownTopology that lists
// what the build has.
func (r *Registry) Build(ctx context.Context, env Env) (*Deployment, error) {
	r.mu.Lock()
	f := r.m[env.Topology]
	if env.Source != nil {
		f = r.files
	}
	r.mu.Unlock()
	if f == nil && env.Source != nil {
		return nil, fmt.Errorf("%w: %q is a topology file (%s), and this process does not build topology files", ErrUnknownTopology, env.Topology, env.Source.File)
	}
	if f == nil {
		return nil, fmt.Errorf("%w: %q (this build has: %v)", ErrUnknownTopology, env.Topology, r.Names())
	}
	d, err := build(ctx, f, env)
	if err != nil {
		return nil, fmt.Errorf("topology %q: %w", env.Topology, err)
	}
	if d == nil || d.Topology == nil {
		return nil, fmt.Errorf("%w: topology %q: its factory returned no topology", ErrConfig, env.Topology)
	}
	return d, nil
}

// build calls f, turning a panic into an error: a bad factory must not take down a
// worker and every topology it runs.
func build(ctx context.Context, f Factory, env Env) (d *Deployment, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = nil, fmt.Errorf("its factory panicked: %v", p)
		}
	}()
	return f(ctx, env)
}
