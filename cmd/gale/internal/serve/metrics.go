package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/metrics"
)

// registerMetrics adds to reg what gale serve exports beside the topology's (ui
// adds it) and the ingest path's (IngestMetrics): the process's and the sink's.
func registerMetrics(reg *prometheus.Registry, s *Server) error {
	if err := metrics.RegisterProcess(reg); err != nil {
		return err
	}
	if err := registerSinkMetrics(reg, s.SinkHealth, s.SinkCounters); err != nil {
		return err
	}
	return registerSinkCounters(reg, s.SinkCounters)
}

// logCollector exports the log's own health beside the topology's metrics: the
// corruption met in its files, per file, so an alert can name the file.
type logCollector struct {
	log              *eventlog.Log
	reports, damaged *prometheus.Desc
}

func newLogCollector(l *eventlog.Log) *logCollector {
	return &logCollector{
		log: l,
		reports: prometheus.NewDesc("gale_eventlog_corruption_reports_total",
			"Corruption reports (checksum failures met by reads, compactions or the start's check) per damaged file of the log.",
			[]string{"file"}, nil),
		damaged: prometheus.NewDesc("gale_eventlog_damaged_files",
			"Files of the log found damaged; while above 0 the log takes no new events and /readyz is 503.", nil, nil),
	}
}

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.reports
	ch <- c.damaged
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	files := c.log.DamagedFiles()
	for _, f := range files {
		ch <- prometheus.MustNewConstMetric(c.reports, prometheus.CounterValue, float64(f.Reports), f.File)
	}
	ch <- prometheus.MustNewConstMetric(c.damaged, prometheus.GaugeValue, float64(len(files)))
}
