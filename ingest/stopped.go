package ingest

// StepStopped marks an attempt that a shutdown interrupted (runtime.Stop past its
// deadline, or the context given to engine.Start cancelled): the runtime told the
// spout nothing, so the event is not charged; it stays PERSISTED and runs again at
// the next start. Only Service.Close records it: a process that dies (kill -9)
// records nothing, and its restart charges the attempt, so that a poison event that
// crashes the process still ends dead-lettered instead of crash-looping.
const StepStopped Step = "stopped"

// Stopped gives back the attempt in progress of an event a shutdown interrupted, if
// its last step is StepStarted: that step becomes StepStopped, so the attempt counts
// toward neither Attempts nor max attempts, now or after a restart (Load counts
// StepStarted steps). It reports whether there was such an attempt.
func (t *Tracker) Stopped(id string) (EventStatus, bool) {
	e, ok := t.m[id]
	if !ok || e.st.Status != Persisted || len(e.st.Transitions) == 0 || e.genAttempts == 0 {
		return EventStatus{}, false
	}
	last := &e.st.Transitions[len(e.st.Transitions)-1]
	if last.Step != StepStarted {
		return EventStatus{}, false // failed and waiting for its retry, or never started
	}
	last.Step = StepStopped
	last.Error = "the process shut down before the attempt finished; not charged"
	e.st.Attempts--
	e.genAttempts--
	return e.snapshot(), true
}

// giveBackStoppedAttempts is Close's part of "a stop charges nothing": the topology
// has stopped (Close's contract), so every attempt still in progress was cut off by
// the stop. Their documents go to the last flush, which makes the giving back
// durable before a restart could charge them (startRecovered).
func (s *Service) giveBackStoppedAttempts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.tr.m {
		if st, ok := s.tr.Stopped(id); ok {
			s.docs[id] = st
		}
	}
}
