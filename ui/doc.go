// Package ui serves what an operator looks at, from the process that runs the
// topology (no separate install):
//
//   - GET /            the web page: the topology as a graph, Storm's spout and bolt
//     tables for the last 10 minutes or all time, charts of throughput, complete
//     latency and capacity, and a message page that shows a tuple tree;
//   - GET /metrics     Prometheus metrics (package metrics);
//   - GET /api/...     the JSON the page reads: topology, stats?window=10m|all,
//     history, trees?kind=failed|timed_out|sampled, trees/{root id or message id},
//     with Options.Ingest (gale serve) ingest and events/{event id}, and with
//     Options.Cluster (gale worker) cluster;
//   - POST /api/cluster/{kill|deactivate|activate|rebalance}[?workers=N]: Storm's
//     actions, on a worker's UI started with a token.
//
// Options.Ingest is the small interface through which a process with an ingest path
// in front of its topology shows it (statuses, rates, fsync latency, dead letters,
// events by id); the package knows nothing of the ingest service, so a topology fed
// otherwise (gale wordcount --ui) leaves it nil and the page shows no such section.
//
// # A topology across processes
//
// The stats (/api/stats, the charts) are every process's: the UI asks its runtime
// for Runtime.ClusterStats, which gathers the counters of every other host of the
// topology by message, waiting at most Options.StatsTimeout (1 s). If a process
// does not answer (gone, cut off), /api/stats falls back to this process's tasks,
// counted since it started, with "partial": true and a note the page shows; the
// charts skip that sample rather than draw a rate from it. A process alone answers
// at once. /metrics stays this process's own tasks, so that Prometheus, scraping
// every process, sums them; Options.ConstLabels (gale worker: worker=NAME) names
// the process on every metric. Tuple trees are kept whole by the process that runs
// their spout (the others forward what their tasks emit, ack and fail to it):
// /api/trees and /api/trees/{id} ask those processes (Runtime.ClusterTrees and
// ClusterTree), within the same StatsTimeout, and say "incomplete" with the list
// if one does not answer.
//
// Options.Cluster is the small interface through which gale worker shows the
// cluster the topology runs on; the package knows nothing of NATS or the
// scheduler. With it the page has a "Cluster" section, from GET /api/cluster
// (ClusterView): the workers table (name, host, pid, uptime, heartbeat age, slots,
// the tasks of this topology each is assigned, the generation of it each runs,
// the other topologies it runs, its refusal), the scheduler (the lease holder),
// the topology's state and generation, and each component's tasks with their
// worker, which the spout and bolt tables also show in a Worker column. A worker
// runs one generation of a topology after another: SetRuntime swaps the runtime
// the UI reads (with a new History: counters start from zero), and Run keeps the
// History of whichever it reads. Between generations, or when the topology is
// deactivated, killed or not assigned to this worker, the UI has no runtime: the
// topology view says "idle", /api/stats answers 503, and the page shows the
// cluster section alone, and keeps refreshing until a generation starts here.
//
// The UI is read-only but for the actions: every route is GET, except POST
// /api/cluster/{action}, which calls Cluster.Act (the scheduler's answer is the
// reply; 409 if it refuses, with its reason). With Options.Token set, every request
// must carry it ("Authorization: Bearer TOKEN", or ?token=TOKEN from a browser),
// and the token then also allows the actions, as the admin scope would; without a
// token the actions answer 403 saying they need --ui-token.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no CDN, no build
// step), and uses relative URLs only, so the handler can be mounted under a prefix.
// It passes its own ?topology= on to every API call, so that a worker running
// several topologies shows the one asked for.
package ui
