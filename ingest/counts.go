package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// MaxCountedSources bounds the sources counted apart in Counts: sources are the
// clients' own strings, and a metric label per source must not grow without
// bound. Events of sources seen after the first MaxCountedSources are counted
// under OtherSource.
const MaxCountedSources = 100

// OtherSource is the source the events of uncounted sources are counted under.
const OtherSource = "_other"

// counts are the service's counters: each is one atomic add where it happens,
// read by Counts at scrape time.
type counts struct {
	sources sync.Map // source → *sourceCounts
	mu      sync.Mutex
	n       int          // sources with their own counters (mu held)
	full    atomic.Bool  // n reached MaxCountedSources
	other   sourceCounts // OtherSource's
	answers [LevelProcessed + 1][FailedFinal + 1]atomic.Uint64
	dups    atomic.Uint64
}

type sourceCounts struct {
	status          [FailedFinal + 1]atomic.Uint64
	attemptFailures atomic.Uint64
}

// source returns the counters of name, making them if there is room.
func (c *counts) source(name string) *sourceCounts {
	if v, ok := c.sources.Load(name); ok {
		return v.(*sourceCounts)
	}
	if c.full.Load() {
		return &c.other
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.sources.Load(name); ok {
		return v.(*sourceCounts)
	}
	if c.n >= MaxCountedSources {
		c.full.Store(true)
		return &c.other
	}
	sc := &sourceCounts{}
	c.sources.Store(name, sc)
	c.n++
	return sc
}

func (c *counts) event(ev *event.Event, st Status) { c.source(ev.Source).status[st].Add(1) }

// persisted counts the log's answer for new records whose counters are srcs (errs:
// each one's error, nil if durable): PERSISTED or FAILED_RETRYABLE, after ACCEPTED
// for one taken in optimistically (opt: counted once the log says it is new). One
// an insertLog refused as stored already (stored, may be nil) was never new: its
// answer counts it a duplicate.
func (c *counts) persisted(srcs []*sourceCounts, opt []bool, errs []error, stored []bool) {
	for j, sc := range srcs {
		if stored != nil && stored[j] {
			continue
		}
		if opt[j] {
			sc.status[Accepted].Add(1)
		}
		st := Persisted
		if errs[j] != nil {
			st = FailedRetryable
		}
		sc.status[st].Add(1)
	}
}

// Counts are what the service has counted since it started.
type Counts struct {
	// Events counts, per source, the events that reached each status: ACCEPTED
	// when a new event is taken in, PERSISTED when its record is durable (again
	// after a :retry), PROCESSED when its tree completed, FAILED_RETRYABLE when
	// its append failed or was refused (it was not taken in), FAILED_FINAL when it
	// was dead-lettered. Invalid events and conflicts are answers only.
	Events map[string]SourceCounts
	// Answers counts the answers given per event, by ack level and the status
	// answered (a duplicate's is the stored status).
	Answers []AnswerCount
	// Duplicates counts events answered as duplicates of a known id.
	Duplicates uint64
}

// SourceCounts are the counts of one source.
type SourceCounts struct {
	ByStatus map[Status]uint64
	// AttemptFailures counts failed or timed-out attempts that are retried.
	AttemptFailures uint64
}

// AnswerCount is the number of answers at one ack level with one status.
type AnswerCount struct {
	Level  Level
	Status Status
	N      uint64
}

// Statuses lists every status, in order.
var Statuses = []Status{Accepted, Persisted, Processed, FailedRetryable, FailedFinal}

// Levels lists every ack level, in order.
var Levels = []Level{LevelAccepted, LevelPersisted, LevelProcessed}

// Counts reads the counters (each atomically, not all at one instant). Every
// status and level appears, 0 included.
func (s *Service) Counts() Counts {
	c := &s.counts
	out := Counts{Events: map[string]SourceCounts{}, Duplicates: c.dups.Load()}
	read := func(sc *sourceCounts) SourceCounts {
		r := SourceCounts{ByStatus: map[Status]uint64{}, AttemptFailures: sc.attemptFailures.Load()}
		for _, st := range Statuses {
			r.ByStatus[st] = sc.status[st].Load()
		}
		return r
	}
	c.sources.Range(func(k, v any) bool {
		out.Events[k.(string)] = read(v.(*sourceCounts))
		return true
	})
	if c.full.Load() {
		out.Events[OtherSource] = read(&c.other)
	}
	for _, l := range Levels {
		for _, st := range Statuses {
			out.Answers = append(out.Answers, AnswerCount{Level: l, Status: st, N: c.answers[l][st].Load()})
		}
	}
	return out
}

// answered counts one answer for ev at request level lvl (0: its source's
// default) with status st.
func (s *Service) answered(ev *event.Event, lvl Level, st Status) {
	l := s.levelOf(*ev, lvl)
	if l >= LevelAccepted && l <= LevelProcessed && st >= Accepted && st <= FailedFinal {
		s.counts.answers[l][st].Add(1)
	}
}

// DeadLetterCount is the number of dead letters in the log now (synced ones: a
// dead letter is listed once its flush, every FlushEvery, wrote it).
func (s *Service) DeadLetterCount() (int, error) {
	n := 0
	err := s.log.Scan(eventlog.DeadLetter, func(string, []byte) bool { n++; return true })
	return n, err
}
