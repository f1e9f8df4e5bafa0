package conformance

import (
	"bufio"
	"testing"
)

const roleLoadAgent = "load-agent"

func testLoad(t *testing.T, h Harness) {}

func loadAgentChild(t *testing.T, dsn, arg string, in *bufio.Scanner, say func(string, ...any)) {}
