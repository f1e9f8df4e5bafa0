package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Invariant is one promise checked after the run.
type Invariant struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Checked int64  `json:"checked"`          // how many records it looked at
	Detail  string `json:"detail,omitempty"` // what failed (the first few), or a note
}

// agentsExited is the name of the invariant only a run checks.
const agentsExited = "every agent process exited cleanly"

// claimLease is the lease agents claim tasks under.
const claimLease = 30 * time.Second

// meta is what a recheck needs of a run besides its records: run.json.
type meta struct {
	Run    string `json:"run"`
	Agents int    `json:"agents"`
	Hot    int    `json:"hot"`
	Locks  int    `json:"locks"`
	Head0  int64  `json:"head0"`
	Head   int64  `json:"head"`
	// CPU are the machine's CPU samples of the run, for redrawing it.
	CPU []cpuSample `json:"cpu,omitempty"`
}

// problems collects an invariant's failures, keeping the first few.
type problems struct {
	n    int
	list []string
}

func (p *problems) add(format string, args ...any) {
	p.n++
	if len(p.list) < 5 {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) inv(name string, checked int64, note string) Invariant {
	if p.n == 0 {
		return Invariant{Name: name, OK: true, Checked: checked, Detail: note}
	}
	d := strings.Join(p.list, "; ")
	if p.n > len(p.list) {
		d += fmt.Sprintf("; and %d more", p.n-len(p.list))
	}
	return Invariant{Name: name, OK: false, Checked: checked, Detail: d}
}

// checkAll checks the invariants of run m on ws against the agents'
// records and what the follower saw. agentOK is nil on a recheck.
func checkAll(ctx context.Context, ws *workspace.Workspace, m meta, recs []Record, fol *follower, agentOK []bool) []Invariant {
	var out []Invariant
	if agentOK != nil {
		var p problems
		for id, ok := range agentOK {
			if !ok {
				p.add("agent %d did not exit cleanly (see its stderr)", id)
			}
		}
		out = append(out, p.inv(agentsExited, int64(len(agentOK)), ""))
	}
	out = append(out, checkFollower(m, fol))
	byOp := map[string][]Record{}
	unknown := map[string][]Record{}
	for _, r := range recs {
		switch r.Err {
		case "":
			byOp[r.Op] = append(byOp[r.Op], r)
		case ErrClassUnknown:
			unknown[r.Op] = append(unknown[r.Op], r)
		}
	}
	out = append(out,
		checkArtifacts(ctx, ws, byOp),
		checkCounters(ctx, ws, m, byOp, unknown),
		checkNotes(ctx, ws, byOp),
		checkTasks(ctx, ws, m, byOp, fol),
		checkLeases(byOp, fol),
		checkMessages(ctx, ws, m, byOp),
		checkLogHoldsAcks(m, recs, fol),
		checkChain(ctx, ws, m),
	)
	return out
}

func checkFollower(m meta, fol *follower) Invariant {
	var p problems
	fol.mu.Lock()
	defer fol.mu.Unlock()
	for _, g := range fol.gaps {
		p.add("%s", g)
	}
	if last := fol.last.Load(); last != m.Head {
		p.add("the follower reached seq %d, the head is %d", last, m.Head)
	}
	if fol.rewound > 0 {
		p.add("the log rewound %d times under the follower", fol.rewound)
	}
	note := fmt.Sprintf("seq %d..%d, each once and in order", m.Head0+1, m.Head)
	if fol.resumed > 0 {
		note += fmt.Sprintf("; resumed %d times after: %s", fol.resumed, strings.Join(fol.errs, "; "))
	}
	return p.inv("a follower saw the log gap-free", m.Head-m.Head0, note)
}

// checkArtifacts: every acknowledged write of an own artifact is there at
// its version with its content (SHA-256), and every fenced write at its
// version.
func checkArtifacts(ctx context.Context, ws *workspace.Workspace, byOp map[string][]Record) Invariant {
	var p problems
	want := map[string][]Record{}
	for _, op := range []string{OpPut, "fenced"} {
		for _, r := range byOp[op] {
			want[r.Key] = append(want[r.Key], r)
		}
	}
	var n int64
	for _, name := range slices.Sorted(maps.Keys(want)) {
		vs, err := ws.Artifacts().Versions(ctx, workspace.ByName(name))
		if err != nil {
			p.add("%s: %v", name, err)
			continue
		}
		have := map[int64]string{}
		for _, v := range vs {
			have[v.Version] = v.SHA256
		}
		for _, r := range want[name] {
			n++
			sha, ok := have[r.Ver]
			switch {
			case !ok:
				p.add("%s version %d, acknowledged to agent %d, is missing", name, r.Ver, r.Agent)
			case r.SHA != "" && sha != r.SHA:
				p.add("%s version %d, acknowledged to agent %d, holds other content", name, r.Ver, r.Agent)
			}
		}
	}
	return p.inv("every acknowledged artifact write is there at its version", n, "")
}

// checkCounters: each hot counter's value is the number of increments
// acknowledged (plus at most those whose outcome is unknown), and no two
// increments were acknowledged the same value.
func checkCounters(ctx context.Context, ws *workspace.Workspace, m meta, byOp, unknown map[string][]Record) Invariant {
	var p problems
	var n int64
	for j := range m.Hot {
		name := hotName(m.Run, j)
		seen := map[int64]int{}
		var acked, unk int64
		for _, r := range byOp[OpHot] {
			if r.Key == name {
				acked++
				if prev, dup := seen[r.Val]; dup {
					p.add("%s: value %d acknowledged to agents %d and %d (a lost update)", name, r.Val, prev, r.Agent)
				}
				seen[r.Val] = r.Agent
			}
		}
		for _, r := range unknown[OpHot] {
			if r.Key == name {
				unk++
			}
		}
		n += acked
		a, err := ws.Artifacts().Get(ctx, workspace.ByName(name))
		if err != nil {
			p.add("%s: %v", name, err)
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(a.Content)), 10, 64)
		if err != nil {
			p.add("%s holds %q", name, a.Content)
			continue
		}
		if v < acked || v > acked+unk {
			p.add("%s is %d, but %d increments were acknowledged (%d unknown)", name, v, acked, unk)
		}
	}
	return p.inv("each counter equals its acknowledged increments", n, "")
}

func checkNotes(ctx context.Context, ws *workspace.Workspace, byOp map[string][]Record) Invariant {
	var p problems
	maxv := map[string]Record{}
	for _, r := range byOp[OpNote] {
		if r.Ver > maxv[r.Key].Ver {
			maxv[r.Key] = r
		}
	}
	for _, key := range slices.Sorted(maps.Keys(maxv)) {
		kind, k, _ := strings.Cut(key, "/")
		n, err := ws.Notes().Get(ctx, kind, k)
		switch {
		case err != nil:
			p.add("note %s: %v", key, err)
		case n.Version < maxv[key].Ver:
			p.add("note %s is at version %d, version %d was acknowledged", key, n.Version, maxv[key].Ver)
		}
	}
	return p.inv("every acknowledged note is there at its version or later", int64(len(byOp[OpNote])), "")
}

// checkTasks: every task acknowledged done is done, and the log never has a
// task claimed by one agent while another's claim on it was live.
func checkTasks(ctx context.Context, ws *workspace.Workspace, m meta, byOp map[string][]Record, fol *follower) Invariant {
	var p problems
	tasks := map[string]workspace.Task{}
	after := ""
	for {
		page, err := ws.Tasks().List(ctx, workspace.TaskFilter{Labels: taskLabels(m.Run), After: after, Limit: 1000})
		if err != nil {
			p.add("listing tasks: %v", err)
			break
		}
		for _, t := range page.Tasks {
			tasks[t.ID] = t
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	for _, r := range byOp["done"] {
		if t, ok := tasks[r.Key]; !ok || t.Status != workspace.TaskDone {
			p.add("task %s, acknowledged done to agent %d, is %q", r.Key, r.Agent, t.Status)
		}
	}
	// Two acknowledged claims of a task by two agents: the second must have
	// begun after the first's lease could have lapsed, or after the first
	// agent was acknowledged its done.
	doneAt := map[string]int64{}
	for _, r := range byOp["done"] {
		doneAt[r.Key] = r.End
	}
	claims := map[string][]Record{}
	for _, r := range byOp[OpClaim] {
		claims[r.Key] = append(claims[r.Key], r)
	}
	for id, cs := range claims {
		slices.SortFunc(cs, func(a, b Record) int { return cmp.Compare(a.Start, b.Start) })
		for i := 1; i < len(cs); i++ {
			x, y := cs[i-1], cs[i]
			if x.Agent == y.Agent {
				continue
			}
			lapsed := y.End >= x.Start+claimLease.Nanoseconds()
			done := doneAt[id] != 0 && doneAt[id] <= y.Start
			if !lapsed && !done {
				p.add("task %s acknowledged claimed to agent %d, then to agent %d within the first claim's lease", id, x.Agent, y.Agent)
			}
		}
	}
	type hold struct {
		actor string
		at    time.Time
	}
	held := map[string]hold{}
	fol.mu.Lock()
	for _, e := range fol.tasks {
		if _, ours := tasks[e.ID]; !ours {
			continue
		}
		switch e.Type {
		case workspace.EventTaskClaimed:
			if h, ok := held[e.ID]; ok && h.actor != e.Actor && e.Time.Sub(h.at) < claimLease {
				p.add("task %s claimed by %s at seq %d while %s's claim of %v was live", e.ID, e.Actor, e.Seq, h.actor, h.at.Format(time.RFC3339Nano))
			}
			held[e.ID] = hold{e.Actor, e.Time}
		default:
			delete(held, e.ID)
		}
	}
	fol.mu.Unlock()
	return p.inv("every task acknowledged done is done, and none was claimed twice at once", int64(len(byOp["done"])+len(byOp[OpClaim])), fmt.Sprintf("%d tasks in the run's pools", len(tasks)))
}

// checkLeases: each resource's tokens strictly increase in the log, and no
// token was acknowledged to two agents.
func checkLeases(byOp map[string][]Record, fol *follower) Invariant {
	var p problems
	fol.mu.Lock()
	for res, toks := range fol.tokens {
		for i := 1; i < len(toks); i++ {
			if toks[i] <= toks[i-1] {
				p.add("%s: token %d after %d in the log", res, toks[i], toks[i-1])
			}
		}
	}
	fol.mu.Unlock()
	owner := map[string]int{}
	for _, r := range byOp[OpLock] {
		k := r.Key + "#" + strconv.FormatInt(r.Ver, 10)
		if prev, dup := owner[k]; dup {
			p.add("%s: token %d acknowledged to agents %d and %d", r.Key, r.Ver, prev, r.Agent)
		}
		owner[k] = r.Agent
	}
	return p.inv("lease tokens only increase and go to one holder each", int64(len(byOp[OpLock])), "")
}

// checkMessages: every message acknowledged sent is in its recipient's
// inbox, and every ack acknowledged is recorded on its message, once.
func checkMessages(ctx context.Context, ws *workspace.Workspace, m meta, byOp map[string][]Record) Invariant {
	var p problems
	msgs := map[string]workspace.Msg{}
	for id := range m.Agents {
		after := ""
		for {
			page, err := ws.Messages().Inbox(workspace.AsActor(ctx, actor(m.Run, id)), workspace.InboxQuery{Actor: actor(m.Run, id), After: after, Limit: 1000})
			if err != nil {
				p.add("inbox of agent %d: %v", id, err)
				break
			}
			for _, msg := range page.Messages {
				msgs[msg.ID] = msg
			}
			if page.Next == "" || len(page.Messages) == 0 {
				break
			}
			after = page.Next
		}
	}
	for _, r := range byOp[OpMsg] {
		if msg, ok := msgs[r.Key]; !ok || !slices.Contains(msg.To, r.To) {
			p.add("message %s, acknowledged sent by agent %d to %s, is not in its inbox", r.Key, r.Agent, r.To)
		}
	}
	for _, r := range byOp["ack"] {
		msg, ok := msgs[r.Key]
		if !ok {
			got, err := ws.Messages().Get(workspace.AsActor(ctx, actor(m.Run, r.Agent)), r.Key)
			if err != nil {
				p.add("message %s, acked by agent %d: %v", r.Key, r.Agent, err)
				continue
			}
			msg = got
		}
		by := actor(m.Run, r.Agent)
		n := 0
		for _, a := range msg.Acks {
			if a.By == by {
				n++
			}
		}
		if n != 1 {
			p.add("message %s, its ack acknowledged to agent %d, holds %d acks by it", r.Key, r.Agent, n)
		}
	}
	return p.inv("every message acknowledged sent is delivered, every ack recorded once", int64(len(byOp[OpMsg])+len(byOp["ack"])), "")
}

// checkLogHoldsAcks: each agent's acknowledged writes each appended at
// least one event by it.
func checkLogHoldsAcks(m meta, recs []Record, fol *follower) Invariant {
	var p problems
	writes := map[int]int64{}
	var n int64
	for _, r := range recs {
		if r.Err == "" && r.Op != "inbox" && r.Op != opReady {
			writes[r.Agent]++
			n++
		}
	}
	fol.mu.Lock()
	defer fol.mu.Unlock()
	for id, w := range writes {
		if got := fol.actors[actor(m.Run, id)]; got < w {
			p.add("agent %d was acknowledged %d writes, the log holds %d events by it", id, w, got)
		}
	}
	return p.inv("the log holds an event for every acknowledged write", n, "")
}

func checkChain(ctx context.Context, ws *workspace.Workspace, m meta) Invariant {
	var p problems
	rep, err := ws.Verify(ctx)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return Invariant{Name: "the hash chain verifies", OK: true, Detail: "not checked: " + err.Error()}
	case err != nil:
		p.add("verify: %v", err)
	case !rep.OK():
		p.add("broken at seq %d: %s", rep.BrokenSeq, strings.Join(rep.Problems, "; "))
	case rep.Head < m.Head:
		p.add("verified up to %d, the run's head is %d", rep.Head, m.Head)
	}
	return p.inv("the hash chain verifies", rep.Events, fmt.Sprintf("%d events, %d artifact versions", rep.Events, rep.Versions))
}
