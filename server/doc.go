// Package server is `gale serve` as a library: an HTTP front door that answers
// every event honestly, over a durable log, feeding a pipeline of yours that
// writes to an idempotent SQL sink. The gale serve command is flags over it.
//
//	POST /v1/events ──▶ ingest.Service ──▶ log (Pebble in DataDir/log, or a JetStream stream)
//	                         ▲                  │ log spout: one tracked tree per record
//	                         │ statuses         ▼
//	                         └──────────── Pipeline's topology ──▶ sink (SQLite or PostgreSQL)
//
// # The model
//
// An event is answered with how far it got: ACCEPTED (in memory), PERSISTED (in
// the log, fsynced or stored by a quorum: the answer's durability says which),
// PROCESSED (its tuple tree completed, so the sink committed its rows),
// FAILED_RETRYABLE (not taken in: send it again as is) or FAILED_FINAL (invalid,
// or dead-lettered after its attempts). The log is the source of truth: the log
// spout reads it from the committed offset, each record the root of a tree
// (message id: its seq); a failed or timed-out tree is replayed after a backoff,
// and the committed offset passes only finished records, so a restart resumes
// where it stopped. Delivery to the pipeline is at least once; the sink's
// idempotent writes (insert once per event id, versioned upserts) make the
// effects exactly once. While the sink's database does not take writes (full,
// damaged, unreachable), the spout emits nothing and no event is charged for it.
// Package ingest holds the service and the spout; package sink the writes.
//
// # Pipelines
//
// What runs after the log spout is a Pipeline: a name, the statements that create
// its tables (Schema), and Build, which builds its topology from Parts (the log
// spout's factory, the sink's database, counters and health, the topology's
// configuration) and may return the pipeline's own Prometheus collectors.
// Options.Pipeline is the one a server runs (required). gale's
// own are events.Pipeline (every event to a table, the newest version per key to
// another) and orders.Pipeline (packages pipelines/events and pipelines/orders);
// package server imports neither. A program that offers a choice keeps its
// pipelines in a Pipelines registry: gale serve --pipeline, gale sink rebuild
// --pipeline and gale worker look them up there.
//
// # One process or a cluster
//
// Without Options.Cluster the whole pipeline runs in this process. With it
// (gale serve --nats) this process submits the pipeline to a gale cluster under
// the pipeline's name and runs, as a dedicated worker, the tasks pinned to it:
// the log spout, which needs the log, the components of Pipeline.Pinned and,
// with an SQLite sink (a file of this machine), those of
// Pipeline.SinkComponents. The other tasks run on the cluster's workers, which
// build the pipeline from the same registry (Pipelines.RegisterWorkers): every
// process that runs a pipeline must register it under the same name. Answers and
// statuses are the same as in one process; a worker lost mid-tree charges its
// trees an attempt.
//
// # The rest
//
// Options also set the log (Options.JetStream: a JetStream stream shared by
// several serve processes, one of which reads it at a time), who may call the
// API (NetOptions: tokens and scopes, TLS and mTLS, Host and Origin checks, rate
// limits), and the web UI (/ui/) and Prometheus metrics (/metrics) served beside
// the API. Server.Shutdown answers every request it took in, drains the
// topology and syncs before it closes the log and the sink; Server.Reload
// re-reads the tokens and certificates.
package server
