package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// received is what one subscriber saw.
type received struct {
	events []workspace.Event
	// progress holds each heartbeat's Head next to the last seq delivered before it.
	progress [][2]int64
	err      error
}

// collectFrom reads sub until it delivers an event with seq >= until (or, for
// a filtered stream, a heartbeat with Head >= until), or until max events
// when max > 0.
func collectFrom(ctx context.Context, sub *workspace.Subscription, from, until int64, max int) received {
	var r received
	last := from
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			r.err = fmt.Errorf("after seq %d: %w", last, err)
			return r
		}
		if m.Progress {
			r.progress = append(r.progress, [2]int64{m.Head, last})
			if m.Head >= until {
				return r
			}
			continue
		}
		r.events = append(r.events, m.Event)
		last = m.Event.Seq
		if last >= until || max > 0 && len(r.events) == max {
			return r
		}
	}
}

// testSubscribersUnderWrites: writers on several handles append single
// writes and 3-op batches while subscribers on other handles follow from
// seq 0, from the middle of the backlog, with a filter, and one stops and
// resumes from its last seq. Each sees exactly the log's events after its
// start, once, in order, without a gap.
func testSubscribersUnderWrites(t *testing.T, h Harness) {
	const (
		writers   = 4
		perWriter = 15 // every 5th is a batch of 3
		backlog   = 30
		middle    = 15
		firstPart = 40 // the resuming subscriber stops after this many events
	)
	ctx := caseCtx(t, 90*time.Second)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, 4)
	for i := range backlog {
		_, err := hs[i%len(hs)].Notes().Put(ctx, workspace.Write{Actor: "setup"},
			workspace.NotePut{Kind: "glossary", Key: fmt.Sprintf("backlog-%d", i), Body: "b"})
		require.NoError(t, err)
	}
	head := int64(backlog + writers*(perWriter/5*3+perWriter-perWriter/5))

	subscribe := func(ws *workspace.Workspace, q workspace.EventQuery, hb time.Duration) *workspace.Subscription {
		sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: q, Heartbeat: hb})
		require.NoError(t, err, "subscribe after %d", q.AfterSeq)
		t.Cleanup(func() { _ = sub.Close() })
		return sub
	}
	artifactsOnly := workspace.EventQuery{SubjectKind: workspace.SubjectArtifact}
	subs := []*workspace.Subscription{
		subscribe(hs[0], workspace.EventQuery{}, 0),
		subscribe(hs[1], workspace.EventQuery{AfterSeq: middle}, 5*time.Millisecond),
		subscribe(hs[2], workspace.EventQuery{}, 0),
		subscribe(hs[3], artifactsOnly, 5*time.Millisecond),
	}
	got := make([]received, len(subs))
	var resumed received
	var wg sync.WaitGroup
	for i, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i {
			case 1:
				got[i] = collectFrom(ctx, sub, middle, head, 0)
			case 2:
				got[i] = collectFrom(ctx, sub, 0, head, firstPart)
				_ = sub.Close()
				if got[i].err != nil || len(got[i].events) == 0 {
					return
				}
				// Resume on another handle from the last seq seen.
				last := got[i].events[len(got[i].events)-1].Seq
				again, err := hs[3].Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: last}})
				if err != nil {
					resumed.err = err
					return
				}
				defer again.Close()
				resumed = collectFrom(ctx, again, last, head, 0)
			default:
				got[i] = collectFrom(ctx, sub, 0, head, 0)
			}
		}()
	}

	werrs := make([]error, writers)
	var ww sync.WaitGroup
	for w := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			ws := hs[(w+1)%len(hs)]
			actor := fmt.Sprintf("writer-%d", w)
			for i := range perWriter {
				var err error
				if i%5 == 4 {
					_, err = ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{
						workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d-a", actor, i)}},
						workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: fmt.Sprintf("%s/%d", actor, i), Content: []byte("x")}},
						workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d-b", actor, i)}},
					}})
				} else {
					_, err = ws.Notes().Put(ctx, workspace.Write{Actor: actor},
						workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d", actor, i)})
				}
				if err != nil {
					werrs[w] = fmt.Errorf("write %d: %w", i, err)
					return
				}
			}
		}()
	}
	ww.Wait()
	for w, err := range werrs {
		require.NoError(t, err, "writer %d", w)
	}
	wg.Wait()

	gotHead, err := hs[0].Events().Head(ctx)
	require.NoError(t, err)
	require.Equal(t, head, gotHead, "one event per write, three per batch")
	log := readAll(t, hs[0], workspace.EventQuery{})
	require.Len(t, log, int(head))
	for i, ev := range log {
		require.Equal(t, int64(i+1), ev.Seq, "the log's seqs run 1, 2, 3, ...")
	}
	filtered := readAll(t, hs[0], artifactsOnly)
	require.Len(t, filtered, writers*perWriter/5)

	require.NoError(t, got[0].err, "subscriber from 0")
	assertSameEvents(t, "subscriber from 0", log, got[0].events)
	require.NoError(t, got[1].err, "subscriber from the middle")
	assertSameEvents(t, "subscriber from the middle", log[middle:], got[1].events)
	for _, p := range got[1].progress {
		assert.Equal(t, p[1], p[0], "a heartbeat's head is the last seq delivered on an unfiltered stream")
	}
	require.NoError(t, got[2].err, "resuming subscriber, first part")
	require.NoError(t, resumed.err, "resuming subscriber, second part")
	assertSameEvents(t, "resumed subscriber", log, append(got[2].events, resumed.events...))
	require.NoError(t, got[3].err, "filtered subscriber")
	assertSameEvents(t, "filtered subscriber", filtered, got[3].events)
	for _, p := range got[3].progress {
		assert.GreaterOrEqual(t, p[0], p[1], "a heartbeat never reports a head below the last delivered seq")
	}
}

// assertSameEvents checks that got is want: same seqs in the same order,
// same content.
func assertSameEvents(t *testing.T, who string, want, got []workspace.Event) {
	t.Helper()
	seqs := func(evs []workspace.Event) []int64 {
		out := make([]int64, len(evs))
		for i, ev := range evs {
			out[i] = ev.Seq
		}
		return out
	}
	if !assert.Equal(t, seqs(want), seqs(got), "%s: seqs", who) {
		return
	}
	for i := range want {
		w, g := want[i], got[i]
		assert.True(t, w.Time.Equal(g.Time), "%s: seq %d time %v, log has %v", who, g.Seq, g.Time, w.Time)
		w.Time, g.Time = time.Time{}, time.Time{}
		assert.Equal(t, w, g, "%s: seq %d", who, g.Seq)
	}
}
