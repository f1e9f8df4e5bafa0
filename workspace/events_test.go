package workspace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestEventQueryMatchesEveryFilterButTheCursor(t *testing.T) {
	at := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	e := Event{Seq: 7, Time: at, Actor: "alice", Type: "artifact.updated",
		Subject: Subject{Kind: SubjectArtifact, ID: "id1", Name: "plans/a.md"}}
	for name, c := range map[string]struct {
		q    EventQuery
		want bool
	}{
		"no filter":            {EventQuery{AfterSeq: 100}, true},
		"one of the types":     {EventQuery{Types: []string{"task.created", "artifact.updated"}}, true},
		"none of the types":    {EventQuery{Types: []string{"task.created"}}, false},
		"actor":                {EventQuery{Actor: "alice"}, true},
		"another actor":        {EventQuery{Actor: "bob"}, false},
		"subject kind":         {EventQuery{SubjectKind: SubjectArtifact}, true},
		"another subject kind": {EventQuery{SubjectKind: SubjectTask}, false},
		"subject id":           {EventQuery{SubjectID: "id1"}, true},
		"another subject id":   {EventQuery{SubjectID: "id2"}, false},
		"subject name":         {EventQuery{SubjectName: "plans/a.md"}, true},
		"another subject name": {EventQuery{SubjectName: "plans/b.md"}, false},
		"since is inclusive":   {EventQuery{Since: at}, true},
		"since after":          {EventQuery{Since: at.Add(time.Microsecond)}, false},
		"until is exclusive":   {EventQuery{Until: at}, false},
		"until after":          {EventQuery{Until: at.Add(time.Microsecond)}, true},
		"all at once":          {EventQuery{Types: []string{"artifact.updated"}, Actor: "alice", SubjectName: "plans/a.md", Since: at, Until: at.Add(time.Second)}, true},
	} {
		assert.Equal(t, c.want, c.q.Matches(e), name)
	}
}
