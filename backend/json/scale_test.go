package jsonstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkScale measures how writes, lists and opening grow with the
// number of artifacts (figures in README.md):
//
//	go test -run '^$' -bench Scale ./backend/json
//
// The tree is generated directly in the store's format (no fsync), so that
// 100,000 artifacts take a minute, not an hour, to set up.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("artifacts=%d", n), func(b *testing.B) { benchScale(b, n) })
	}
}

func scaleName(j int) string { return fmt.Sprintf("dir%03d/file%06d.md", j%100, j) }

// generateTree writes n artifacts and their creation events into dir.
func generateTree(b *testing.B, dir string, n int) {
	ws, err := Open(context.Background(), dir, false, workspace.Options{})
	if err != nil {
		b.Fatal(err)
	}
	_ = ws.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var log bytes.Buffer
	for j := 0; j < n; j++ {
		id := uuid.Must(uuid.NewV7()).String()
		content := []byte(fmt.Sprintf("content %d", j))
		sum := sha256.Sum256(content)
		kind := "code"
		if j%10 == 0 {
			kind = "plan"
		}
		a := workspace.Artifact{ID: id, Name: scaleName(j), Kind: kind, Owner: "bench", Version: 1, ContentType: "text/markdown",
			SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), CreatedAt: now, CreatedBy: "bench", UpdatedAt: now, UpdatedBy: "bench"}
		meta, err := encodeArtifact(&artRec{id: id, name: a.Name, versions: []workspace.Artifact{a}})
		if err != nil {
			b.Fatal(err)
		}
		versions, err := encodeVersions([]workspace.Artifact{a})
		if err != nil {
			b.Fatal(err)
		}
		for p, data := range map[string][]byte{artifactPath(id): meta, versionsPath(id): versions, blobPath(id, a.SHA256): content, artsDir + "/" + a.Name: content} {
			p = filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(p), dirMode); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, data, fileMode); err != nil {
				b.Fatal(err)
			}
		}
		line, err := encodeEventLine(workspace.Event{Seq: int64(j + 1), Time: now, Actor: "bench", Type: workspace.EventArtifactCreated,
			Subject: workspace.Subject{Kind: workspace.SubjectArtifact, ID: id, Name: a.Name}, Version: 1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		log.Write(line)
	}
	if err := os.WriteFile(filepath.Join(dir, eventsFile), log.Bytes(), fileMode); err != nil {
		b.Fatal(err)
	}
}

func benchScale(b *testing.B, n int) {
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "ws")
	generateTree(b, dir, n)
	opts := workspace.Options{Logger: slog.New(slog.DiscardHandler)}
	start := time.Now()
	ws, err := Open(ctx, dir, false, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d artifacts: first open %v", n, time.Since(start))
	defer ws.Close()
	w := workspace.Write{Actor: "bench"}
	b.Run("update", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := ws.Artifacts().Update(ctx, w, workspace.ByName(scaleName(i*7919%n)), workspace.ArtifactChange{Content: []byte(fmt.Sprint("v", i))}); err != nil {
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
	other, err := Open(ctx, dir, false, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	b.Run("write-then-read-from-other-handle", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			name := scaleName(i * 7919 % n)
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
			h, err := Open(ctx, dir, false, opts)
			if err != nil {
				b.Fatal(err)
			}
			_ = h.Close()
		}
	})
}
