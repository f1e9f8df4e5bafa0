package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// TestTokensBindTheActor runs a server that requires tokens: a token acts
// as its actor, cannot act as another (403), and is refused once revoked
// or expired (401); a missing or malformed token is 401.
func TestTokensBindTheActor(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{RequireToken: true})
	ctx := context.Background()
	tok, info, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "ann", Role: "writer", By: "admin"})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(tok, agents.TokenPrefix+info.ID+"_"))

	var who struct{ Actor, Role, Token string }
	e.ok(200, &who, "GET", "/v1/whoami", nil, bearer(tok)...)
	assert.Equal(t, "ann", who.Actor)
	assert.Equal(t, "writer", who.Role)

	var a workspace.Artifact
	e.ok(201, &a, "POST", "/v1/artifacts", map[string]any{"name": "mine", "content": "x"}, bearer(tok)...)
	assert.Equal(t, "ann", a.CreatedBy)
	// A header naming the token's own actor is no other actor.
	e.ok(201, &a, "POST", "/v1/artifacts", map[string]any{"name": "mine2", "content": "x"}, "Authorization", "Bearer "+tok, wire.ActorHeader, "ann")
	assert.Equal(t, "ann", a.CreatedBy)

	// Naming another actor, in the body or the header, is refused the
	// same way: 403 with the same words, nothing written.
	head := e.head()
	byBody := e.fails(403, "POST", "/v1/artifacts", map[string]any{"name": "theirs", "content": "x", "actor": "bob"}, bearer(tok)...)
	require.ErrorIs(t, byBody, wire.ErrForbidden)
	byHeader := e.fails(403, "POST", "/v1/artifacts", map[string]any{"name": "theirs", "content": "x"}, "Authorization", "Bearer "+tok, wire.ActorHeader, "bob")
	require.ErrorIs(t, byHeader, wire.ErrForbidden)
	assert.Equal(t, byBody.Error(), byHeader.Error())
	require.ErrorIs(t, e.fails(403, "GET", "/v1/whoami", nil, "Authorization", "Bearer "+tok, wire.ActorHeader, "bob"), wire.ErrForbidden,
		"a read naming another actor is refused too: it would read as them")
	require.ErrorIs(t, e.fails(403, "POST", "/v1/tasks/claim", map[string]any{"actor": "bob"}, bearer(tok)...), wire.ErrForbidden)
	require.ErrorIs(t, e.fails(403, "POST", "/v1/locks/r/acquire", map[string]any{"actor": "bob", "ttl": "1m"}, bearer(tok)...), wire.ErrForbidden)
	require.ErrorIs(t, e.fails(403, "POST", "/v1/batch", map[string]any{"actor": "bob", "ops": []any{}}, bearer(tok)...), wire.ErrForbidden)
	assert.Equal(t, head, e.head(), "nothing written")

	// The token notes are out of the API's reach.
	require.ErrorIs(t, e.fails(403, "GET", "/v1/notes/token/"+info.ID, nil, bearer(tok)...), wire.ErrForbidden)
	require.ErrorIs(t, e.fails(403, "PUT", "/v1/notes/token/x", map[string]any{"body": "{}"}, bearer(tok)...), wire.ErrForbidden)
	require.ErrorIs(t, e.fails(403, "POST", "/v1/batch", map[string]any{"ops": []any{map[string]any{"op": "put_note", "kind": "token", "key": "x"}}}, bearer(tok)...), wire.ErrForbidden)
	var np workspace.NotePage
	e.ok(200, &np, "GET", "/v1/notes", nil, bearer(tok)...)
	assert.Empty(t, np.Notes)

	flipped := tok[:len(tok)-1] + "a"
	if strings.HasSuffix(tok, "a") {
		flipped = tok[:len(tok)-1] + "b"
	}
	for _, hdr := range [][]string{
		nil,
		{wire.ActorHeader, "ann"},
		bearer("ast_nope"),
		bearer(tok + "x"),
		bearer(flipped),
		{"Authorization", "Basic " + tok},
	} {
		st, body := e.do("GET", "/v1/whoami", nil, hdr...)
		assert.Equal(t, http.StatusUnauthorized, st, "%v", hdr)
		assert.NotContains(t, string(body), tok[len(agents.TokenPrefix)+17:], "the secret is never echoed")
		require.ErrorIs(t, wire.DecodeError(st, body), wire.ErrUnauthorized)
	}
	// Health needs no token; the API's description does.
	st, _ := e.do("GET", "/healthz", nil)
	assert.Equal(t, 200, st)
	require.ErrorIs(t, e.fails(401, "GET", "/v1/openapi.json", nil), wire.ErrUnauthorized)
	e.ok(200, nil, "GET", "/v1/openapi.json", nil, bearer(tok)...)

	_, err = e.srv.Tokens().Revoke(ctx, "admin", info.ID)
	require.NoError(t, err)
	require.ErrorIs(t, e.fails(401, "GET", "/v1/whoami", nil, bearer(tok)...), wire.ErrUnauthorized)

	// A token that expires: accepted while it lives (long enough for a
	// loaded machine to make the request), refused once it has expired.
	short, shortInfo, err := e.srv.Tokens().Create(ctx, agents.TokenRequest{Actor: "bob", TTL: time.Second})
	require.NoError(t, err)
	e.ok(200, nil, "GET", "/v1/whoami", nil, bearer(short)...)
	time.Sleep(time.Until(shortInfo.ExpiresAt) + 50*time.Millisecond)
	require.ErrorIs(t, e.fails(401, "GET", "/v1/whoami", nil, bearer(short)...), wire.ErrUnauthorized)

	ts, err := e.srv.Tokens().List(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	assert.True(t, ts[0].Revoked || ts[1].Revoked)

	// Nothing in the log holds a secret.
	logs := e.logs.String()
	assert.Contains(t, logs, "route=\"GET /v1/whoami\"")
	assert.NotContains(t, logs, tok[len(agents.TokenPrefix)+17:])
	assert.NotContains(t, logs, short[len(agents.TokenPrefix)+17:])
}

// TestWithoutRequiredTokensAPresentedTokenStillBinds runs a loopback-style
// server: no token acts as the named actor, a token binds its actor, and a
// bad token is refused.
func TestWithoutRequiredTokensAPresentedTokenStillBinds(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	tok, _, err := e.srv.Tokens().Create(context.Background(), agents.TokenRequest{Actor: "ann"})
	require.NoError(t, err)
	var a workspace.Artifact
	e.ok(201, &a, "POST", "/v1/artifacts", map[string]any{"name": "x", "content": "x", "actor": "bob"})
	assert.Equal(t, "bob", a.CreatedBy)
	require.ErrorIs(t, e.fails(403, "POST", "/v1/artifacts", map[string]any{"name": "y", "content": "x", "actor": "bob"}, bearer(tok)...), wire.ErrForbidden)
	require.ErrorIs(t, e.fails(401, "POST", "/v1/artifacts", map[string]any{"name": "y", "content": "x", "actor": "bob"}, bearer("ast_bad")...), wire.ErrUnauthorized)
	// No actor at all is the workspace's own invalid input.
	err = e.fails(400, "POST", "/v1/artifacts", map[string]any{"name": "y", "content": "x"})
	var ie *workspace.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "actor", ie.Field)
}

func TestTokenCreateRejectsBadInput(t *testing.T) {
	e := newEnv(t, sqliteDSN(t), server.Options{})
	head := e.head()
	for _, r := range []agents.TokenRequest{
		{Actor: ""},
		{Actor: strings.Repeat("a", workspace.MaxActorLen+1)},
		{Actor: "ann", Role: "Not A Role"},
	} {
		_, _, err := e.srv.Tokens().Create(context.Background(), r)
		require.ErrorIs(t, err, workspace.ErrInvalid)
	}
	_, err := e.srv.Tokens().Revoke(context.Background(), "admin", "nosuchtoken")
	require.ErrorIs(t, err, workspace.ErrNotFound)
	assert.Equal(t, head, e.head(), "nothing written")
}
