// Package ui serves what an operator looks at, from the process that runs the
// topology (no separate install):
//
//   - GET /            the web page: the topology as a graph, Storm's spout and bolt
//     tables for the last 10 minutes or all time, charts of throughput, complete
//     latency and capacity, and a message page that shows a tuple tree;
//   - GET /metrics     Prometheus metrics (package metrics);
//   - GET /api/...     the JSON the page reads: topology, stats?window=10m|all,
//     history, trees?kind=failed|timed_out|sampled, trees/{root id or message id},
//     and with Options.Ingest (gale serve) ingest and events/{event id}.
//
// Options.Ingest is the small interface through which a process with an ingest path
// in front of its topology shows it (statuses, rates, fsync latency, dead letters,
// events by id); the package knows nothing of the ingest service, so a topology fed
// otherwise (gale wordcount --ui) leaves it nil and the page shows no such section.
//
// It is read-only: every route is GET. With Options.Token set, every request must
// carry it ("Authorization: Bearer TOKEN", or ?token=TOKEN from a browser).
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no CDN, no build
// step), and uses relative URLs only, so the handler can be mounted under a prefix.
package ui
