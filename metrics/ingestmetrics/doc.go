// Package ingestmetrics is the Prometheus side of gale serve's ingest path, beside
// the topology's own metrics (package metrics): HTTP requests by route and code
// (Metrics.Wrap), the Pebble log's group commits, counters and damaged files, the
// ingest service's statuses and answers (Metrics.Register), the JetStream log's
// lease and loss gauges (RegisterJSLog) and the sink's availability, outages and
// row counts (RegisterSink).
//
// Counters are read at scrape time from the counts the service, the log and the
// sink keep anyway (an atomic add per event), so exporting them costs the ingest
// path nothing per event but the HTTP middleware and one histogram observation per
// group commit.
//
// It is a package of its own, not part of metrics, so that metrics (which ui and
// any engine user import) does not bring in the log, the ingest service and the
// SQL drivers; and so that ingest and eventlog could import metrics one day
// without a cycle.
package ingestmetrics
