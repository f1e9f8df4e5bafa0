package team

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// follower follows the log from a seq, as a consumer that must miss
// nothing does: it checks each event is the one after the last, and
// subscribes again after the last it saw when its stream ends.
type follower struct {
	ws      *workspace.Workspace
	from    int64
	last    atomic.Int64
	mu      sync.Mutex
	gaps    []string // gaps, duplicates, disorder
	resumed int      // subscriptions started again after an error
	rewound int
	errs    []string
	tasks   []taskEvent
	tokens  map[string][]int64 // lock resource -> tokens acquired, in log order
	actors  map[string]int64   // events per actor
}

// taskEvent is an event on a task, for the claimed-twice check.
type taskEvent struct {
	Seq   int64
	Time  time.Time
	Type  string
	ID    string
	Actor string
}

func newFollower(ws *workspace.Workspace, from int64) *follower {
	f := &follower{ws: ws, from: from, tokens: map[string][]int64{}, actors: map[string]int64{}}
	f.last.Store(from)
	return f
}

func (f *follower) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := f.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		f.resumed++
		if errors.Is(err, workspace.ErrRewound) {
			f.rewound++
		}
		if len(f.errs) < 20 {
			f.errs = append(f.errs, fmt.Sprintf("after seq %d: %v", f.last.Load(), err))
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (f *follower) follow(ctx context.Context) error {
	sub, err := f.ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: f.last.Load()}, Heartbeat: time.Second, Buffer: 256})
	if err != nil {
		return err
	}
	defer sub.Close()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if m.Progress {
			continue
		}
		f.take(m.Event)
	}
}

func (f *follower) take(e workspace.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.last.Load()
	if e.Seq != last+1 {
		if len(f.gaps) < 20 {
			what := "gap"
			if e.Seq <= last {
				what = "duplicate or out of order"
			}
			f.gaps = append(f.gaps, fmt.Sprintf("%s: seq %d after %d", what, e.Seq, last))
		} else if len(f.gaps) == 20 {
			f.gaps = append(f.gaps, "…")
		}
		if e.Seq <= last {
			return
		}
	}
	f.last.Store(e.Seq)
	f.actors[e.Actor]++
	switch {
	case e.Subject.Kind == workspace.SubjectTask && (e.Type == workspace.EventTaskClaimed || e.Type == workspace.EventTaskUpdated || e.Type == workspace.EventTaskReleased):
		f.tasks = append(f.tasks, taskEvent{Seq: e.Seq, Time: e.Time, Type: e.Type, ID: e.Subject.ID, Actor: e.Actor})
	case e.Type == workspace.EventLockAcquired && strings.HasPrefix(e.Subject.ID, "artifact:team/"):
		f.tokens[e.Subject.ID] = append(f.tokens[e.Subject.ID], e.Version)
	}
}

// waitFor waits until the follower has seen head (or d passed).
func (f *follower) waitFor(ctx context.Context, head int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for f.last.Load() < head && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}
