// Package cluster runs one topology across gale processes (workers) on NATS, as
// Storm runs one across supervisors and workers, without a home-made membership or
// consensus: NATS carries the frames and JetStream's key-value store holds the
// cluster's state.
//
// # Fingerprints
//
// Go cannot ship code the way Storm ships a jar: a topology is Go code compiled into
// each binary and registered by name. Before a worker runs its part of a submitted
// topology it compares fingerprints (FingerprintOf, Check): the shape (components,
// streams, fields, groupings, parallelism, and the config both ends of an edge or an
// acker must share) and the codec version must be equal, or the worker refuses and
// says which differs. The build's module version is shown beside them, not compared,
// so a rolling upgrade of unrelated code does not stop a topology.
//
// # Placement
//
// Which worker runs which task is decided by package cluster/placement, a pure
// function of the live workers, the topology and the current assignment.
package cluster
