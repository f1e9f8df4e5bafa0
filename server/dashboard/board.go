package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// The board's columns, in order.
const (
	colWaiting  = "waiting"
	colReady    = "ready"
	colProgress = "in_progress"
	colDone     = "done"
	colFailed   = "failed"
)

var columnTitles = map[string]string{
	colWaiting:  "Pending / blocked",
	colReady:    "Ready",
	colProgress: "In progress",
	colDone:     "Done",
	colFailed:   "Failed",
}

var columnOrder = []string{colWaiting, colReady, colProgress, colDone, colFailed}

// card is one task on the board.
type card struct {
	workspace.Task
	Deps []depLink
	// Waiting says why a pending task is not ready: its unmet dependencies.
	Waiting int
	// Lapsed is set for an in-progress task whose claim's lease has passed.
	Lapsed bool
}

// depLink is one dependency of a card, by title.
type depLink struct {
	ID, Title string
	Status    workspace.TaskStatus
	Missing   bool // not in the workspace (cannot happen unless deleted)
}

type column struct {
	Key, Title string
	Cards      []card
	Total      int  // cards in the column (of those read)
	More       bool // the column holds more than were read
	Page       int
	Prev, Next string // URLs; "" when none
}

type board struct {
	Columns   []column
	Label     string
	Actor     string
	Only      string
	Cancelled int // cancelled tasks, which have no column of their own
}

// boardFilter is the board's query: label=k=v and actor=NAME (the
// claimer or suggested assignee), and col with page (or after, for the
// done column's cursor) to page through one column.
type boardFilter struct {
	labels map[string]string
	actor  string
	col    string
	page   int
	after  string
}

func parseBoardFilter(q url.Values) (boardFilter, error) {
	var f boardFilter
	if l := q.Get("label"); l != "" {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return f, invalid("label %q: want KEY=VALUE", truncate(l, 64))
		}
		f.labels = map[string]string{k: v}
	}
	f.actor = q.Get("actor")
	if len(f.actor) > workspace.MaxActorLen {
		return f, invalid("actor: longer than %d bytes", workspace.MaxActorLen)
	}
	f.col = q.Get("col")
	if f.col != "" && columnTitles[f.col] == "" {
		return f, invalid("col %q: want one of %s", truncate(f.col, 32), strings.Join(columnOrder, ", "))
	}
	p, err := pageNumber(q)
	if err != nil {
		return f, err
	}
	f.page = p
	if f.col == colDone {
		f.after = q.Get("after")
	}
	return f, nil
}

func (f boardFilter) match(t *workspace.Task) bool {
	for k, v := range f.labels {
		if got, ok := t.Labels[k]; !ok || got != v {
			return false
		}
	}
	return f.actor == "" || t.Assignee == f.actor
}

// boardScan is how many tasks of each open status the board reads: the
// columns are sorted and paged among those.
const boardScan = 1000

// maxDepLookups bounds the dependencies the board looks up one by one.
const maxDepLookups = 200

// statusPage is one read of the tasks of a status.
type statusPage struct {
	tasks    []workspace.Task
	complete bool
}

// loadBoard reads the open tasks (pending, in progress, blocked, failed)
// up to boardScan of each, unfiltered, so that dependencies resolve
// against them, and one page of done tasks with the filter applied in
// the store. Every read is one page of Tasks.List: the board's cost does
// not grow with the number of finished tasks.
func (h *Handler) loadBoard(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	q := r.URL.Query()
	f, err := parseBoardFilter(q)
	if err != nil {
		return nil, err
	}
	open := map[workspace.TaskStatus]statusPage{}
	byID := map[string]*workspace.Task{}
	for _, st := range []workspace.TaskStatus{workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked, workspace.TaskFailed} {
		p, err := h.ws.Tasks().List(ctx, workspace.TaskFilter{Status: st, Limit: boardScan})
		if err != nil {
			return nil, err
		}
		open[st] = statusPage{tasks: p.Tasks, complete: p.Next == ""}
		for i := range p.Tasks {
			byID[p.Tasks[i].ID] = &p.Tasks[i]
		}
	}
	// A dependency that is not among the open tasks read is looked up,
	// up to maxDepLookups per render; beyond, it shows as unknown.
	lookups := 0
	status := func(id string) (string, workspace.TaskStatus, bool) {
		if t, ok := byID[id]; ok {
			return t.Title, t.Status, true
		}
		if lookups >= maxDepLookups {
			return "", "", false
		}
		lookups++
		t, err := h.ws.Tasks().Get(ctx, id)
		if err != nil {
			return "", "", false
		}
		byID[id] = &t
		return t.Title, t.Status, true
	}
	done, err := h.ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskDone, Labels: f.labels, Assignee: f.actor, After: f.after, Limit: h.opts.PageSize})
	if err != nil {
		return nil, err
	}
	st, err := h.ws.Status(ctx)
	if err != nil {
		return nil, err
	}
	b := buildBoard(open, status, f, q, h.now(), h.opts.PageSize)
	b.Cancelled = st.Tasks[workspace.TaskCancelled]
	dc := column{Key: colDone, Title: columnTitles[colDone], Page: 1}
	for _, t := range done.Tasks {
		dc.Cards = append(dc.Cards, card{Task: t})
	}
	dc.Total = len(dc.Cards)
	if f.labels == nil && f.actor == "" {
		dc.Total = st.Tasks[workspace.TaskDone]
	}
	if done.Next != "" {
		v := filterValues(q)
		v.Set("col", colDone)
		v.Set("after", done.Next)
		dc.Next = "/?" + v.Encode()
		dc.More = true
	}
	if f.after != "" {
		dc.Prev = "/?" + func() string { v := filterValues(q); v.Set("col", colDone); return v.Encode() }()
	}
	if f.col == "" || f.col == colDone {
		cols := b.Columns[:0:0]
		for _, c := range b.Columns {
			if c.Key == colFailed {
				cols = append(cols, dc)
			}
			cols = append(cols, c)
		}
		if f.col == colDone {
			cols = []column{dc}
		}
		b.Columns = cols
	}
	return b, nil
}

// buildBoard sorts the open tasks into columns: pending ones by whether
// every dependency is done. Within a column, higher priority first, then
// older first (the order Claim takes them).
func buildBoard(open map[workspace.TaskStatus]statusPage, status func(string) (string, workspace.TaskStatus, bool),
	f boardFilter, q url.Values, now time.Time, pageSize int) board {
	cols := map[string][]card{}
	more := map[string]bool{}
	b := board{Label: q.Get("label"), Actor: f.actor, Only: f.col}
	for _, st := range []workspace.TaskStatus{workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked, workspace.TaskFailed} {
		p := open[st]
		for i := range p.tasks {
			t := &p.tasks[i]
			if !f.match(t) {
				continue
			}
			c := card{Task: *t}
			for _, d := range t.DependsOn {
				dl := depLink{ID: d}
				var ok bool
				dl.Title, dl.Status, ok = status(d)
				dl.Missing = !ok
				if dl.Status != workspace.TaskDone {
					c.Waiting++
				}
				c.Deps = append(c.Deps, dl)
			}
			var key string
			switch t.Status {
			case workspace.TaskPending:
				key = colReady
				if c.Waiting > 0 {
					key = colWaiting
				}
			case workspace.TaskBlocked:
				key = colWaiting
			case workspace.TaskInProgress:
				key = colProgress
				c.Lapsed = !t.LeaseExpiresAt.IsZero() && !now.Before(t.LeaseExpiresAt)
			default:
				key = colFailed
			}
			cols[key] = append(cols[key], c)
			if !p.complete {
				more[key] = true
			}
		}
	}
	for _, key := range columnOrder {
		if key == colDone || (f.col != "" && key != f.col) {
			continue
		}
		cards := cols[key]
		// List gives creation order; a stable sort keeps it within a priority.
		slices.SortStableFunc(cards, func(a, b card) int { return b.Priority - a.Priority })
		page := 1
		if key == f.col {
			page = f.page
		}
		col := column{Key: key, Title: columnTitles[key], Total: len(cards), More: more[key], Page: page}
		lo := min((page-1)*pageSize, len(cards))
		hi := min(lo+pageSize, len(cards))
		col.Cards = cards[lo:hi]
		if hi < len(cards) {
			col.Next = pageURL(q, key, page+1)
		}
		if page > 1 {
			col.Prev = pageURL(q, key, page-1)
		}
		b.Columns = append(b.Columns, col)
	}
	return b
}

// filterValues is the board's filter part of q.
func filterValues(q url.Values) url.Values {
	v := url.Values{}
	for _, k := range []string{"label", "actor"} {
		if s := q.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// pageURL is the board with q's filters, showing page n of column col.
func pageURL(q url.Values, col string, n int) string {
	v := filterValues(q)
	v.Set("col", col)
	v.Set("page", itoa(n))
	return "/?" + v.Encode()
}
