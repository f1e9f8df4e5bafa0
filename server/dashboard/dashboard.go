package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
)

// Defaults of Options.
const (
	DefaultCoalesce = 250 * time.Millisecond
	DefaultPageSize = 50
)

// ErrBadToken is what Options.Verify returns for a token that does not
// pass (unknown, revoked, expired, malformed).
var ErrBadToken = errors.New("dashboard: the token is unknown, revoked or expired")

// Identity is who a verified token acts as.
type Identity struct {
	Actor   string
	Role    string
	TokenID string // the token's public id
	// governed is set by the handler: the workspace has a policy, which
	// decides each operator action of this token.
	governed bool
}

// Admin reports whether the identity's token has the admin role.
func (id Identity) Admin() bool { return id.TokenID != "" && id.Role == policy.AdminRole }

// Operator reports whether the identity may attempt operator actions: a
// token with the admin role, or any token where the workspace has a
// policy (which then decides each action, as for every other write).
func (id Identity) Operator() bool {
	return id.TokenID != "" && (id.Role == policy.AdminRole || id.governed)
}

// Options configure a Handler.
type Options struct {
	// Verify checks a presented token: ErrBadToken for one that does not
	// pass, another error when it cannot tell. Nil: no token is accepted,
	// so there are no operator actions.
	Verify func(ctx context.Context, token string) (Identity, error)
	// RequireToken makes every page need a valid token (the login form
	// sets it as a cookie).
	RequireToken bool
	// Coalesce is the least time between two updates sent to one page
	// (default 250ms): a busy log costs a page at most one refresh of a
	// view per interval.
	Coalesce time.Duration
	// PageSize is how many items a column or list shows per page
	// (default 50).
	PageSize int
	// Heartbeat is how often an idle stream sends a comment line
	// (default 15s).
	Heartbeat time.Duration
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// Redact cleans an unexpected error's text before it is logged.
	Redact func(error) error
	// Agents holds the thresholds of the agents' state rule (zero fields
	// take package agents' defaults).
	Agents agents.Rule
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler serves the dashboard: GET / and everything under /ui/.
type Handler struct {
	ws     *workspace.Workspace
	opts   Options
	log    *slog.Logger
	tmpl   *template.Template
	mux    *http.ServeMux
	hub    *hub
	secret []byte // keys the CSRF tokens
	now    func() time.Time
	scan   int // events a timeline or charts page reads at most (maxScan)
}

// New returns the dashboard of ws. Close stops its event stream.
func New(ws *workspace.Workspace, opts Options) (*Handler, error) {
	if ws == nil {
		return nil, errors.New("dashboard.New: nil workspace")
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = DefaultCoalesce
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Redact == nil {
		opts.Redact = func(err error) error { return err }
	}
	tmpl, err := template.New("dashboard").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	h := &Handler{ws: ws, opts: opts, log: opts.Logger, tmpl: tmpl, mux: http.NewServeMux(), secret: secret, now: time.Now, scan: maxScan}
	h.hub = newHub(ws, opts.Logger, opts.Redact)
	h.routes()
	return h, nil
}

// Close ends every open stream and stops the event subscription.
func (h *Handler) Close() { h.hub.close() }

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Nothing but our own embedded files runs or loads: content that got
	// past escaping still could not execute.
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) routes() {
	static, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET /ui/stream", h.stream)
	h.mux.HandleFunc("GET /ui/login", h.loginForm)
	h.mux.HandleFunc("POST /ui/login", h.login)
	h.mux.HandleFunc("POST /ui/logout", h.logout)
	h.mux.HandleFunc("POST /ui/action/lock/release", h.action(h.releaseLock))
	h.mux.HandleFunc("POST /ui/action/task/requeue", h.action(h.requeueTask))
	h.mux.HandleFunc("POST /ui/action/task/retry", h.action(h.retryTask))
	h.mux.HandleFunc("POST /ui/action/agent/stop", h.action(h.stopAgent))
	h.mux.HandleFunc("POST /ui/action/agent/pause", h.action(h.pauseAgent))
	h.mux.HandleFunc("POST /ui/action/agent/resume", h.action(h.resumeAgent))
	h.mux.HandleFunc("GET /ui/artifact/raw", h.artifactRaw)
	for _, v := range h.views() {
		h.mux.HandleFunc("GET "+v.path, h.page(v))
		h.mux.HandleFunc("GET /ui/frag/"+v.name, h.fragment(v))
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "no such page: "+truncate(r.URL.Path, 200))
	})
}

// view is one page of the dashboard and the fragment it refreshes.
type view struct {
	name  string // the fragment's name, also its template's
	path  string // the page's route
	title string
	// live is the SSE event (a stream view name) that refreshes the page;
	// "" for a page that does not follow.
	live func(url.Values) string
	// load reads the view's data. A *badRequest error is the caller's.
	load func(ctx context.Context, r *http.Request, id Identity) (any, error)
}

func always(name string) func(url.Values) string { return func(url.Values) string { return name } }

func (h *Handler) views() []view {
	return []view{
		{name: "board", path: "/{$}", title: "Board", live: always(streamTasks), load: h.loadBoard},
		{name: "locks", path: "/ui/locks", title: "Locks", live: always(streamLocks), load: h.loadLocks},
		{name: "feed", path: "/ui/feed", title: "Events", live: func(q url.Values) string {
			if q.Get("before") != "" {
				return ""
			}
			return streamEvents
		}, load: h.loadFeed},
		{name: "artifacts", path: "/ui/artifacts", title: "Artifacts", live: always(streamArtifacts), load: h.loadArtifacts},
		{name: "artifact", path: "/ui/artifact", title: "Artifact", live: always(streamArtifacts), load: h.loadArtifact},
		{name: "diff", path: "/ui/diff", title: "Diff", load: h.loadDiff},
		{name: "notes", path: "/ui/notes", title: "Notes", live: always(streamNotes), load: h.loadNotes},
		{name: "agents", path: "/ui/agents", title: "Agents", live: always(streamAgents), load: h.loadAgents},
		// Every event of the agent changes its recent events: it follows them all.
		{name: "agent", path: "/ui/agent", title: "Agent", live: always(streamEvents), load: h.loadAgent},
		// The team's messages that await an ack or were escalated, and
		// a message's thread (messages.go).
		{name: "messages", path: "/ui/messages", title: "Messages", live: func(q url.Values) string {
			if q.Get("before") != "" {
				return ""
			}
			return streamMessages
		}, load: h.loadMessages},
		{name: "message", path: "/ui/message", title: "Message", live: always(streamMessages), load: h.loadMessage},
		// The team's flow and its shadows (timeline.go, changes.go).
		{name: "timeline", path: "/ui/timeline", title: "Timeline", live: liveWindow, load: h.loadTimeline},
		{name: "charts", path: "/ui/charts", title: "Charts", live: liveWindow, load: h.loadCharts},
		{name: "changes", path: "/ui/changes", title: "Shadows and change sets", live: always(streamNotes), load: h.loadChanges},
		{name: "changeset", path: "/ui/changeset", title: "Change set", live: always(streamNotes), load: h.loadChangeSet},
	}
}

// pageData is what the layout renders around a view.
type pageData struct {
	Title   string
	Nav     string
	Who     Identity
	CSRF    string
	Body    template.HTML
	FragURL string
	Live    string // the SSE trigger, "" for a page that does not follow
	After   int64
}

// viewData wraps a view's data with what its fragment also needs.
type viewData struct {
	Who  Identity
	CSRF string
	Now  time.Time
	V    any
}

func (h *Handler) page(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, r, ok := h.reader(w, r, true)
		if !ok {
			return
		}
		// The head is read before the view's data: every change the view
		// may have missed has a seq above it, so the stream that starts
		// from it refreshes the view.
		head, err := h.ws.Events().Head(r.Context())
		if err != nil {
			h.internal(w, r, err)
			return
		}
		body, status, err := h.renderView(r, v, id)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		pd := pageData{Title: v.title, Nav: v.name, Who: id, CSRF: h.csrf(id), Body: body, After: head}
		if status == http.StatusOK && v.live != nil {
			if ev := v.live(r.URL.Query()); ev != "" {
				pd.Live = "sse:" + ev
				pd.FragURL = "/ui/frag/" + v.name
				if r.URL.RawQuery != "" {
					pd.FragURL += "?" + r.URL.RawQuery
				}
			}
		}
		h.render(w, status, "layout", pd)
	}
}

func (h *Handler) fragment(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, r, ok := h.reader(w, r, false)
		if !ok {
			return
		}
		body, status, err := h.renderView(r, v, id)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// renderView loads and renders v's fragment; bad input renders as an
// error message with status 400 (404 for what does not exist).
func (h *Handler) renderView(r *http.Request, v view, id Identity) (template.HTML, int, error) {
	data, err := v.load(r.Context(), r, id)
	var br *badRequest
	switch {
	case errors.As(err, &br):
		s, err := h.renderString("error", br)
		return s, br.status, err
	case errors.Is(err, workspace.ErrNotFound):
		s, err := h.renderString("error", &badRequest{status: http.StatusNotFound, msg: err.Error()})
		return s, http.StatusNotFound, err
	case errors.Is(err, workspace.ErrForbidden):
		s, err := h.renderString("error", &badRequest{status: http.StatusForbidden, msg: err.Error()})
		return s, http.StatusForbidden, err
	case err != nil:
		return "", 0, err
	}
	s, err := h.renderString(v.name, viewData{Who: id, CSRF: h.csrf(id), Now: h.now(), V: data})
	return s, http.StatusOK, err
}

func (h *Handler) renderString(name string, data any) (template.HTML, error) {
	var b bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	// html/template escaped every value in b as it rendered it.
	return template.HTML(b.String()), nil // #nosec G203 -- produced by html/template
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		h.log.Error("agentspace dashboard: template failed", "template", name, "err", err)
		http.Error(w, "the page could not be rendered (logged by the server)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// badRequest is a load error that is the caller's: shown, not logged.
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

// Message is what the error page shows.
func (e *badRequest) Message() string { return e.msg }

func invalid(format string, args ...any) error {
	return &badRequest{status: http.StatusBadRequest, msg: sprintf(format, args...)}
}

// fail answers a whole page with an error message.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	body, err := h.renderString("error", &badRequest{status: status, msg: msg})
	if err != nil {
		http.Error(w, msg, status)
		return
	}
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return
	}
	h.render(w, status, "layout", pageData{Title: http.StatusText(status), Body: body})
}

func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away
	}
	h.log.LogAttrs(r.Context(), slog.LevelError, "agentspace dashboard: request failed",
		slog.String("path", r.URL.Path), slog.Any("err", h.opts.Redact(err)))
	h.fail(w, r, http.StatusInternalServerError, "internal error (logged by the server)")
}

// pageNumber reads a 1-based page number.
func pageNumber(q url.Values) (int, error) {
	s := q.Get("page")
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, invalid("page %q: want a whole number from 1", truncate(s, 32))
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
