package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingBackend records the Config it was opened with and fails the open:
// these tests are about DSN handling, not storage.
type recordingBackend struct {
	params []string
	got    *Config
	err    error
}

func (d *recordingBackend) Open(_ context.Context, cfg Config, _ workspace.Options) (*workspace.Workspace, error) {
	*d.got = cfg
	return nil, d.err
}

func (d *recordingBackend) Params() []string { return d.params }

func registerTestBackend(t *testing.T, scheme string, params ...string) *Config {
	t.Helper()
	var got Config
	registryMu.Lock()
	registry[scheme] = &recordingBackend{params: params, got: &got, err: errors.New("test backend: no store")}
	registryMu.Unlock()
	t.Cleanup(func() {
		registryMu.Lock()
		delete(registry, scheme)
		registryMu.Unlock()
	})
	return &got
}

func TestParseDSNStripsOwnParameters(t *testing.T) {
	registerTestBackend(t, "testfile", "ws_extra")
	p, err := ParseDSN("testfile:dir/ws.db?ws_poll=10ms&mode=ro&ws_extra=1&ws_automigrate=true")
	require.NoError(t, err)
	assert.Equal(t, "testfile", p.Config.Scheme)
	assert.Equal(t, "dir/ws.db?mode=ro", p.Config.Target)
	assert.Equal(t, "testfile:dir/ws.db?mode=ro", p.Config.DSN)
	assert.Equal(t, map[string]string{"ws_extra": "1"}, p.Config.Params)
	assert.True(t, p.Config.AutoMigrate)
	assert.Equal(t, "10ms", p.Options.PollInterval.String())
}

func TestParseDSNGroupWait(t *testing.T) {
	registerTestBackend(t, "testfile")
	p, err := ParseDSN("testfile:x?ws_group_wait=1ms")
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, p.Options.GroupWait)
	p, err = ParseDSN("testfile:x?ws_group_wait=0")
	require.NoError(t, err)
	assert.Negative(t, p.Options.GroupWait, "0 in a DSN is never wait, not the default")
	assert.Equal(t, workspace.DefaultGroupWait, workspace.Options{}.WithDefaults().GroupWait)
}

func TestParseDSNPolicyRecheck(t *testing.T) {
	registerTestBackend(t, "testfile")
	p, err := ParseDSN("testfile:x?ws_policy_recheck=2s")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, p.Options.PolicyRecheck)
	p, err = ParseDSN("testfile:x?ws_policy_recheck=0")
	require.NoError(t, err)
	assert.Negative(t, p.Options.PolicyRecheck, "0 in a DSN is every operation, not the default")
	assert.Equal(t, workspace.DefaultPolicyRecheck, workspace.Options{}.WithDefaults().PolicyRecheck)
	for _, bad := range []string{"soon", "-1s", "2h"} {
		_, err := ParseDSN("testfile:x?ws_policy_recheck=" + bad)
		assert.ErrorIs(t, err, workspace.ErrInvalid, bad)
	}
}

// Options given to Open override the DSN's ws_ parameters, field by field;
// a zero field keeps the DSN's.
func TestOpenOptionsOverrideTheDSNFieldByField(t *testing.T) {
	registerTestBackend(t, "testfile")
	p, err := ParseDSN("testfile:x?ws_group_wait=1ms&ws_poll=20ms")
	require.NoError(t, err)
	o := mergeOptions(p.Options, workspace.Options{GroupWait: -1, IdempotencyTTL: time.Hour})
	assert.Negative(t, o.GroupWait, "the option given to Open wins")
	assert.Equal(t, 20*time.Millisecond, o.PollInterval, "the DSN's stays where the option is zero")
	assert.Equal(t, time.Hour, o.IdempotencyTTL)
	o = mergeOptions(p.Options, workspace.Options{})
	assert.Equal(t, time.Millisecond, o.GroupWait)
}

func TestParseDSNURLForm(t *testing.T) {
	registerTestBackend(t, "testurl", "ws_schema")
	p, err := ParseDSN("testurl://u:secret@host:5432/db?sslmode=disable&ws_schema=team1")
	require.NoError(t, err)
	assert.Equal(t, "testurl://u:secret@host:5432/db?sslmode=disable", p.Config.DSN)
	assert.Equal(t, p.Config.DSN, p.Config.Target)
	assert.Equal(t, "team1", p.Config.Params["ws_schema"])
}

func TestParseDSNRejectsUnknownOwnParameter(t *testing.T) {
	registerTestBackend(t, "testfile")
	_, err := ParseDSN("testfile:x?ws_pol=10ms")
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), "ws_pol")
	assert.Contains(t, err.Error(), "ws_poll", "the error lists the known parameters")
}

func TestParseDSNBadValues(t *testing.T) {
	registerTestBackend(t, "testfile")
	for _, dsn := range []string{
		"testfile:x?ws_poll=fast",
		"testfile:x?ws_poll=0s",
		"testfile:x?ws_automigrate=maybe",
		"testfile:x?ws_max_artifact_size=-1",
		"testfile:x?ws_idempotency_ttl=1ms",
		"testfile:x?ws_group_wait=-1ms",
		"testfile:x?ws_group_wait=1s",
		"testfile:x?%zz",
	} {
		_, err := ParseDSN(dsn)
		assert.ErrorIs(t, err, workspace.ErrInvalid, dsn)
	}
}

func TestParseDSNUnknownSchemeNamesTheImport(t *testing.T) {
	_, err := ParseDSN("postgres://u@h/db")
	if errors.Is(err, workspace.ErrInvalid) { // the postgres backend is not linked into this test
		assert.Contains(t, err.Error(), "backend/postgres")
	}
	_, err = ParseDSN("nosuch:x")
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), `"nosuch"`)
	_, err = ParseDSN("no scheme at all")
	require.ErrorIs(t, err, workspace.ErrInvalid)
}

func TestOpenNeverPrintsThePassword(t *testing.T) {
	got := registerTestBackend(t, "testurl")
	_, err := workspace.Open(context.Background(), "testurl://alice:hunter2@db.example:5432/ws?sslmode=disable")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
	assert.Equal(t, "testurl://alice:hunter2@db.example:5432/ws?sslmode=disable", got.DSN, "the driver still gets the password")

	_, err = workspace.Open(context.Background(), "testurl://alice:hunter2@db.example/ws?ws_bogus=1")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}

func TestParseDSNUnixSocketURL(t *testing.T) {
	registerTestBackend(t, "testunix+http", "ws_token")
	p, err := ParseDSN("testunix+http:///run/agent%20space/ws.sock?ws_token=ast_a_b")
	require.NoError(t, err)
	assert.Equal(t, "testunix+http:///run/agent%20space/ws.sock", p.Config.DSN, "the token leaves the DSN")
	assert.Equal(t, "ast_a_b", p.Config.Params["ws_token"])
	assert.Equal(t, "testunix+http", p.Config.Scheme)
}

func TestOpenNeverPrintsTheToken(t *testing.T) {
	registerTestBackend(t, "testurl", "ws_token")
	_, err := workspace.Open(context.Background(), "testurl://h:1/?ws_token=ast_abc_hunter2")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
	_, err = workspace.Open(context.Background(), "testurl://h:1/?ws_token=ast_abc_hunter2&ws_bogus=1")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}

func TestRegisterTwicePanics(t *testing.T) {
	registerTestBackend(t, "testdup")
	assert.Panics(t, func() { Register("testdup", &recordingBackend{}) })
}

func TestRedactErrorHidesThePasswordOfADSNInAParameter(t *testing.T) {
	err := RedactError(errors.New("listen: auth failed for hunter2"), "postgres://h/db?ws_listen_dsn=postgres%3A%2F%2Fa%3Ahunter2%40h2%2Fdb")
	assert.NotContains(t, err.Error(), "hunter2")
}

func TestRedactErrorKeepsTheChain(t *testing.T) {
	err := RedactError(errors.Join(workspace.ErrSchema, errors.New("auth failed for hunter2")), "postgres://a:hunter2@h/db")
	assert.ErrorIs(t, err, workspace.ErrSchema)
	assert.False(t, strings.Contains(err.Error(), "hunter2"))
}
