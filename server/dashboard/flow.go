package dashboard

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// The flow of a window of the event log: what the timeline and the charts
// draw. It is built in one pass over the window's events (flow.add, in
// seq order), in time O(n) for n events and memory bounded by the
// buckets, the tasks and resources the window touches, and the caps
// below; nothing is re-read.

// Bounds of one flow.
const (
	flowBuckets   = 60        // the charts' intervals per window
	maxBars       = 4000      // task attempts and lock holds kept for the timeline
	maxMarks      = 2000      // conflict and denial marks kept for the timeline
	maxLanes      = 60        // agents drawn; the rest are counted
	maxContention = 10_000    // distinct subjects counted for the contention table
	maxScan       = 1_000_000 // events one view reads; more and it says so
)

// Outcomes of a bar.
const (
	outDone      = "done"
	outFailed    = "failed"
	outReleased  = "released"
	outLapsed    = "lapsed"
	outCancelled = "cancelled"
	outBlocked   = "blocked"
	outOpen      = "open" // still running at the window's end
	outExpired   = "expired"
	outForced    = "forced"
)

// bar is one task attempt (Lock false) or lock hold (Lock true) of one actor.
type bar struct {
	Actor      string
	Lock       bool
	ID         string // task id, or the lock's resource
	Name       string // task title, or the resource
	Start, End time.Time
	Outcome    string
	Clipped    bool // began before the window
}

// mark is one conflict, denial or escalation.
type mark struct {
	Actor   string
	Type    string // "conflict", "denied" or "escalated"
	At      time.Time
	Subject string
	Message string
	URL     string // where it links; "" for its events in the feed
	Title   string // its tooltip; "" for one made of the fields above
}

// escalation is one message.escalated event of the window, placed on
// the lanes of those that owed the ack once its message is read
// (escalationMarks).
type escalation struct {
	ID string // the message's
	At time.Time
}

// bucket is one interval of the charts.
type bucket struct {
	Ready, Running, Blocked int // queue depth at the interval's end
	Done, Failed, Claimed   int
	Conflicts, Denials      int
	Waits                   int           // acquires that had to wait
	Waited                  time.Duration // how long they waited, in all
}

// contention counts the collisions on one subject.
type contention struct {
	Subject   string // kind:name
	Link      string
	Conflicts int
	Denials   int
	Forced    int
	Waits     int // acquires that waited for the lock
	By        map[string]int
}

func (c *contention) total() int { return c.Conflicts + c.Denials + c.Forced + c.Waits }

// flow accumulates a window. Events at or after To only move the queue
// counts (see depthFrom), so a past window can start from today's counts.
type flow struct {
	From, To time.Time
	step     time.Duration

	Events  int // events inside the window
	Buckets [flowBuckets]bucket

	bars     []bar
	Dropped  int // bars not kept (maxBars)
	marks    []mark
	DropMark int
	// escalations of the window, at most maxMarks (the rest in DropMark).
	escalations []escalation
	attempts    map[string]int  // task id -> index in bars of its open attempt
	holds       map[string]int  // resource -> index in bars of its open hold
	lanes       map[string]bool // actors with a bar or a mark: no lane is empty

	tasks map[string]*taskTrack // per task: its status as the pass follows it (moves.go)
	moves [flowBuckets + 1]map[workspace.TaskStatus]int
	// net is every move at or after From: current counts minus net are
	// the counts at From.
	net map[workspace.TaskStatus]int

	contended map[string]*contention
	Other     int // collisions on subjects beyond maxContention

	holdHist [7]int // by holdEdges, and one past the last
	HoldN    int

	waitHist  [7]int // by waitEdges, and one past the last
	WaitN     int
	Waited    time.Duration // all lock waits, added up
	Longest   time.Duration // the longest lock wait
	LongestOn string        // its resource
}

// holdEdges are the upper bounds of the lock hold time histogram.
var holdEdges = []time.Duration{time.Second, 10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour}

// waitEdges are the upper bounds of the lock wait time histogram.
var waitEdges = []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute}

func newFlow(from, to time.Time) *flow {
	f := &flow{From: from, To: to, step: to.Sub(from) / flowBuckets,
		attempts: map[string]int{}, holds: map[string]int{}, lanes: map[string]bool{},
		tasks: map[string]*taskTrack{}, net: map[workspace.TaskStatus]int{},
		contended: map[string]*contention{}}
	if f.step <= 0 {
		f.step = 1
	}
	return f
}

func (f *flow) bucketOf(t time.Time) int {
	i := int(t.Sub(f.From) / f.step)
	return min(max(i, 0), flowBuckets-1)
}

// add takes the next event of the pass.
func (f *flow) add(e workspace.Event) {
	if e.Time.Before(f.From) {
		return
	}
	inside := e.Time.Before(f.To)
	if e.Subject.Kind == workspace.SubjectTask {
		f.task(e, inside)
	}
	if !inside {
		return
	}
	f.Events++
	b := &f.Buckets[f.bucketOf(e.Time)]
	switch e.Type {
	case workspace.EventLockAcquired, workspace.EventLockRenewed:
		if e.Type == workspace.EventLockRenewed {
			if _, ok := f.holds[e.Subject.ID]; ok {
				return
			}
		}
		f.closeHold(e.Subject.ID, e.Time, outExpired)
		f.holds[e.Subject.ID] = f.open(bar{Actor: e.Actor, Lock: true, ID: e.Subject.ID, Name: e.Subject.ID, Start: e.Time, Clipped: e.Type == workspace.EventLockRenewed})
	case workspace.EventLockReleased, workspace.EventLockExpired, workspace.EventLockForced:
		out := outReleased
		switch e.Type {
		case workspace.EventLockExpired:
			out = outExpired
		case workspace.EventLockForced:
			out = outForced
		}
		if _, ok := f.holds[e.Subject.ID]; !ok && e.Type == workspace.EventLockReleased {
			// Held since before the window.
			f.holds[e.Subject.ID] = f.open(bar{Actor: e.Actor, Lock: true, ID: e.Subject.ID, Name: e.Subject.ID, Start: f.From, Clipped: true})
		}
		f.closeHold(e.Subject.ID, e.Time, out)
		if e.Type == workspace.EventLockForced {
			f.contend(e, func(c *contention) { c.Forced++ })
		}
	case workspace.EventLockWaited:
		// Its message is the wait; one that does not parse (written by
		// hand through an import) counts as a wait of unknown length.
		d, err := time.ParseDuration(e.Message)
		if err != nil || d < 0 {
			d = 0
		}
		b.Waits++
		b.Waited += d
		f.WaitN++
		f.Waited += d
		f.waitHist[sort.Search(len(waitEdges), func(k int) bool { return d < waitEdges[k] })]++
		if d > f.Longest {
			f.Longest, f.LongestOn = d, e.Subject.ID
		}
		f.contend(e, func(c *contention) { c.Waits++ })
	case workspace.EventConflict:
		b.Conflicts++
		f.mark(e)
		f.contend(e, func(c *contention) { c.Conflicts++ })
	case workspace.EventDenied:
		b.Denials++
		f.mark(e)
		f.contend(e, func(c *contention) { c.Denials++ })
	case workspace.EventMessageEscalated:
		if len(f.escalations) >= maxMarks {
			f.DropMark++
			return
		}
		f.escalations = append(f.escalations, escalation{ID: e.Subject.ID, At: e.Time})
	}
}

// task follows a task's status (moves.go) and its attempts.
func (f *flow) task(e workspace.Event, inside bool) {
	id := e.Subject.ID
	tr := f.tasks[id]
	if tr == nil {
		tr = &taskTrack{}
		f.tasks[id] = tr
	}
	u := update{At: e.Time, Actor: e.Actor, Name: e.Subject.Name, Version: e.Version, Inside: inside}
	switch e.Type {
	case workspace.EventTaskCreated:
		f.move(id, tr, "", workspace.TaskPending, u, "")
	case workspace.EventTaskClaimed:
		// Only a pending task can be claimed.
		f.settle(id, tr, workspace.TaskPending)
		f.move(id, tr, tr.before(workspace.TaskPending), workspace.TaskInProgress, u, "")
	case workspace.EventTaskReleased:
		// Only a task in progress is released. Released by its claimer,
		// the attempt was released; by another, it lapsed (its claim
		// expired and another write returned it, or its agent was
		// stopped). A claim before the pass is its heartbeats' actor's.
		who := tr.claimer
		if who == "" && tr.updates > 0 {
			who = laneOf(tr.last.Actor)
		}
		if who == "" {
			who = laneOf(e.Actor)
		}
		out := outReleased
		if who != laneOf(e.Actor) {
			out = outLapsed
		}
		f.settle(id, tr, workspace.TaskInProgress)
		u.Actor = who
		f.move(id, tr, tr.before(workspace.TaskInProgress), workspace.TaskPending, u, out)
	case workspace.EventTaskUpdated:
		tr.prev, tr.last = tr.last, u
		tr.updates++
	}
}

// open keeps b and returns its index, or -1 past maxBars.
func (f *flow) open(b bar) int {
	b.Actor = laneOf(b.Actor)
	f.lanes[b.Actor] = true
	if len(f.bars) >= maxBars {
		f.Dropped++
		return -1
	}
	f.bars = append(f.bars, b)
	return len(f.bars) - 1
}

func (f *flow) closeAttempt(id string, at time.Time, out string) {
	if i, ok := f.attempts[id]; ok {
		delete(f.attempts, id)
		f.end(i, at, out)
	}
}

func (f *flow) closeHold(res string, at time.Time, out string) {
	if i, ok := f.holds[res]; ok {
		delete(f.holds, res)
		f.end(i, at, out)
		if i >= 0 && out != outExpired {
			d := at.Sub(f.bars[i].Start)
			if !f.bars[i].Clipped {
				f.HoldN++
				f.holdHist[sort.Search(len(holdEdges), func(k int) bool { return d < holdEdges[k] })]++
			}
		}
	}
}

func (f *flow) end(i int, at time.Time, out string) {
	if i < 0 {
		return
	}
	f.bars[i].End, f.bars[i].Outcome = at, out
}

func (f *flow) mark(e workspace.Event) {
	actor := laneOf(e.Actor)
	f.lanes[actor] = true
	if len(f.marks) >= maxMarks {
		f.DropMark++
		return
	}
	f.marks = append(f.marks, mark{Actor: actor, Type: e.Type, At: e.Time, Subject: subjectLabel(e.Subject), Message: e.Message})
}

func subjectLabel(s workspace.Subject) string {
	name := s.Name
	if name == "" {
		name = s.ID
	}
	if s.Kind == workspace.SubjectLock {
		return name
	}
	return s.Kind + ":" + name
}

func (f *flow) contend(e workspace.Event, count func(*contention)) {
	key := subjectLabel(e.Subject)
	c := f.contended[key]
	if c == nil {
		if len(f.contended) >= maxContention {
			f.Other++
			return
		}
		c = &contention{Subject: key, Link: subjectLink(e.Subject), By: map[string]int{}}
		f.contended[key] = c
	}
	count(c)
	c.By[laneOf(e.Actor)]++
}

// subjectLink is the page of a subject: an artifact's page, else the
// feed of its events.
func subjectLink(s workspace.Subject) string {
	switch s.Kind {
	case workspace.SubjectArtifact:
		return "/ui/artifact?" + encode("name", s.Name)
	case workspace.SubjectLock:
		if name, ok := strings.CutPrefix(s.ID, "artifact:"); ok {
			return "/ui/artifact?" + encode("name", name)
		}
		return "/ui/feed?" + encode("kind", s.Kind, "subject", s.ID)
	case workspace.SubjectTask, workspace.SubjectNote:
		return "/ui/feed?" + encode("kind", s.Kind, "subject", s.Name)
	}
	return "/ui/feed?" + encode("type", workspace.EventDenied, "subject", s.Name)
}

// encode is url.Values of the pairs, encoded; empty values are left out.
func encode(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return v.Encode()
}

// depthFrom fills each bucket's queue depth, given the counts by status
// now (the pass read every event from the window's start to the head).
func (f *flow) depthFrom(now map[workspace.TaskStatus]int) {
	cur := map[workspace.TaskStatus]int{}
	for s, n := range now {
		cur[s] = n - f.net[s]
	}
	for i := range f.Buckets {
		for s, n := range f.moves[i] {
			cur[s] += n
		}
		b := &f.Buckets[i]
		b.Ready, b.Running, b.Blocked = max(cur[workspace.TaskPending], 0), max(cur[workspace.TaskInProgress], 0), max(cur[workspace.TaskBlocked], 0)
	}
}

// finish closes what is still open at the window's end.
func (f *flow) finish() {
	for _, i := range f.attempts {
		f.end(i, f.To, outOpen)
	}
	for _, i := range f.holds {
		f.end(i, f.To, outOpen)
	}
	f.attempts, f.holds = map[string]int{}, map[string]int{}
}

// top returns the n most contended subjects, most first.
func (f *flow) top(n int) []*contention {
	out := make([]*contention, 0, len(f.contended))
	for _, c := range f.contended {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].total(), out[j].total(); a != b {
			return a > b
		}
		return out[i].Subject < out[j].Subject
	})
	return out[:min(n, len(out))]
}
