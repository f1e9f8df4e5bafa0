package remote

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

type notes struct{ c *Client }

func notePath(kind, key string) (string, error) {
	k, err := segment("kind", kind)
	if err != nil {
		return "", err
	}
	s, err := segment("key", key)
	return "/v1/notes/" + k + "/" + s, err
}

func (n notes) Put(ctx context.Context, w workspace.Write, p workspace.NotePut) (workspace.Note, error) {
	var out workspace.Note
	path, err := notePath(p.Kind, p.Key)
	if err != nil {
		return out, err
	}
	body := wire.NoteBody{WriteFields: wire.WriteFieldsOf(w), Title: p.Title, Body: p.Body}
	err = n.c.callRetry(ctx, http.MethodPut, path, nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (n notes) Get(ctx context.Context, kind, key string) (workspace.Note, error) {
	var out workspace.Note
	path, err := notePath(kind, key)
	if err != nil {
		return out, err
	}
	err = n.c.call(ctx, http.MethodGet, path, nil, nil, &out)
	return out, err
}

func (n notes) Delete(ctx context.Context, w workspace.Write, kind, key string) error {
	path, err := notePath(kind, key)
	if err != nil {
		return err
	}
	return n.c.callRetry(ctx, http.MethodDelete, path, writeQuery(w), nil, nil, w.IdempotencyKey != "")
}

func (n notes) List(ctx context.Context, f workspace.NoteFilter) (workspace.NotePage, error) {
	q := url.Values{}
	setStr(q, "kind", f.Kind)
	setStr(q, "after", f.After)
	setInt(q, "limit", int64(f.Limit))
	var out workspace.NotePage
	err := n.c.call(ctx, http.MethodGet, "/v1/notes", q, nil, &out)
	return out, err
}
