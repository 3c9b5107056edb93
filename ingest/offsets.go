package ingest

// Offsets computes the committed offset: the contiguous prefix of finished log
// records. It never passes an unfinished record, however many after it are done
// (STORM-2343, Benthos #4010: committing past in-flight data loses it on restart).
// Pure and not safe for concurrent use.
type Offsets struct {
	next uint64              // the committed offset: lowest seq not yet finished
	done map[uint64]struct{} // finished seqs above next
}

// NewOffsets starts at committed (the next seq to finish).
func NewOffsets(committed uint64) *Offsets {
	if committed == 0 {
		committed = 1
	}
	return &Offsets{next: committed, done: map[uint64]struct{}{}}
}

// Done marks seq finished (processed or dead-lettered) and returns the committed
// offset. Seqs below the offset, or done twice, change nothing.
func (o *Offsets) Done(seq uint64) uint64 {
	if seq < o.next {
		return o.next
	}
	if seq > o.next {
		o.done[seq] = struct{}{}
		return o.next
	}
	o.next++
	for {
		if _, ok := o.done[o.next]; !ok {
			return o.next
		}
		delete(o.done, o.next)
		o.next++
	}
}

// Skip marks from..to finished without processing: seqs a salvage of the log
// recorded lost, which no record will ever finish.
func (o *Offsets) Skip(from, to uint64) uint64 {
	for s := max(from, o.next); s <= to; s++ {
		o.Done(s)
	}
	return o.next
}

// Committed is the offset: every seq below it is finished.
func (o *Offsets) Committed() uint64 { return o.next }

// Ahead is how many finished seqs wait above an unfinished one.
func (o *Offsets) Ahead() int { return len(o.done) }
