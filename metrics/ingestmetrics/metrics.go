package ingestmetrics

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
)

// Metrics are gale serve's metrics of the ingest path: HTTP requests by route and
// code, the log's group commit histograms, and (Register) the service's and the
// log's counters read at scrape time. gale serve uses them, and gale bench ingest
// puts them around its bare ingest service to measure what they cost.
type Metrics struct {
	reg     prometheus.Registerer
	commits *commitMetrics
	http    *httpMetrics
}

// New registers the HTTP and group commit metrics in reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{reg: reg, commits: newCommitMetrics()}
	for _, c := range []prometheus.Collector{m.commits.records, m.commits.sync} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ingestmetrics: registering the group commit metrics: %w", err)
		}
	}
	var err error
	if m.http, err = newHTTPMetrics(reg); err != nil {
		return nil, fmt.Errorf("ingestmetrics: registering the HTTP metrics: %w", err)
	}
	return m, nil
}

// OnCommit is the log's eventlog.Options.OnCommit.
func (m *Metrics) OnCommit(c eventlog.Commit) { m.commits.observe(c) }

// Wrap counts the requests h answers.
func (m *Metrics) Wrap(h http.Handler) http.Handler { return m.http.wrap(h) }

// Register adds the counters of svc and of its log l, and the log's health. l is
// nil when the service's log is not Pebble (gale serve --log jetstream): then only
// what the service knows is exported (durable and committed seqs, lag, failed),
// not the group commits, dedupe ids or damaged files, which are Pebble's.
func (m *Metrics) Register(svc *ingest.Service, l *eventlog.Log) error {
	cs := []prometheus.Collector{newIngestCollector(svc, l)}
	if l != nil {
		cs = append(cs, newLogCollector(l))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("ingestmetrics: registering the log's and ingest metrics: %w", err)
		}
	}
	return nil
}
