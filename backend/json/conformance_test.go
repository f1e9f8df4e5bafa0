package jsonstore_test

import (
	"testing"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/conformance"
)

type harness struct{}

func (harness) NewDSN(t testing.TB) string {
	return "json:" + t.TempDir() + "/ws?ws_poll=10ms"
}

func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }

func TestConformanceFloor(t *testing.T) { conformance.RunFloor(t, harness{}) }
