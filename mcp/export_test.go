package mcp

// RequestsUnderWay is how many requests of s's HTTP sessions are under
// way: a client has its answer a moment before the server's handler
// returns, and a session counts as used until it has.
func RequestsUnderWay(s *Server) int {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	n := 0
	for _, rec := range s.sessions.byID {
		n += rec.inflight
	}
	return n
}
