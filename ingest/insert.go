package ingest

import (
	"fmt"

	"github.com/gale-stream/gale/event"
)

// insertLog is a Log whose Submit is itself the insert into its dedupe index, as
// jslog's: it stores a record of generation 0 only if its id has none, and
// SubmitEach tells per record which ones it refused for that (Exists). The
// Service then publishes an id it does not hold without looking it up first (for
// jslog, a round trip to the stream leader less per new event), and looks it up
// only when the log refuses it, to answer the duplicate or conflict that the
// lookup first would have. Only for answers that wait for the log (ack=persisted
// and processed): an ACCEPTED answer is given before it says.
type insertLog interface {
	SubmitEach(recs []*event.Record, done func(errs []error)) error
	Exists(err error) bool
}

// conflict answers ev, whose id is known (status st) with other content.
func conflict(ev *event.Event, hash event.ContentHash, st EventStatus) Result {
	// The request's hash under the stored one's rule, so the two compare.
	mine := hash
	if r, ok := event.HashRuleOf(st.PayloadHash); ok && r != mine.Rule {
		mine = ev.HashAs(r)
	}
	return Result{Status: st, Err: fmt.Errorf("%w: stored %s, this request %s",
		ErrConflict, st.PayloadHash, mine)}
}

// storedAnswer answers an event whose record an insertLog refused (err) because its
// id is stored already, as the lookup before the publish would have: a duplicate
// of the stored status (dup true: then wait for it, and count it, as any duplicate), a
// conflict if the stored content differs, retryable if the lookup fails or no
// longer finds it (trimmed meanwhile).
func (s *Service) storedAnswer(ev *event.Event, hash event.ContentHash, err error) (r Result, dup bool) {
	known, lerr := s.durableStatus(ev.ID)
	switch {
	case lerr != nil:
		return retryable(ev.ID, lerr), false
	case known == nil:
		return retryable(ev.ID, err), false
	case !event.MatchesString(known.PayloadHash, ev, hash):
		return conflict(ev, hash, *known), false
	}
	return Result{Status: *known, Duplicate: true}, true
}

// sameErr is err for each of n records.
func sameErr(err error, n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
