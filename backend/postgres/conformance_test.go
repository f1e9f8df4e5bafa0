package postgres_test

import (
	"testing"

	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
)

// harness hands the suite a fresh schema per store.
type harness struct{}

func (harness) NewDSN(t testing.TB) string { return pgtest.NewDSN(t) }

func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }

func TestConformanceFloor(t *testing.T) { conformance.RunFloor(t, harness{}) }
