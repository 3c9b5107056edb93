package component

import "github.com/nats-io/nats.go/jetstream"

// Cluster is the gale cluster a topology file is built for (Spec.Cluster): nil
// when the file runs in one process (gale run), whose tasks may keep their state
// in memory. A class whose tasks keep state (a spout's committed offsets, a
// count's changelog) keeps it in the cluster's JetStream instead, so that a task
// started again on another worker carries on. Building must not touch the
// cluster: the tasks bind it in Open and Prepare.
type Cluster struct {
	// Topology is the name the file was submitted under: state is kept under it.
	Topology string
	// JS reaches the cluster's JetStream; nil in the process that submits the file
	// (it builds the topology for its checks and fingerprint, and runs no task).
	JS jetstream.JetStream
	// Prefix is the cluster's (its buckets and streams are named after it);
	// Generation the assignment's the worker builds for (0 in the submitter), so
	// that state claimed by a newer generation refuses an older one.
	Prefix     string
	Generation uint64
}
