package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDocsNameThePausedExitCode checks that docs/cli.md's table and
// wsctl --help name exit 11, as TestDocsListEveryExitCode does for the
// run of codes before it.
func TestDocsNameThePausedExitCode(t *testing.T) {
	cli := readDoc(t, "docs/cli.md")
	var help strings.Builder
	run(context.Background(), []string{"--help"}, strings.NewReader(""), &help, &help, func(string) string { return "" })
	assert.Regexp(t, fmt.Sprintf(`(?m)^\| %d \| paused`, exitPaused), cli)
	assert.Regexp(t, fmt.Sprintf(`, %d paused`, exitPaused), strings.Join(strings.Fields(help.String()), " "))
}
