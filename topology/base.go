package topology

import "context"

// BaseSpout is embedded in a spout to get the methods most spouts leave empty, as
// Storm's BaseRichSpout: Open keeps the collector in Out and the task context in
// Task, Ack and Fail do nothing, Close returns nil. The spout then writes NextTuple,
// and overrides Ack and Fail when it tracks its trees (a spout that never replays
// loses the messages of failed trees: at-most-once). A spout that defines its own
// Open must keep the collector itself.
type BaseSpout struct {
	Out  SpoutCollector
	Task TaskContext
}

// Open keeps out and tc.
func (b *BaseSpout) Open(_ context.Context, tc TaskContext, out SpoutCollector) error {
	b.Out, b.Task = out, tc
	return nil
}

// Ack does nothing.
func (*BaseSpout) Ack(any) {}

// Fail does nothing: the message is not replayed.
func (*BaseSpout) Fail(any) {}

// Close does nothing.
func (*BaseSpout) Close() error { return nil }

// BaseBolt is embedded in a Bolt to get Prepare and Cleanup, as Storm's
// BaseRichBolt: Prepare keeps the collector in Out and the task context in Task,
// Cleanup returns nil. The bolt writes Execute, and must still ack or fail every
// input through Out.
type BaseBolt struct {
	Out  OutputCollector
	Task TaskContext
}

// Prepare keeps out and tc.
func (b *BaseBolt) Prepare(_ context.Context, tc TaskContext, out OutputCollector) error {
	b.Out, b.Task = out, tc
	return nil
}

// Cleanup does nothing.
func (*BaseBolt) Cleanup() error { return nil }

// BaseBasicBolt is embedded in a BasicBolt to get Prepare and Cleanup, as Storm's
// BaseBasicBolt: Prepare keeps the task context in Task, Cleanup returns nil. The
// bolt writes Execute.
type BaseBasicBolt struct {
	Task TaskContext
}

// Prepare keeps tc.
func (b *BaseBasicBolt) Prepare(_ context.Context, tc TaskContext) error {
	b.Task = tc
	return nil
}

// Cleanup does nothing.
func (*BaseBasicBolt) Cleanup() error { return nil }
