// Package metrics turns a running topology's counters into what operators read:
// Prometheus metrics (Collector), and Storm's UI table over a window with chart points
// over time (History, Table, Point).
//
// Every definition is Storm's (storm-reliability.md §3): emitted counts emit calls,
// transferred counts tuples sent to consumer tasks, a spout's acked and failed count
// trees (timeouts apart from explicit fails), a bolt's count inputs; execute latency is
// the time inside Execute, process latency from the start of Execute to the ack,
// complete latency from the spout's emit to the tree's completion; capacity is the
// share of the window a task spent inside Execute. Unlike Storm, nothing is sampled:
// the counts are the runtime's exact counters, read at scrape time.
//
// History is a plain value fed by Observe(now, stats), so windows and charts are tested
// without a clock; Run (and RunUntil, which stops when the job is done) is the thin
// loop that feeds it on a ticker.
package metrics
