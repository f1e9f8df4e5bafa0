package mcp

import (
	"net/http"
	"sync"
	"time"
)

// DefaultMaxSessionsPerCaller caps the MCP sessions one token (or, without
// tokens, one named actor) keeps open over HTTP.
const DefaultMaxSessionsPerCaller = 16

// sessionHeader is the streamable transport's session header.
const sessionHeader = "Mcp-Session-Id"

// sessions keeps, for the stateful HTTP handler, who opened each session
// and when it was last used: a session is bound to the token that opened
// it (the SDK refuses another token with 403), ends when that token is
// revoked (EndSessions) or expires, and a caller keeps at most max of
// them, the least recently used idle one closed to make room.
type sessions struct {
	s   *Server
	max int

	mu   sync.Mutex
	byID map[string]*sessionRec
}

type sessionRec struct {
	key      string // "token:ID" or "actor:NAME"
	tokenID  string
	lastUsed time.Time
	inflight int // requests under way that carry a message (POST)
	expiry   *time.Timer
}

func callerKey(c Caller) string {
	if c.Bound {
		return "token:" + c.TokenID
	}
	return "actor:" + c.Actor
}

// prune forgets the sessions the SDK has closed (idle timeout, DELETE).
func (m *sessions) prune() {
	live := map[string]bool{}
	for ss := range m.s.sdk.Sessions() {
		live[ss.ID()] = true
	}
	for id, rec := range m.byID {
		if !live[id] {
			if rec.expiry != nil {
				rec.expiry.Stop()
			}
			delete(m.byID, id)
		}
	}
}

// admit makes room for a new session of c: it reports false when c
// already holds max sessions and none of them is idle.
func (m *sessions) admit(c Caller) bool {
	m.mu.Lock()
	m.prune()
	key := callerKey(c)
	var n int
	var oldest string
	for id, rec := range m.byID {
		if rec.key != key {
			continue
		}
		n++
		if rec.inflight == 0 && (oldest == "" || rec.lastUsed.Before(m.byID[oldest].lastUsed)) {
			oldest = id
		}
	}
	m.mu.Unlock()
	if n < m.max {
		return true
	}
	if oldest == "" {
		return false
	}
	m.close(oldest)
	return true
}

// opened records the session a request created.
func (m *sessions) opened(id string, c Caller) {
	rec := &sessionRec{key: callerKey(c), tokenID: c.TokenID, lastUsed: time.Now()}
	if c.Bound && !c.Expires.IsZero() {
		rec.expiry = time.AfterFunc(time.Until(c.Expires), func() { m.close(id) })
	}
	m.mu.Lock()
	m.byID[id] = rec
	m.mu.Unlock()
}

// use marks a request of session id under way; done ends it.
func (m *sessions) use(id string) (done func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.byID[id]
	if rec == nil {
		return func() {}
	}
	rec.inflight++
	rec.lastUsed = time.Now()
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		rec.inflight--
		rec.lastUsed = time.Now()
	}
}

// close ends session id and forgets it.
func (m *sessions) close(id string) {
	m.mu.Lock()
	if rec := m.byID[id]; rec != nil && rec.expiry != nil {
		rec.expiry.Stop()
	}
	delete(m.byID, id)
	m.mu.Unlock()
	for ss := range m.s.sdk.Sessions() {
		if ss.ID() == id {
			_ = ss.Close()
		}
	}
}

// EndSessions closes every HTTP session opened with the token tokenID
// (every token-bound session when tokenID is empty): the embedding server
// calls it when a token is revoked.
func (s *Server) EndSessions(tokenID string) {
	m := s.sessions
	m.mu.Lock()
	var ids []string
	for id, rec := range m.byID {
		if rec.tokenID != "" && (tokenID == "" || rec.tokenID == tokenID) {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.close(id)
	}
}

// track wraps the stateful handler: it admits new sessions under the cap,
// records who opened each, and marks each session's use.
func (m *sessions) track(next http.Handler, caller func(*http.Request) Caller) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(sessionHeader); id != "" {
			if r.Method == http.MethodPost {
				defer m.use(id)()
			}
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		c := caller(r)
		if !m.admit(c) {
			http.Error(w, "too many MCP sessions open for this token: close one (DELETE) or wait for one to finish", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
		id := w.Header().Get(sessionHeader)
		if id == "" {
			return
		}
		m.opened(id, c)
		// A token revoked while this request ran ended its context; the
		// watcher's EndSessions may have run before opened recorded the
		// session, so look again.
		if c.Bound && r.Context().Err() != nil {
			m.close(id)
		}
	})
}
