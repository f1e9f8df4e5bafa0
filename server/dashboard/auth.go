package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// CookieName is the cookie the login form sets: the token itself,
// HttpOnly and SameSite=Strict, so page scripts cannot read it and other
// sites' pages cannot send it.
const CookieName = "agentspace_token"

// identity finds who a request is: a bearer header, else the login
// cookie. bearer reports whether the token came in a header (which a
// browser never adds by itself, so such a request needs no CSRF token).
// No token is the zero Identity (an anonymous reader).
func (h *Handler) identity(r *http.Request) (id Identity, bearer bool, err error) {
	tok := ""
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, t, ok := strings.Cut(a, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Identity{}, true, ErrBadToken
		}
		tok, bearer = strings.TrimSpace(t), true
	} else if c, err := r.Cookie(CookieName); err == nil {
		tok = c.Value
	}
	if tok == "" {
		return Identity{}, false, nil
	}
	if h.opts.Verify == nil {
		return Identity{}, bearer, ErrBadToken
	}
	id, err = h.opts.Verify(r.Context(), tok)
	if err != nil || id.TokenID == "" {
		return id, bearer, err
	}
	id.governed, err = h.governed(r.Context())
	return id, bearer, err
}

// governed reports whether the workspace has a policy: then the engine
// decides each operator action for the token's actor and role, and
// without one only an admin-role token acts (the dashboard stays
// read-only for everyone else).
func (h *Handler) governed(ctx context.Context) (bool, error) {
	_, err := h.ws.Artifacts().Get(ctx, workspace.ByName(workspace.PolicyArtifact))
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return false, nil
	case errors.Is(err, workspace.ErrForbidden):
		return true, nil
	}
	return err == nil, err
}

// principal is who an operator action's write is checked as, the way the
// HTTP API checks a token's requests: the token's actor, with its role
// when it names one, else the policy's roles of that actor.
func principal(id Identity) workspace.Principal {
	p := workspace.Principal{Actor: id.Actor, Bound: id.TokenID != ""}
	if id.Role != "" {
		p.Roles = []string{id.Role}
	}
	return p
}

// reader returns who may read, and r reading as them, or answers the
// request itself: a bad token is refused (its cookie cleared), and without
// a token where one is required a page goes to the login form and anything
// else gets 401. Reads then leave out what the policy does not let the
// token's actor (or, with no token, the policy's default_role) read, as
// the HTTP API's do.
func (h *Handler) reader(w http.ResponseWriter, r *http.Request, page bool) (Identity, *http.Request, bool) {
	id, bearer, err := h.identity(r)
	switch {
	case errors.Is(err, ErrBadToken):
		if !bearer {
			clearCookie(w, r)
		}
		if page && !bearer {
			http.Redirect(w, r, "/ui/login?refused=1", http.StatusSeeOther)
			return id, r, false
		}
		h.fail(w, r, http.StatusUnauthorized, "the token is unknown, revoked or expired")
		return id, r, false
	case err != nil:
		h.internal(w, r, fmt.Errorf("checking a token: %w", err))
		return id, r, false
	}
	if id.TokenID == "" && h.opts.RequireToken {
		if page {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		} else {
			h.fail(w, r, http.StatusUnauthorized, "this dashboard needs a token: log in at /ui/login")
		}
		return id, r, false
	}
	return id, r.WithContext(workspace.WithPrincipal(r.Context(), principal(id))), true
}

// csrf is the CSRF token of id's pages: a MAC of its token id under the
// handler's secret, so only a page this handler served to that token's
// holder carries it.
func (h *Handler) csrf(id Identity) string {
	if id.TokenID == "" {
		return ""
	}
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte("csrf\x00" + id.TokenID))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// sameOrigin refuses a request a browser marks as sent from another
// site. Browsers that send neither header are caught by the CSRF token.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	msg := ""
	if r.URL.Query().Get("refused") != "" {
		msg = "That token is unknown, revoked or expired."
	}
	body, err := h.renderString("login", struct{ Msg string }{msg})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "layout", pageData{Title: "Log in", Nav: "login", Body: body})
}

// login checks the token in the form and keeps it in the cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "refused: the form was posted from another site")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" || h.opts.Verify == nil {
		http.Redirect(w, r, "/ui/login?refused=1", http.StatusSeeOther)
		return
	}
	if _, err := h.opts.Verify(r.Context(), tok); err != nil {
		if errors.Is(err, ErrBadToken) {
			http.Redirect(w, r, "/ui/login?refused=1", http.StatusSeeOther)
			return
		}
		h.internal(w, r, fmt.Errorf("checking a token: %w", err))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "refused: the form was posted from another site")
		return
	}
	clearCookie(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// action wraps an operator action: the caller must hold a token that may
// act (Identity.Operator), the request be same-origin, and a cookie-borne
// request carry its page's CSRF token. The write is then done as the
// token's principal, so the workspace's policy decides it like any other
// write: a refusal is a 403 and nothing is written. The answer is a
// message fragment (the page's flash area).
func (h *Handler) action(do func(r *http.Request, w workspace.Write) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			h.flash(w, r, http.StatusBadRequest, "the form does not parse")
			return
		}
		id, bearer, err := h.identity(r)
		switch {
		case errors.Is(err, ErrBadToken):
			h.flash(w, r, http.StatusUnauthorized, "refused: the token is unknown, revoked or expired")
			return
		case err != nil:
			h.internal(w, r, fmt.Errorf("checking a token: %w", err))
			return
		case id.TokenID == "":
			h.flash(w, r, http.StatusForbidden, "refused: operator actions need a token; log in at /ui/login")
			return
		case !id.Operator():
			h.flash(w, r, http.StatusForbidden, "refused: the workspace has no policy, so operator actions need a token with the admin role")
			return
		case !sameOrigin(r):
			h.flash(w, r, http.StatusForbidden, "refused: the form was posted from another site")
			return
		case !bearer && !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(h.csrf(id))):
			h.flash(w, r, http.StatusForbidden, "refused: the form's CSRF token is missing or stale; reload the page")
			return
		}
		r = r.WithContext(workspace.WithPrincipal(r.Context(), principal(id)))
		msg, err := do(r, workspace.Write{Actor: id.Actor, Message: "from the dashboard"})
		var br *badRequest
		switch {
		case errors.As(err, &br):
			h.flash(w, r, br.status, br.msg)
		case errors.Is(err, workspace.ErrForbidden):
			h.flash(w, r, http.StatusForbidden, "refused: "+err.Error())
		case err != nil && isUserError(err):
			h.flash(w, r, http.StatusConflict, "not done: "+err.Error())
		case err != nil:
			h.internal(w, r, err)
		default:
			h.flash(w, r, http.StatusOK, msg)
		}
	}
}

// isUserError reports whether err is about the records or the input
// (shown to the operator) rather than the server.
func isUserError(err error) bool {
	for _, e := range []error{workspace.ErrNotFound, workspace.ErrInvalid, workspace.ErrNotHolder, workspace.ErrConflict,
		workspace.ErrLocked, workspace.ErrLockLost, workspace.ErrTooLarge} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (h *Handler) flash(w http.ResponseWriter, r *http.Request, status int, msg string) {
	body, err := h.renderString("flash", struct {
		OK  bool
		Msg string
	}{status < 300, msg})
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
	h.render(w, status, "layout", pageData{Title: "Action", Body: body})
}

func (h *Handler) releaseLock(r *http.Request, w workspace.Write) (string, error) {
	res := r.PostForm.Get("resource")
	if res == "" {
		return "", invalid("resource: missing")
	}
	if err := h.ws.Locks().ForceRelease(r.Context(), w, res); err != nil {
		return "", err
	}
	return fmt.Sprintf("released %s", res), nil
}

// requeueTask returns a task to pending: a stuck claim (its lease lapsed)
// or a blocked task. A live claim stays its holder's: the workspace
// refuses, and the refusal is shown.
func (h *Handler) requeueTask(r *http.Request, w workspace.Write) (string, error) {
	return h.toPending(r, w, "requeued", workspace.TaskInProgress, workspace.TaskBlocked)
}

// retryTask returns a failed task to pending.
func (h *Handler) retryTask(r *http.Request, w workspace.Write) (string, error) {
	return h.toPending(r, w, "retried", workspace.TaskFailed)
}

func (h *Handler) toPending(r *http.Request, w workspace.Write, done string, from ...workspace.TaskStatus) (string, error) {
	id := r.PostForm.Get("id")
	if id == "" {
		return "", invalid("id: missing")
	}
	t, err := h.ws.Tasks().Get(r.Context(), id)
	if err != nil {
		return "", err
	}
	ok := false
	for _, s := range from {
		ok = ok || t.Status == s
	}
	if !ok {
		return "", invalid("task %q is %s: only a %s task can be %s", t.Title, t.Status, joinStatuses(from), done)
	}
	pending, blocked := workspace.TaskPending, workspace.TaskBlocked
	if t.Status == workspace.TaskInProgress {
		// A lapsed claim is returned to pending by the workspace's next
		// status change (recorded as task.released), and pending to
		// pending is no transition: so set it aside and back, in one
		// batch. A live claim stays its holder's: the first op is refused.
		cond := workspace.Cond{IfVersion: t.Version, Message: w.Message}
		_, err = h.ws.Commit(r.Context(), workspace.Batch{Actor: w.Actor, Ops: []workspace.Op{
			workspace.UpdateTaskOp{ID: id, Change: workspace.TaskChange{Status: &blocked}, Cond: cond},
			workspace.UpdateTaskOp{ID: id, Change: workspace.TaskChange{Status: &pending}, Cond: workspace.Cond{Message: w.Message}},
		}})
	} else {
		w.IfVersion = t.Version
		_, err = h.ws.Tasks().Update(r.Context(), w, id, workspace.TaskChange{Status: &pending})
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %q", done, t.Title), nil
}

func joinStatuses(s []workspace.TaskStatus) string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return strings.Join(out, " or ")
}
