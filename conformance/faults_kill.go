package conformance

import (
	"testing"
)

const roleBatchWriter = "batch-writer"

func batchWriterChild(t *testing.T, dsn, arg string, say func(string, ...any)) {}
