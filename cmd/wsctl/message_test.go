package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentspace/agentspace/workspace"
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

// TestHookLineCostsFewBytesPerMessage measures what the inbox hook adds
// to an agent's context when one message arrives (docs/agents.md states
// it): the line, of a size that does not grow with the message.
func TestHookLineCostsFewBytesPerMessage(t *testing.T) {
	one := workspace.InboxPage{Messages: []workspace.Msg{{ID: "01a23450-c4f2-7042-92d5-dea21c781dce", From: "lead", Type: "question",
		Subject: strings.Repeat("long subject ", 20), Body: strings.Repeat("a long body ", 200), RequiresAck: true, Pending: []string{"bob"}}}}
	line := newMessagesLine(one)
	t.Logf("one message: %d bytes: %s", len(line), line)
	assert.Equal(t, "agentspace: 1 new message(s) from lead, 1 need your ack: `wsctl inbox --unread`.", line)
	assert.LessOrEqual(t, len(line), 100)
}
