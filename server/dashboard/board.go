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
	Total      int
	Page       int
	Prev, Next string // URLs; "" when none
}

type board struct {
	Columns []column
	Label   string
	Actor   string
	Total   int // tasks matching the filter
	Only    string
}

// boardFilter is the board's query: label=k=v, actor=NAME, and col with
// page to page through one column.
type boardFilter struct {
	labelKey, labelVal string
	actor              string
	col                string
	page               int
}

func parseBoardFilter(q url.Values) (boardFilter, error) {
	var f boardFilter
	if l := q.Get("label"); l != "" {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return f, invalid("label %q: want KEY=VALUE", truncate(l, 64))
		}
		f.labelKey, f.labelVal = k, v
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
	return f, nil
}

func (f boardFilter) match(t *workspace.Task) bool {
	if f.labelKey != "" {
		if v, ok := t.Labels[f.labelKey]; !ok || v != f.labelVal {
			return false
		}
	}
	if f.actor != "" && t.Assignee != f.actor && t.CreatedBy != f.actor && t.UpdatedBy != f.actor {
		return false
	}
	return true
}

// allTasks reads every task, a page at a time.
func allTasks(ctx context.Context, ws workspace.Workspace, f workspace.TaskFilter) ([]workspace.Task, error) {
	f.Limit = 1000
	var out []workspace.Task
	for {
		p, err := ws.Tasks().List(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Tasks...)
		if p.Next == "" {
			return out, nil
		}
		f.After = p.Next
	}
}

func (h *Handler) loadBoard(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	q := r.URL.Query()
	f, err := parseBoardFilter(q)
	if err != nil {
		return nil, err
	}
	tasks, err := allTasks(ctx, h.ws, workspace.TaskFilter{})
	if err != nil {
		return nil, err
	}
	return buildBoard(tasks, f, q, h.now(), h.opts.PageSize), nil
}

// buildBoard sorts tasks into columns: pending ones by whether every
// dependency is done, cancelled ones with the done. Within a column,
// higher priority first, then older first (the order Claim takes them).
func buildBoard(tasks []workspace.Task, f boardFilter, q url.Values, now time.Time, pageSize int) board {
	byID := make(map[string]*workspace.Task, len(tasks))
	for i := range tasks {
		byID[tasks[i].ID] = &tasks[i]
	}
	cols := map[string][]card{}
	b := board{Label: q.Get("label"), Actor: f.actor, Only: f.col}
	for i := range tasks {
		t := &tasks[i]
		if !f.match(t) {
			continue
		}
		b.Total++
		c := card{Task: *t}
		for _, d := range t.DependsOn {
			dl := depLink{ID: d}
			if dt, ok := byID[d]; ok {
				dl.Title, dl.Status = dt.Title, dt.Status
			} else {
				dl.Missing = true
			}
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
		case workspace.TaskDone, workspace.TaskCancelled:
			key = colDone
		case workspace.TaskFailed:
			key = colFailed
		default:
			continue
		}
		cols[key] = append(cols[key], c)
	}
	for _, key := range columnOrder {
		if f.col != "" && key != f.col {
			continue
		}
		cards := cols[key]
		// List gives creation order; a stable sort keeps it within a priority.
		slices.SortStableFunc(cards, func(a, b card) int { return b.Priority - a.Priority })
		col := column{Key: key, Title: columnTitles[key], Total: len(cards), Page: 1}
		page := 1
		if key == f.col {
			page = f.page
		}
		col.Page = page
		lo := min((page-1)*pageSize, len(cards))
		hi := min(lo+pageSize, len(cards))
		col.Cards = cards[lo:hi]
		if hi < len(cards) {
			col.Next = pageURL("/", q, key, page+1)
		}
		if page > 1 {
			col.Prev = pageURL("/", q, key, page-1)
		}
		b.Columns = append(b.Columns, col)
	}
	return b
}

// pageURL is path with q's filters, showing page n of column col.
func pageURL(path string, q url.Values, col string, n int) string {
	v := url.Values{}
	for _, k := range []string{"label", "actor"} {
		if s := q.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	v.Set("col", col)
	v.Set("page", itoa(n))
	return path + "?" + v.Encode()
}
