package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentspace/agentspace/workspace"
)

type locksView struct {
	Locks      []workspace.Lease
	Total      int
	Prev, Next string
}

func (h *Handler) loadLocks(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	page, err := pageNumber(r.URL.Query())
	if err != nil {
		return nil, err
	}
	ls, err := h.ws.Locks().List(ctx)
	if err != nil {
		return nil, err
	}
	v := locksView{Total: len(ls)}
	n := h.opts.PageSize * 2
	lo := min((page-1)*n, len(ls))
	hi := min(lo+n, len(ls))
	v.Locks = ls[lo:hi]
	if hi < len(ls) {
		v.Next = "/ui/locks?page=" + itoa(page+1)
	}
	if page > 1 {
		v.Prev = "/ui/locks?page=" + itoa(page-1)
	}
	return v, nil
}

// feedWindow is how many seqs one read of the feed looks at, going back
// from the head; feedScan bounds how far back one page looks for matches.
const (
	feedWindow = 2000
	feedScan   = 100_000
)

type feedView struct {
	Events   []workspace.Event // newest first
	Type     string
	Actor    string
	Subject  string
	Kind     string
	Older    string // URL of the next page back; "" at the floor
	Newest   string // URL of the live first page, when this is an older one
	Scanned  int64
	Filtered bool
}

var (
	typeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)?$`) })
	kinds  = map[string]bool{workspace.SubjectArtifact: true, workspace.SubjectTask: true, workspace.SubjectNote: true, workspace.SubjectLock: true}
)

// loadFeed reads the newest matching events below before= (the head by
// default), newest first: the log is read forward in windows going back
// from there, at most feedScan seqs per page.
func (h *Handler) loadFeed(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	q := r.URL.Query()
	v := feedView{Type: q.Get("type"), Actor: q.Get("actor"), Subject: q.Get("subject"), Kind: q.Get("kind")}
	eq := workspace.EventQuery{Actor: v.Actor, SubjectName: v.Subject, SubjectKind: v.Kind}
	for _, t := range strings.Split(v.Type, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !typeRE().MatchString(t) {
			return nil, invalid("type %q: want an event type such as task.claimed", truncate(t, 64))
		}
		eq.Types = append(eq.Types, t)
	}
	if v.Kind != "" && !kinds[v.Kind] {
		return nil, invalid("kind %q: want artifact, task, note or lock", truncate(v.Kind, 32))
	}
	if len(v.Actor) > workspace.MaxActorLen || len(v.Subject) > workspace.MaxNameLen {
		return nil, invalid("actor or subject: too long")
	}
	v.Filtered = v.Type != "" || v.Actor != "" || v.Subject != "" || v.Kind != ""
	head, err := h.ws.Events().Head(ctx)
	if err != nil {
		return nil, err
	}
	hi := head + 1 // events below hi
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return nil, invalid("before %q: want a seq", truncate(s, 32))
		}
		hi = min(n, hi)
		v.Newest = feedURL(q, 0)
	}
	want := h.opts.PageSize * 2
	var got []workspace.Event
	floor := int64(0) // every seq kept is above floor
	top := hi         // every seq at or above top was read
	for top-1 > floor && len(got) < want && hi-top < feedScan {
		from := max(top-1-feedWindow, floor)
		batch, err := h.readRange(ctx, eq, from, top)
		var ce *workspace.CompactedError
		if errors.As(err, &ce) && ce.Floor-1 > floor {
			floor = ce.Floor - 1
			continue
		}
		if err != nil {
			return nil, err
		}
		slices.Reverse(batch)
		got = append(got, batch...)
		top = from + 1
	}
	v.Scanned = hi - top
	switch {
	case len(got) > want:
		// The older page starts below the last event shown.
		got = got[:want]
		v.Older = feedURL(q, got[len(got)-1].Seq)
	case top-1 > floor:
		v.Older = feedURL(q, top)
	}
	v.Events = got
	return v, nil
}

// readRange reads the matching events with from < seq < to, oldest first.
func (h *Handler) readRange(ctx context.Context, eq workspace.EventQuery, from, to int64) ([]workspace.Event, error) {
	var out []workspace.Event
	eq.AfterSeq = from
	eq.Limit = feedWindow
	for eq.AfterSeq < to-1 {
		p, err := h.ws.Events().Read(ctx, eq)
		if err != nil {
			return nil, err
		}
		for _, e := range p.Events {
			if e.Seq < to {
				out = append(out, e)
			}
		}
		if p.Next <= eq.AfterSeq || len(p.Events) == 0 && p.Next >= p.Head {
			break
		}
		eq.AfterSeq = p.Next
	}
	return out, nil
}

func feedURL(q url.Values, before int64) string {
	v := url.Values{}
	for _, k := range []string{"type", "actor", "subject", "kind"} {
		if s := q.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	if len(v) == 0 {
		return "/ui/feed"
	}
	return "/ui/feed?" + v.Encode()
}

// noteKinds are the tabs of the notes view, besides "all".
var noteKinds = []string{"decision", "constraint", "glossary", "friction"}

type notesView struct {
	Kinds []string
	Kind  string
	Notes []workspace.Note
	Next  string
}

var kindRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })

func (h *Handler) loadNotes(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	q := r.URL.Query()
	v := notesView{Kinds: noteKinds, Kind: q.Get("kind")}
	if v.Kind != "" && (!kindRE().MatchString(v.Kind) || len(v.Kind) > workspace.MaxKindLen) {
		return nil, invalid("kind %q: want a lower-case word", truncate(v.Kind, 32))
	}
	f := workspace.NoteFilter{Kind: v.Kind, After: q.Get("after"), Limit: h.opts.PageSize * 2}
	p, err := h.ws.Notes().List(ctx, f)
	if err != nil {
		return nil, err
	}
	// The engine refuses a sealed kind (the tokens) and leaves every
	// reserved kind out of a listing of all kinds.
	v.Notes = p.Notes
	if p.Next != "" {
		u := url.Values{"after": {p.Next}}
		if v.Kind != "" {
			u.Set("kind", v.Kind)
		}
		v.Next = "/ui/notes?" + u.Encode()
	}
	return v, nil
}
