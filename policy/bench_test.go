package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentspace/agentspace/policy"
)

// BenchmarkCheck50Rules is the evaluator's own cost per operation under a
// 50-rule policy: the actor's role is the last one and only its last
// pattern grants, so the check walks all of the role's rules.
func BenchmarkCheck50Rules(b *testing.B) {
	var src strings.Builder
	for r := range 10 {
		fmt.Fprintf(&src, "[roles.r%d]\nartifacts_write = [\"x%d/**\", \"y%d/*.md\", \"z%d/a/**/b\", \"w%d/*\", \"bench/*\"]\n", r, r, r, r, r)
	}
	src.WriteString("[actors]\nbench = [\"r9\"]\n")
	p, err := policy.Parse([]byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !p.Allowed("bench", policy.ArtifactWrite, "bench/a").Allowed {
			b.Fatal("refused")
		}
	}
}
