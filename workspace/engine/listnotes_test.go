package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// TestListNotesOfAKindIsBoundedByItsKindAndBeforeKey: ListNotes with a
// kind returns only that kind's notes after (AfterKind, AfterKey) and
// before BeforeKey, in key order, on every backend, as a model of the
// same notes computes.
func TestListNotesOfAKindIsBoundedByItsKindAndBeforeKey(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") },
		"json":     func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") },
		"postgres": func(t *testing.T) string { return pgtest.NewDSN(t) },
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) { testListNotesBounds(t, dsn(t)) })
	}
}

func testListNotesBounds(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = ws.Close() }()
	kinds := []string{"ka", "kb", "kc"}
	keys := []string{"a/1", "a/2", "a0", "b/1", "b/2", "c"}
	type nk struct{ kind, key string }
	var all []nk
	for _, k := range kinds {
		for _, key := range keys {
			_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "t"}, workspace.NotePut{Kind: k, Key: key, Body: "x"})
			require.NoError(t, err)
			all = append(all, nk{k, key})
		}
	}
	for _, q := range []driver.NoteQuery{
		{Kind: "kb", Limit: 100},
		{Kind: "kb", Limit: 2},
		{Kind: "kb", AfterKind: "kb", AfterKey: "a/1", Limit: 100},
		{Kind: "kb", AfterKind: "kb", AfterKey: "a/", BeforeKey: "a0", Limit: 100},
		{Kind: "kb", AfterKind: "kb", AfterKey: "b/", BeforeKey: "b0", Limit: 1},
		{Kind: "kb", AfterKind: "kb", AfterKey: "c", Limit: 100},
		{Kind: "kb", AfterKind: "ka", AfterKey: "zzz", Limit: 100},
		{Kind: "kb", AfterKind: "kc", AfterKey: "", Limit: 100},
		{Kind: "kb", BeforeKey: "b/2", Limit: 100},
		{Kind: "kc", AfterKind: "kc", AfterKey: "b/2", Limit: 100},
		{AfterKind: "kb", AfterKey: "b/2", Limit: 4},
	} {
		var want []string
		for _, n := range all {
			if q.Kind != "" && n.kind != q.Kind {
				continue
			}
			if q.AfterKind != "" && (n.kind < q.AfterKind || n.kind == q.AfterKind && n.key <= q.AfterKey) {
				continue
			}
			if q.Kind != "" && q.BeforeKey != "" && n.key >= q.BeforeKey {
				continue
			}
			if len(want) < q.Limit {
				want = append(want, n.kind+" "+n.key)
			}
		}
		ns, err := engine.ListNotes(ctx, ws, q)
		require.NoError(t, err)
		var got []string
		for _, n := range ns {
			got = append(got, n.Kind+" "+n.Key)
		}
		require.Equal(t, want, got, fmt.Sprintf("%+v", q))
	}
}
