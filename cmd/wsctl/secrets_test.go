package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
)

// TestWsctlNeverPrintsThePassword runs testdata/secrets: wsctl, as a real
// process, with postgres DSNs carrying a password (refused logins, and a
// working store whose server ignores the password), given by flag,
// environment and config file; neither stdout nor stderr ever shows it.
func TestWsctlNeverPrintsThePassword(t *testing.T) {
	requireScheme(t, "postgres")
	const secret = "Sekret-pw/?%"
	server := pgtest.ServerDSN(t)
	dsn := func(base, user string) string {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatalf("%v", err)
		}
		u.User = url.UserPassword(user, secret)
		return u.String()
	}
	good := dsn(pgtest.NewDSN(t), "postgres")
	p := scriptParams("testdata/secrets", func(string, string) string { return "" })
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("BAD_ROLE_DSN", dsn(server, pgtest.RandomName("nobody_")))
		env.Setenv("BAD_DB_DSN", strings.Replace(dsn(server, "postgres"), "/test?", "/"+pgtest.RandomName("nodb_")+"?", 1))
		env.Setenv("BAD_PORT_DSN", dsn("postgres://x@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", "postgres"))
		env.Setenv("GOOD_DSN", good)
		return nil
	}
	testscript.Run(t, p)
}
