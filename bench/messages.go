package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// DefaultPollEvery is how often W8's baseline recipient looks at its inbox:
// once a second, as agents that poll for mail do.
const DefaultPollEvery = time.Second

// w8Case is one W8 row: the hand-over of a message, from the commit of
// its send to the recipient's read returning it, through a waiting inbox
// read (ours) against the same recipient polling every pollEvery (the
// baseline, in the same row).
func w8Case(e *env, variant string, pollEvery time.Duration) bcase {
	other := variant == "other handle"
	s := spec{workload: "W8", variant: variant, c: 1}
	note := fmt.Sprintf("latency: send -> recipient's waiting inbox read returns; raw: the recipient polls every %v", pollEvery)
	if e.via != "" {
		note = fmt.Sprintf("latency: send -> recipient's long poll (GET /v1/inbox?wait) returns; raw: the recipient polls every %v", pollEvery)
	}
	return bcase{spec: s, latency: true, note: note, setup: func(ctx context.Context) (op, op, func(), error) {
		sender, recipient := e.handles[0], e.handles[0]
		if other {
			recipient = e.handles[1%len(e.handles)]
		}
		to := fmt.Sprintf("%s-w8-%v", e.prefix, other)
		// The recipient makes itself known to the workspace first.
		if _, err := recipient.Notes().Put(workspace.AsActor(ctx, to), workspace.Write{Actor: to},
			workspace.NotePut{Kind: "bench", Key: to, Body: "here"}); err != nil {
			return nil, nil, nil, err
		}
		wait := func(ctx context.Context) (time.Time, error) {
			p, err := recipient.Messages().Inbox(workspace.AsActor(ctx, to), workspace.InboxQuery{Actor: to, Unread: true, Wait: true, Limit: 1})
			if err != nil {
				return time.Time{}, err
			}
			at := time.Now()
			return at, markRead(ctx, recipient, to, p)
		}
		poll := func(ctx context.Context) (time.Time, error) {
			// A poller's phase is not the sender's: its first look is
			// anywhere in the interval.
			next := time.Now().Add(rand.N(pollEvery)) // #nosec G404 -- a poller's phase needs no unpredictability
			for {
				select {
				case <-ctx.Done():
					return time.Time{}, ctx.Err()
				case <-time.After(time.Until(next)):
				}
				p, err := recipient.Messages().Inbox(workspace.AsActor(ctx, to), workspace.InboxQuery{Actor: to, Unread: true, Limit: 1})
				if err != nil {
					return time.Time{}, err
				}
				if len(p.Messages) > 0 {
					return time.Now(), markRead(ctx, recipient, to, p)
				}
				next = next.Add(pollEvery)
			}
		}
		hand := func(receive func(context.Context) (time.Time, error)) op {
			return func(ctx context.Context, _ int) (time.Duration, error) {
				type got struct {
					at  time.Time
					err error
				}
				ch := make(chan got, 1)
				go func() {
					at, err := receive(ctx)
					ch <- got{at, err}
				}()
				time.Sleep(2 * time.Millisecond) // let a waiting read block
				from := e.prefix + "-w8-lead"
				if _, err := sender.Messages().Send(workspace.AsActor(ctx, from), workspace.Write{Actor: from},
					workspace.NewMsg{To: []string{to}, Subject: "w8", Body: "hand-over"}); err != nil {
					return 0, err
				}
				sent := time.Now()
				g := <-ch
				if g.err != nil {
					return 0, g.err
				}
				return max(0, g.at.Sub(sent)), nil
			}
		}
		return hand(wait), hand(poll), func() {}, nil
	}}
}

// markRead moves to's cursor past what p returned.
func markRead(ctx context.Context, ws *workspace.Workspace, to string, p workspace.InboxPage) error {
	if len(p.Messages) == 0 {
		return fmt.Errorf("w8: an inbox read returned no message")
	}
	return ws.Messages().MarkRead(workspace.AsActor(ctx, to), to, p.Messages[len(p.Messages)-1].ID)
}
