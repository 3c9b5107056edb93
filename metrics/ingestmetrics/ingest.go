package ingestmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
)

// CommitSizeBuckets are the bounds of gale_eventlog_group_commit_records: powers
// of two up to the log's default MaxBatch.
var CommitSizeBuckets = prometheus.ExponentialBuckets(1, 2, 14)

// SyncBuckets are the bounds, in seconds, of gale_eventlog_sync_duration_seconds:
// 100 µs to 2.5 s.
var SyncBuckets = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5}

// commitMetrics are the log's per-group-commit histograms, fed by
// eventlog.Options.OnCommit from the log's syncer (one observe each per group).
type commitMetrics struct {
	records, sync prometheus.Histogram
}

func newCommitMetrics() *commitMetrics {
	return &commitMetrics{
		records: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gale_eventlog_group_commit_records",
			Help: "Records per group commit (one synced batch of the log).", Buckets: CommitSizeBuckets}),
		sync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gale_eventlog_sync_duration_seconds",
			Help:    "Time from a group commit's write to its fsyncs (WAL and mark file) returning: what a PERSISTED answer waits for.",
			Buckets: SyncBuckets}),
	}
}

func (m *commitMetrics) observe(c eventlog.Commit) {
	m.records.Observe(float64(c.Records))
	m.sync.Observe(c.Elapsed.Seconds())
}

// ingestCollector reads the ingest service's and the log's counters at scrape
// time: exact counts, nothing done per event for them but an atomic add.
type ingestCollector struct {
	svc *ingest.Service
	log *eventlog.Log // nil: not Pebble
	d   struct {
		events, attemptFailures, answers, duplicates, deadLetters, held, waiters *prometheus.Desc
		commits, records, bytes, syncFailures, failed, ids                       *prometheus.Desc
		durable, committed, lag                                                  *prometheus.Desc
	}
}

func newIngestCollector(svc *ingest.Service, l *eventlog.Log) *ingestCollector {
	c := &ingestCollector{svc: svc, log: l}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c.d.events = d("gale_ingest_events_total", "Events that reached each status, per source: ACCEPTED (taken in), PERSISTED (durable; again after a :retry), PROCESSED (tree complete), FAILED_RETRYABLE (append failed or refused), FAILED_FINAL (dead-lettered). Sources past the first 100 are counted as _other.", "source", "status")
	c.d.attemptFailures = d("gale_ingest_attempt_failures_total", "Failed or timed-out attempts that are retried, per source.", "source")
	c.d.answers = d("gale_ingest_answers_total", "Answers given per event, by ack level (asked, or the source's default) and the status answered.", "level", "status")
	c.d.duplicates = d("gale_ingest_duplicates_total", "Events answered as duplicates of a known event_id (nothing written).")
	c.d.deadLetters = d("gale_ingest_dead_letters", "Dead letters in the log now (FAILED_FINAL after max attempts, until resubmitted).")
	c.d.held = d("gale_ingest_held_events", "Events in progress held in memory.")
	c.d.waiters = d("gale_ingest_waiting_answers", "Answers waiting for a status (ack=processed).")
	c.d.commits = d("gale_eventlog_group_commits_total", "Group commits: synced batches of the log.")
	c.d.records = d("gale_eventlog_records_total", "Records written by group commits.")
	c.d.bytes = d("gale_eventlog_record_bytes_total", "Encoded bytes of the records written by group commits.")
	c.d.syncFailures = d("gale_eventlog_sync_failures_total", "Group commits whose write or fsync failed; the first makes the log fail (sticky) and later appends are refused.")
	c.d.failed = d("gale_eventlog_failed", "1 once a write or fsync of the log failed (sticky until a restart): nothing is PERSISTED and /readyz is 503.")
	c.d.ids = d("gale_eventlog_dedupe_ids", "Event ids in the dedupe index: the ids remembered for the dedupe window.")
	c.d.durable = d("gale_eventlog_durable_seq", "Highest durable sequence number.")
	c.d.committed = d("gale_eventlog_committed_seq", "The committed offset: the next sequence number to process (synced; every one below is finished).")
	c.d.lag = d("gale_eventlog_committed_lag", "Durable records at or above the committed offset: durable seq minus committed seq plus 1, 0 when every durable record is finished.")
	return c
}

func (c *ingestCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.d.events, c.d.attemptFailures, c.d.answers, c.d.duplicates, c.d.deadLetters,
		c.d.held, c.d.waiters, c.d.commits, c.d.records, c.d.bytes, c.d.syncFailures, c.d.failed, c.d.ids,
		c.d.durable, c.d.committed, c.d.lag} {
		ch <- d
	}
}

func (c *ingestCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	n := c.svc.Counts()
	for src, sc := range n.Events {
		for _, st := range ingest.Statuses {
			counter(c.d.events, float64(sc.ByStatus[st]), src, st.String())
		}
		counter(c.d.attemptFailures, float64(sc.AttemptFailures), src)
	}
	for _, a := range n.Answers {
		counter(c.d.answers, float64(a.N), a.Level.String(), a.Status.String())
	}
	counter(c.d.duplicates, float64(n.Duplicates))
	if dl, err := c.svc.DeadLetterCount(); err == nil { // a failed read: no value rather than a wrong one
		gauge(c.d.deadLetters, float64(dl))
	}
	ss := c.svc.Stats()
	gauge(c.d.held, float64(ss.Held))
	gauge(c.d.waiters, float64(ss.Waiters))
	if c.log == nil {
		// Not Pebble (JetStream): the seqs as the service knows them; nothing is
		// sticky there (an outage fails the calls it meets), so no failed gauge.
		gauge(c.d.durable, float64(ss.Durable))
		gauge(c.d.committed, float64(ss.Committed))
		gauge(c.d.lag, float64(max(int64(ss.Durable)+1-int64(max(ss.Committed, 1)), 0)))
		return
	}
	ls := c.log.Stats()
	counter(c.d.commits, float64(ls.Commits))
	counter(c.d.records, float64(ls.Records))
	counter(c.d.bytes, float64(ls.Bytes))
	counter(c.d.syncFailures, float64(ls.CommitFailures))
	failed := 0.0
	if c.log.Err() != nil {
		failed = 1
	}
	gauge(c.d.failed, failed)
	gauge(c.d.ids, float64(ls.IDs))
	gauge(c.d.durable, float64(ls.Durable))
	gauge(c.d.committed, float64(ls.Committed))
	// Committed is the next seq to process (1 on a fresh log).
	gauge(c.d.lag, float64(max(int64(ls.Durable)+1-int64(max(ls.Committed, 1)), 0)))
}
