package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Counts of the message indexes, kept as sealed "msg-count" notes in the
// transactions that write and remove the entries they count, so that an
// inbox's unread and unacked counts read a few counters, not every entry:
//
//	msg-count  KEY = rcpt/b              rcpt's msg-box entries (Title: the count)
//	msg-count  KEY = rcpt/b/L/PREFIX     those whose id's timestamp (12 hex
//	                                     digits) begins with PREFIX, of length L
//	msg-count  KEY = rcpt/w              rcpt's msg-wait entries
//	msg-count  KEY = v1                  the counters are kept (see below)
//
// The entries of rcpt after an id c are those of c's millisecond after c
// (a walk of that millisecond's entries) and, for each level L, the
// counters of L after c's prefix under c's prefix of the level above: at
// most 255 counters a level, 5 levels. A counter that reaches zero is
// removed.
//
// A store written before the counters has no v1 note: its reads count by
// walking the entries, as before, and its first message write (a send,
// an ack, a removal) counts every entry once and writes v1.
const (
	msgCountKind   = "msg-count"
	msgCountMarker = "v1"
)

// msgCountLevels are the lengths of the timestamp prefixes counted.
var msgCountLevels = []int{4, 6, 8, 10, 12}

// msgStamp is the 12 hex digits of message id's timestamp.
func msgStamp(id string) (string, bool) {
	if len(id) < 13 || id[8] != '-' {
		return "", false
	}
	return id[:8] + id[9:13], true
}

func boxCounterKey(r string) string  { return rcptKey(r) + "/b" }
func waitCounterKey(r string) string { return rcptKey(r) + "/w" }
func levelKey(r string, l int, stamp string) string {
	return rcptKey(r) + "/b/" + strconv.Itoa(l) + "/" + stamp[:l]
}

// counted reports whether tx's store keeps the counters.
func counted(ctx context.Context, tx driver.ReadTx) (bool, error) {
	_, err := tx.Note(ctx, msgCountKind, msgCountMarker)
	if errors.Is(err, workspace.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// addCount adds d to counter key, removing it at zero.
func addCount(ctx context.Context, tx driver.Tx, key string, d int, by string, now time.Time) error {
	n, err := tx.Note(ctx, msgCountKind, key)
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		n = workspace.Note{Kind: msgCountKind, Key: key, Author: by, CreatedAt: now}
	case err != nil:
		return err
	}
	c, _ := strconv.Atoi(n.Title)
	c += d
	if c <= 0 {
		if err == nil {
			return tx.DeleteNote(ctx, msgCountKind, key)
		}
		return nil
	}
	n.Title = strconv.Itoa(c)
	n.Version++
	n.UpdatedAt, n.UpdatedBy = now, by
	return tx.PutNote(ctx, n)
}

// countEntry adds d to the counters of an index entry: kind's of rcpt r,
// message id.
func countEntry(ctx context.Context, tx driver.Tx, kind, r, id string, d int, by string, at time.Time) error {
	if kind == msgWaitKind {
		return addCount(ctx, tx, waitCounterKey(r), d, by, at)
	}
	if err := addCount(ctx, tx, boxCounterKey(r), d, by, at); err != nil {
		return err
	}
	stamp, ok := msgStamp(id)
	if !ok {
		return nil
	}
	for _, l := range msgCountLevels {
		if err := addCount(ctx, tx, levelKey(r, l, stamp), d, by, at); err != nil {
			return err
		}
	}
	return nil
}

// ensureCounted makes tx's store keep the counters: a store that has no
// v1 note has every box and wait entry counted now, in this transaction.
func ensureCounted(ctx context.Context, tx driver.Tx, by string, at time.Time) error {
	if ok, err := counted(ctx, tx); err != nil || ok {
		return err
	}
	// Counted in memory, then written: one write per counter.
	counts := map[string]int{}
	for _, kind := range []string{msgBoxKind, msgWaitKind} {
		err := eachNote(ctx, tx, kind, func(n workspace.Note) error {
			hash, id, ok := strings.Cut(n.Key, "/")
			if !ok {
				return nil
			}
			if kind == msgWaitKind {
				counts[hash+"/w"]++
				return nil
			}
			counts[hash+"/b"]++
			if stamp, ok := msgStamp(id); ok {
				for _, l := range msgCountLevels {
					counts[hash+"/b/"+strconv.Itoa(l)+"/"+stamp[:l]]++
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for key, c := range counts {
		if err := tx.PutNote(ctx, workspace.Note{Kind: msgCountKind, Key: key, Title: strconv.Itoa(c), Author: by,
			Version: 1, CreatedAt: at, UpdatedAt: at, UpdatedBy: by}); err != nil {
			return err
		}
	}
	return tx.PutNote(ctx, workspace.Note{Kind: msgCountKind, Key: msgCountMarker, Title: "message index counters",
		Author: by, Version: 1, CreatedAt: at, UpdatedAt: at, UpdatedBy: by})
}

// readCount reads counter key (0 when absent).
func readCount(ctx context.Context, tx driver.ReadTx, key string) (int, error) {
	n, err := tx.Note(ctx, msgCountKind, key)
	if errors.Is(err, workspace.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	c, _ := strconv.Atoi(n.Title)
	return c, nil
}

// sumCounters sums the counters keyed after after and before before.
func sumCounters(ctx context.Context, tx driver.ReadTx, after, before string) (int, error) {
	q := driver.NoteQuery{Kind: msgCountKind, AfterKind: msgCountKind, AfterKey: after, BeforeKey: before, Limit: 256}
	sum := 0
	for {
		page, err := tx.ListNotes(ctx, q)
		if err != nil {
			return 0, err
		}
		for _, n := range page {
			c, _ := strconv.Atoi(n.Title)
			sum += c
		}
		if len(page) < q.Limit {
			return sum, nil
		}
		q.AfterKey = page[len(page)-1].Key
	}
}

// boxAfter is how many msg-box entries r has with an id above c.
func boxAfter(ctx context.Context, tx driver.ReadTx, r, c string) (int, error) {
	if c == "" {
		return readCount(ctx, tx, boxCounterKey(r))
	}
	stamp, ok := msgStamp(c)
	if !ok {
		// Not a message id (never a cursor's): walk.
		return gatherIDs(ctx, tx, msgBoxKind, []string{r}, c, maxPageLimit).count()
	}
	// c's millisecond, after c.
	ms := newIDStream(ctx, tx, msgBoxKind, r, c, 64)
	ms.q.BeforeKey = rcptKey(r) + "/" + c[:13] + "~"
	n, err := merged{ms}.count()
	if err != nil {
		return 0, err
	}
	parent := ""
	for _, l := range msgCountLevels {
		base := rcptKey(r) + "/b/" + strconv.Itoa(l) + "/"
		s, err := sumCounters(ctx, tx, base+stamp[:l], base+parent+"~")
		if err != nil {
			return 0, err
		}
		n += s
		parent = stamp[:l]
	}
	return n, nil
}

// inboxCounts is q's inbox's unread and unacked counts from the
// counters: the sum over its recipients, less what is counted twice (a
// message in two of their boxes, or owed by two: only ever through a
// role, so only the roles' entries are walked for it).
func inboxCounts(ctx context.Context, tx driver.ReadTx, rcpts []string, cursor string) (unread, unacked int, err error) {
	for _, r := range rcpts {
		b, err := boxAfter(ctx, tx, r, cursor)
		if err != nil {
			return 0, 0, err
		}
		w, err := readCount(ctx, tx, waitCounterKey(r))
		if err != nil {
			return 0, 0, err
		}
		unread, unacked = unread+b, unacked+w
	}
	if len(rcpts) < 2 {
		return unread, unacked, nil
	}
	// An entry of a role's counted already under a recipient before it.
	twice := func(kind string, i int, after string) (int, error) {
		n := 0
		s := newIDStream(ctx, tx, kind, rcpts[i], after, maxPageLimit)
		for {
			id, err := s.peek()
			if err != nil || id == "" {
				return n, err
			}
			s.buf = s.buf[1:]
			for _, r := range rcpts[:i] {
				_, err := tx.Note(ctx, kind, rcptKey(r)+"/"+id)
				if err == nil {
					n++
					break
				}
				if !errors.Is(err, workspace.ErrNotFound) {
					return 0, err
				}
			}
		}
	}
	for i := 1; i < len(rcpts); i++ {
		b, err := twice(msgBoxKind, i, cursor)
		if err != nil {
			return 0, 0, err
		}
		w, err := twice(msgWaitKind, i, "")
		if err != nil {
			return 0, 0, err
		}
		unread, unacked = unread-b, unacked-w
	}
	return unread, unacked, nil
}
