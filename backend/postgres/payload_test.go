package postgres

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func TestNotifyPayloadRoundTrips(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 30, 0, 123456000, time.UTC)
	evs := []workspace.Event{
		{Time: now, Actor: "a", Type: workspace.EventArtifactUpdated,
			Subject: workspace.Subject{Kind: "artifact", ID: "01J", Name: "plans/ü \" x.md"}, Version: 7, Message: "why\nnot"},
		{Time: now, Actor: "a", Type: workspace.EventNoteDeleted, Subject: workspace.Subject{Kind: "note"}},
	}
	p := notifyPayload(41, evs)
	seq, got := parsePayload(p)
	assert.Equal(t, int64(42), seq)
	require.Len(t, got, 2)
	for i := range evs {
		want := evs[i]
		want.Seq = 41 + int64(i)
		assert.Equal(t, want, got[i])
	}
}

func TestNotifyPayloadTooLargeCarriesOnlyTheSeq(t *testing.T) {
	big := workspace.Event{Time: time.Now().UTC(), Actor: "a", Type: "artifact.updated", Message: strings.Repeat("m", maxPayload)}
	p := notifyPayload(9, []workspace.Event{big})
	assert.Equal(t, "9", p)
	seq, got := parsePayload(p)
	assert.Equal(t, int64(9), seq)
	assert.Nil(t, got)
}

func TestParsePayloadRefusesWhatItCannotTrust(t *testing.T) {
	for _, p := range []string{"", "x", "-3", "5 [", "5 []", `5 [{"s":4}]`, `5 [{"s":3},{"s":5}]`, `6 [{"s":4},{"s":5}]`} {
		seq, evs := parsePayload(p)
		assert.Nil(t, evs, "%q", p)
		if n, err := strconv.ParseInt(strings.SplitN(p, " ", 2)[0], 10, 64); err == nil && n > 0 {
			assert.Equal(t, n, seq, "%q", p)
		} else {
			assert.Zero(t, seq, "%q", p)
		}
	}
}

func TestEarlyReadsNameTheirSchema(t *testing.T) {
	r := newEarlyReads("team1")
	for _, q := range []string{r.byName, r.byID, r.lease, r.leaseOfArtifact} {
		for _, table := range []string{"artifacts", "leases"} {
			assert.NotContains(t, q, "FROM "+table, "an unqualified table in %q", q)
		}
		assert.Contains(t, q, `FROM "team1".`)
	}
}
