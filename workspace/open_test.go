package workspace

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://alice:hunter2@h:5432/db?sslmode=disable":                   "postgres://alice:xxxxx@h:5432/db?sslmode=disable",
		"postgres://alice@h/db":                                                "postgres://alice@h/db",
		"postgres://h/db?password=hunter2&user=a":                              "postgres://h/db?password=xxxxx&user=a",
		"host=h user=a password=hunter2 dbname=d":                              "host=h user=a password=xxxxx dbname=d",
		"host=h password='hun ter2' dbname=d":                                  "host=h password=xxxxx dbname=d",
		"sqlite:.agentspace/workspace.db":                                      "sqlite:.agentspace/workspace.db",
		"postgres://h/db?ws_listen_dsn=postgres%3A%2F%2Fa%3Ahunter2%40h2%2Fdb": "postgres://h/db?ws_listen_dsn=postgres%3A%2F%2Fa%3Axxxxx%40h2%2Fdb",
		"http://127.0.0.1:7465?ws_token=ast_abc_hunter2":                       "http://127.0.0.1:7465?ws_token=xxxxx",
		"https://ws.example/team?ws_token=ast_abc_hunter2&x=1":                 "https://ws.example/team?ws_token=xxxxx&x=1",
		"http+unix:///run/ws.sock?ws_token=ast_abc_hunter2":                    "http+unix:///run/ws.sock?ws_token=xxxxx",
	} {
		assert.Equal(t, want, RedactDSN(in), in)
	}
}
