package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// sseRecord is one record of an event stream: an event, or (Data empty) a
// heartbeat's id.
type sseRecord struct {
	ID      int64
	Data    string
	Comment bool
}

// stream opens /v1/events (with the headers hdr, name then value) and
// returns its records as they come.
func stream(t *testing.T, base, query string, lastID int64, hdr ...string) (<-chan sseRecord, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/events"+query, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	ch := make(chan sseRecord, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var rec sseRecord
		have := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if have {
					ch <- rec
				}
				rec, have = sseRecord{}, false
			case strings.HasPrefix(line, ":"):
				rec.Comment = true
			case strings.HasPrefix(line, "id: "):
				rec.ID, _ = strconv.ParseInt(line[4:], 10, 64)
				have = true
			case strings.HasPrefix(line, "data: "):
				rec.Data = line[6:]
				have = true
			}
		}
	}()
	return ch, cancel
}

func putNotes(t *testing.T, ws *workspace.Workspace, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := ws.Notes().Put(context.Background(), workspace.Write{Actor: "ann"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "b"})
		require.NoError(t, err)
	}
}

func next(t *testing.T, ch <-chan sseRecord) (sseRecord, bool) {
	t.Helper()
	select {
	case r, ok := <-ch:
		return r, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no record from the stream in 10s")
		return sseRecord{}, false
	}
}

// TestStreamResumesAcrossARestartWithoutGapOrDuplicate follows the log
// from one server, stops it mid-stream (the stream ends cleanly), and
// resumes with Last-Event-ID on a new server over the same store: every
// event arrives once, in order.
func TestStreamResumesAcrossARestartWithoutGapOrDuplicate(t *testing.T) {
	dsn := sqliteDSN(t)
	e1 := newEnv(t, dsn, server.Options{})
	putNotes(t, e1.ws, 0, 5)
	ch, cancel := stream(t, e1.hs.URL, "", -1)
	defer cancel()
	var seen []int64
	for len(seen) < 3 {
		r, ok := next(t, ch)
		require.True(t, ok)
		if r.Data == "" {
			continue
		}
		var ev workspace.Event
		require.NoError(t, json.Unmarshal([]byte(r.Data), &ev))
		assert.Equal(t, r.ID, ev.Seq)
		seen = append(seen, r.ID)
	}
	e1.close()
	for range ch { // the stream ends: no hang
	}

	e2 := newEnv(t, dsn, server.Options{})
	putNotes(t, e2.ws, 5, 4)
	head := e2.head()
	ch2, cancel2 := stream(t, e2.hs.URL, "", seen[len(seen)-1])
	defer cancel2()
	for seen[len(seen)-1] < head {
		r, ok := next(t, ch2)
		require.True(t, ok)
		if r.Data != "" {
			seen = append(seen, r.ID)
		}
	}
	want := make([]int64, head)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, seen)
}

// TestHeartbeatCarriesTheSeqReached checks that a filtered, idle stream
// sends heartbeats whose id is the seq it has examined, so a client that
// resumes from it skips what did not match.
func TestHeartbeatCarriesTheSeqReached(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{Heartbeat: 50 * time.Millisecond})
	putNotes(t, e.ws, 0, 3)
	ch, cancel := stream(t, e.hs.URL, "?type=task.created", 0)
	defer cancel()
	for {
		r, ok := next(t, ch)
		require.True(t, ok)
		require.Empty(t, r.Data, "no event matches the filter")
		if r.Comment && r.ID == 3 {
			return
		}
	}
}

func TestStreamBelowTheFloorIsGone(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	putNotes(t, e.ws, 0, 5)
	require.NoError(t, e.ws.Events().Compact(context.Background(), 4))
	err := e.fails(410, "GET", "/v1/events?after=1", nil)
	var ce *workspace.CompactedError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(4), ce.Floor)
}
