package server

import (
	"context"
	"errors"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// DefaultEscalateEvery is how often a server escalates the messages whose
// ack deadline has passed (Options.EscalateEvery).
const DefaultEscalateEvery = time.Second

// escalationActor is whom a server's escalations are recorded as.
const escalationActor = "agentspace-server"

// escalator escalates due messages every Options.EscalateEvery, so that a
// deadline is escalated even while nobody reads an inbox. Any number of
// servers (and readers) may do it at once: the engine escalates each
// message exactly once, as a conditional write. It runs until Drain, or
// until the workspace is closed.
func (s *Server) escalator(every time.Duration) {
	defer close(s.escalated)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.drain.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.drain, every+10*time.Second)
		_, err := s.ws.Messages().Escalate(ctx, escalationActor)
		cancel()
		switch {
		case err == nil, s.drain.Err() != nil:
		case errors.Is(err, workspace.ErrClosed):
			return
		default:
			s.log.Warn("agentspace server: escalating due messages failed", "err", s.opts.Redact(err))
		}
	}
}
