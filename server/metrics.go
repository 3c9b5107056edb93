package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/metrics/ingestmetrics"
)

// registerMetrics adds to reg what gale serve exports beside the topology's (ui
// adds it) and the ingest path's (ingestmetrics.Metrics): the process's, the
// sink's and, on JetStream, the log's lease and loss gauges.
func registerMetrics(reg *prometheus.Registry, s *Server) error {
	if err := metrics.RegisterProcess(reg); err != nil {
		return err
	}
	if err := ingestmetrics.RegisterSink(reg, s.SinkHealth, s.SinkCounters); err != nil {
		return err
	}
	if s.JSLog != nil {
		return ingestmetrics.RegisterJSLog(reg, s.JSLog)
	}
	return nil
}
