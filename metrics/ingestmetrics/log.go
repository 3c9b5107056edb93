package ingestmetrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/eventlog/jslog"
)

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

// RegisterJSLog adds the JetStream log's lease and loss gauges to reg (gale serve
// --log jetstream): which process reads the log, how often its offset writes were
// fenced off, and whether acknowledged records are missing.
func RegisterJSLog(reg prometheus.Registerer, l *jslog.Log) error {
	for _, m := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gale_jslog_spout_lease_held",
			Help: "1 while this serve process holds the log spout's lease (it reads the log), else 0."},
			func() float64 {
				if _, held := l.Holding(); held {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gale_jslog_offset_writes_fenced_total",
			Help: "Committed-offset writes of this process refused because another serve process took the log spout's lease."},
			func() float64 { return float64(l.Fenced()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gale_jslog_high_water_mark",
			Help: "The highest stream seq known stored, as this process last wrote or read it."},
			func() float64 { return float64(l.Mark()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gale_jslog_gap",
			Help: "1 once the log spout met acknowledged records missing from the stream (see /readyz, gale log salvage --log jetstream), else 0."},
			func() float64 {
				if l.Damaged() != nil {
					return 1
				}
				return 0
			}),
	} {
		if err := reg.Register(m); err != nil {
			return fmt.Errorf("ingestmetrics: registering the JetStream log's metrics: %w", err)
		}
	}
	return nil
}
