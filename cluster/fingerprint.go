package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/topology"
)

// Fingerprint names what every process running a part of a topology must agree on.
// Go cannot ship code the way Storm ships a jar: each worker runs the topology
// compiled into its own binary, so before it takes an assignment a worker compares
// its build's fingerprint of the topology with the submitter's.
type Fingerprint struct {
	// Topology is the name the topology is registered under.
	Topology string `json:"topology"`
	// Shape is a hash (SHA-256, 32 hex digits) of what decides task ids, routing and
	// the protocol: every component's id, kind, parallelism and tick interval, its
	// streams and their fields, its inputs and their groupings, and the config
	// settings that both ends of an edge or of an acker must share.
	Shape string `json:"shape"`
	// Codec is the codec version of the build (codec.Version).
	Codec int `json:"codec"`
	// Source is, for a topology submitted as a file, a hash of its resolved
	// document's digest and its resources' (Source.Fingerprint): two submits of
	// different files or resources under one name differ even where their shapes
	// do not. "" for a registered topology.
	Source string `json:"source,omitempty"`
	// Module is the build's main module version ("(devel)" for a build from a
	// working tree), shown beside the fingerprint; it is not compared, so that a
	// rolling upgrade of unrelated code does not stop a topology.
	Module string `json:"module"`
}

// String is the short form shown in statuses and errors.
func (f Fingerprint) String() string {
	src := ""
	if f.Source != "" {
		src = " source " + f.Source
	}
	return fmt.Sprintf("%s shape %s%s codec v%d module %s", f.Topology, f.Shape, src, f.Codec, f.Module)
}

// ErrFingerprint is wrapped by every fingerprint mismatch.
var ErrFingerprint = errors.New("cluster: topology fingerprint mismatch")

// Check reports whether a worker whose build has fingerprint have can run a part of
// a topology submitted as want: the names, shapes, sources and codec versions must
// be equal (module versions are not compared: a rolling upgrade of unrelated code
// does not stop a topology).
// The error names each difference.
func Check(want, have Fingerprint) error {
	var diff []string
	if want.Topology != have.Topology {
		diff = append(diff, fmt.Sprintf("topology %q, this build has %q", want.Topology, have.Topology))
	}
	if want.Codec != have.Codec {
		diff = append(diff, fmt.Sprintf("codec v%d, this build has v%d", want.Codec, have.Codec))
	}
	if want.Source != have.Source {
		diff = append(diff, fmt.Sprintf("source %s, this worker has %s (another topology file or resources)", orNone(want.Source), orNone(have.Source)))
	}
	if want.Shape != have.Shape {
		diff = append(diff, fmt.Sprintf("shape %s, this build has %s (components, streams, groupings, parallelism or config differ: submit and workers must be built from the same topology code and flags)", want.Shape, have.Shape))
	}
	if len(diff) == 0 {
		return nil
	}
	return fmt.Errorf("%w: submitted %s (module %s): %s", ErrFingerprint, want.Topology, want.Module, strings.Join(diff, "; "))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// FingerprintOf returns the fingerprint of topology topo, registered as name, run
// with cfg, in this build.
func FingerprintOf(name string, topo *topology.Topology, cfg topology.Config) Fingerprint {
	sum := sha256.Sum256([]byte(describe(topo, cfg)))
	return Fingerprint{Topology: name, Shape: hex.EncodeToString(sum[:16]), Codec: codec.Version, Module: moduleVersion()}
}

// describe is the canonical text the shape hashes: one line per fact, in declaration
// order (which decides task ids), streams sorted by id. Changing this text changes
// every fingerprint: a release that does so cannot run beside the one before it.
func describe(topo *topology.Topology, cfg topology.Config) string {
	var b strings.Builder
	b.WriteString("gale topology shape 1\n")
	// The settings both sides of an edge or an acker compute alike: the number of
	// ackers numbers the tasks; the timeout sizes the acker's buckets against the
	// spout's; queue and batch sizes are the credit windows a receiver grants.
	fmt.Fprintf(&b, "ackers %d timeout %v timeouts-off %t pending %d queue %d batch %d flush %v\n",
		cfg.Ackers, cfg.MessageTimeout, cfg.DisableTimeouts, cfg.MaxSpoutPending, cfg.ReceiveQueue, cfg.BatchSize, cfg.FlushInterval)
	for _, c := range topo.Components {
		kind := "bolt"
		switch {
		case c.Spout != nil:
			kind = "spout"
		case c.Basic != nil:
			kind = "basic-bolt"
		}
		fmt.Fprintf(&b, "component %q %s parallelism %d tick %v\n", c.ID, kind, c.Parallelism, c.TickEvery)
		ids := make([]string, 0, len(c.Streams))
		for id := range c.Streams {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			s := c.Streams[id]
			var fields []string
			if s.Source.Fields != nil {
				fields = s.Source.Fields.Names()
			}
			fmt.Fprintf(&b, " stream %q direct %t fields %q\n", id, s.Direct, fields)
		}
		for _, in := range c.Inputs {
			fmt.Fprintf(&b, " input %q %q %s fields %q%s\n", in.Component, in.Stream, in.Grouping.Kind, in.Grouping.Fields, customType(in.Grouping))
		}
	}
	return b.String()
}

// customType names a custom grouping's type (package path and name), which routes
// the edge: two builds whose groupings are different types must not match. Its code
// is not hashed: two builds of one type name are trusted to route alike.
func customType(g topology.Grouping) string {
	if g.Kind != topology.CustomKind || g.Custom == nil {
		return ""
	}
	t := reflect.TypeOf(g.Custom())
	if t == nil {
		return ` custom "<nil>"`
	}
	stars := ""
	for t.Kind() == reflect.Pointer {
		stars += "*"
		t = t.Elem()
	}
	name := t.String()
	if t.Name() != "" {
		name = t.PkgPath() + "." + t.Name()
	}
	return " custom " + strconv.Quote(stars+name)
}

func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return bi.Main.Version
}
