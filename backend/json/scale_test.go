package jsonstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkScale measures how writes, lists and opening grow with the
// number of artifacts (figures in README.md):
//
//	go test -run '^$' -bench Scale -benchtime 200x ./backend/json
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("artifacts=%d", n), func(b *testing.B) { benchScale(b, n) })
	}
}

func benchScale(b *testing.B, n int) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "ws")
	ws, err := workspace.Open(ctx, "json:"+dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	w := workspace.Write{Actor: "bench"}
	for i := 0; i < n; i += 500 {
		var ops []workspace.Op
		for j := i; j < min(i+500, n); j++ {
			kind := "code"
			if j%10 == 0 {
				kind = "plan"
			}
			ops = append(ops, workspace.CreateArtifactOp{NewArtifact: workspace.NewArtifact{
				Name: fmt.Sprintf("dir%03d/file%06d.md", j%100, j), Kind: kind, Content: []byte(fmt.Sprintf("content %d", j)),
			}})
		}
		if _, err := ws.Commit(ctx, workspace.Batch{Actor: w.Actor, Ops: ops}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("update", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			name := fmt.Sprintf("dir%03d/file%06d.md", i%100, i%n)
			if _, err := ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: []byte(fmt.Sprint("v", i))}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("create", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: fmt.Sprintf("new/%d", i), Content: []byte("x")}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list-page", func(b *testing.B) {
		for b.Loop() {
			if _, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: "dir050/", Limit: 100}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list-kind-filter", func(b *testing.B) {
		for b.Loop() {
			if _, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Kind: "plan", Limit: 1000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	other, err := workspace.Open(ctx, "json:"+dir)
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	b.Run("write-then-read-from-other-handle", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			name := fmt.Sprintf("dir%03d/file%06d.md", i%100, i%n)
			if _, err := ws.Artifacts().Update(ctx, w, workspace.ByName(name), workspace.ArtifactChange{Content: []byte(fmt.Sprint("o", i))}); err != nil {
				b.Fatal(err)
			}
			if _, err := other.Artifacts().Get(ctx, workspace.ByName(name)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			h, err := workspace.Open(ctx, "json:"+dir)
			if err != nil {
				b.Fatal(err)
			}
			_ = h.Close()
		}
	})
}
