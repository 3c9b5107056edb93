package sink

import "github.com/gale-stream/gale/topology"

var _ topology.Drainer = (*Bolt)(nil)

// Drain implements topology.Drainer: during a stop the runtime calls it when the
// task's queue is empty, so the partial batch is written and its inputs acked now,
// instead of after BatchRows more rows or BatchDelay, which may outlast Stop's
// deadline.
func (b *Bolt) Drain() { b.flush() }
