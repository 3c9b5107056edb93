package kafka

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var lagDesc = prometheus.NewDesc("gale_kafka_consumer_lag",
	"Records of a partition not yet known processed: high watermark minus the spout's committed offset.",
	[]string{"group", "topic", "partition"}, nil)

// Collector returns a Prometheus collector of the Source's consumer lag, one
// gauge gale_kafka_consumer_lag{group,topic,partition} per partition its tasks own.
func (s *Source) Collector() prometheus.Collector { return lagCollector{s} }

type lagCollector struct{ s *Source }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lagDesc }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.s.Lag() {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(l.Lag),
			c.s.cfg.group, l.Topic, strconv.Itoa(int(l.Partition)))
	}
}
