package sqlite_test

import (
	"path/filepath"
	"testing"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/conformance"
)

// harness hands out a fresh database file per case; a short poll interval
// keeps cross-handle cases quick, and an index batch of 3 puts every
// case's filtered reads across the event log's indexed boundary.
type harness struct{}

func (harness) NewDSN(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") + "?ws_poll=10ms&ws_index_batch=3"
}

func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }

func TestConformanceFloor(t *testing.T) { conformance.RunFloor(t, harness{}) }
