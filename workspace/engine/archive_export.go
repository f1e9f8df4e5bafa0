package engine

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

const archivePage = 1000

// Export writes the whole workspace to w as an archive (see
// workspace.ArchiveFormat), read from one consistent snapshot. It returns
// what it wrote.
func (h *handle) Export(ctx context.Context, w io.Writer, opts workspace.ArchiveOptions) (workspace.ArchiveStats, error) {
	if err := h.alive(); err != nil {
		return workspace.ArchiveStats{}, err
	}
	// An archive holds every record and the whole log: filtering it would
	// break its chain and make a restore lose data, so it needs the admin
	// "export" right instead (checked for ctx's principal, if any).
	if err := h.allowAdmin(ctx, policy.AdminExport); err != nil {
		return workspace.ArchiveStats{}, err
	}
	p := &progress{opts: opts}
	err := h.view(ctx, "export", func(tx driver.ReadTx) error {
		p.stats = workspace.ArchiveStats{}
		bw := bufio.NewWriterSize(w, 1<<16)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(archiveHeader{Type: recHeader, Format: workspace.ArchiveFormat, Version: workspace.ArchiveVersion}); err != nil {
			return err
		}
		if err := exportTasks(ctx, tx, enc, p); err != nil {
			return err
		}
		if err := exportNotes(ctx, tx, enc, p); err != nil {
			return err
		}
		floor, err := tx.Floor(ctx)
		if err != nil {
			return err
		}
		head, err := tx.Head(ctx)
		if err != nil {
			return err
		}
		// Deleted artifacts and released leases, which no live listing
		// shows.
		ids, resources, err := inventory(ctx, tx, floor)
		if err != nil {
			return err
		}
		if err := exportArtifacts(ctx, tx, enc, p, ids); err != nil {
			return err
		}
		if err := exportLeases(ctx, tx, enc, p, resources); err != nil {
			return err
		}
		if err := exportLog(ctx, tx, enc, p, floor, head); err != nil {
			return err
		}
		if err := enc.Encode(archiveEnd{Type: recEnd, Counts: p.stats}); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return p.stats, err
	}
	p.done()
	return p.stats, nil
}

func exportTasks(ctx context.Context, tx driver.ReadTx, enc *json.Encoder, p *progress) error {
	f := workspace.TaskFilter{Limit: archivePage}
	for {
		ts, err := tx.ListTasks(ctx, f)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if err := enc.Encode(archiveOut{Type: recTask, Task: &t}); err != nil {
				return err
			}
			p.stats.Tasks++
			p.tick()
		}
		if len(ts) < archivePage {
			return nil
		}
		f.After = ts[len(ts)-1].ID
	}
}

func exportNotes(ctx context.Context, tx driver.ReadTx, enc *json.Encoder, p *progress) error {
	q := driver.NoteQuery{Limit: archivePage}
	for {
		ns, err := tx.ListNotes(ctx, q)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if err := enc.Encode(archiveOut{Type: recNote, Note: &n}); err != nil {
				return err
			}
			p.stats.Notes++
			p.tick()
		}
		if len(ns) < archivePage {
			return nil
		}
		q.AfterKind, q.AfterKey = ns[len(ns)-1].Kind, ns[len(ns)-1].Key
	}
}

// exportArtifacts writes every version of the artifacts in ids (true:
// live) plus every live one, by id.
func exportArtifacts(ctx context.Context, tx driver.ReadTx, enc *json.Encoder, p *progress, ids map[string]bool) error {
	f := workspace.ArtifactFilter{Limit: archivePage}
	for {
		as, err := tx.ListArtifacts(ctx, f)
		if err != nil {
			return err
		}
		for _, a := range as {
			ids[a.ID] = true
		}
		if len(as) < archivePage {
			break
		}
		f.After = as[len(as)-1].Name
	}
	order := make([]string, 0, len(ids))
	for id := range ids {
		order = append(order, id)
	}
	slices.Sort(order)
	for _, id := range order {
		versions, err := tx.ArtifactVersions(ctx, id)
		if errors.Is(err, workspace.ErrNotFound) || (err == nil && len(versions) == 0) {
			continue // named by a conflict event only, or removed by retention
		}
		if err != nil {
			return fmt.Errorf("artifact %s versions: %w", id, err)
		}
		p.stats.Artifacts++
		seen := map[string]bool{}
		for _, v := range versions {
			v.ID, v.Content = id, nil
			if !seen[v.SHA256] {
				seen[v.SHA256] = true
				content, err := tx.Content(ctx, id, v.Version, v.SHA256)
				if err != nil {
					return fmt.Errorf("artifact %s version %d content: %w", id, v.Version, err)
				}
				// Empty content is written too ("content": ""): its
				// absence would mean "the same as an earlier version".
				v.Content = content
				if v.Content == nil {
					v.Content = []byte{}
				}
				p.stats.ContentBytes += int64(len(content))
			}
			if err := enc.Encode(archiveOut{Type: recArtifact, Artifact: &v}); err != nil {
				return err
			}
			p.stats.Versions++
			p.tick()
		}
		if !ids[id] {
			if err := enc.Encode(archiveDeleted{Type: recDeleted, ID: id}); err != nil {
				return err
			}
			p.stats.DeletedArtifacts++
			p.tick()
		}
	}
	return nil
}

func exportLeases(ctx context.Context, tx driver.ReadTx, enc *json.Encoder, p *progress, resources map[string]bool) error {
	live, err := tx.ListLeases(ctx, tx.Now())
	if err != nil {
		return err
	}
	for _, l := range live {
		resources[l.Resource] = true
	}
	order := make([]string, 0, len(resources))
	for r := range resources {
		order = append(order, r)
	}
	slices.Sort(order)
	for _, r := range order {
		l, err := tx.Lease(ctx, r)
		if errors.Is(err, workspace.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("lease %q: %w", r, err)
		}
		if err := enc.Encode(archiveOut{Type: recLease, Lease: &l}); err != nil {
			return err
		}
		p.stats.Leases++
		p.tick()
	}
	return nil
}

// exportLog writes the log record and the events, with the hash chain.
func exportLog(ctx context.Context, tx driver.ReadTx, enc *json.Encoder, p *progress, floor, head int64) error {
	base, err := tx.ChainBase(ctx)
	if err != nil {
		return err
	}
	if err := enc.Encode(archiveLog{Type: recLog, Floor: floor, Head: head, FloorHash: hex.EncodeToString(base)}); err != nil {
		return err
	}
	after := max(floor-1, 0)
	for {
		evs, err := tx.ChainEvents(ctx, after, archivePage)
		if err != nil {
			return err
		}
		for _, ce := range evs {
			p.stats.Events++
			p.tick()
			if err := enc.Encode(archiveOut{Type: recEvent, Event: &ce.Event, Hash: hex.EncodeToString(ce.Hash)}); err != nil {
				return err
			}
			after = ce.Event.Seq
		}
		if len(evs) < archivePage {
			return nil
		}
	}
}
