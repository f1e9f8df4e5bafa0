package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Verify implements workspace.Verifier: it recomputes the event chain
// from the floor's base and each artifact version's SHA-256, in one
// snapshot.
func (h *handle) Verify(ctx context.Context) (workspace.VerifyReport, error) {
	if err := h.alive(); err != nil {
		return workspace.VerifyReport{}, err
	}
	// It reads every record, as an export does: the same admin right, for
	// a caller with a principal (a client of the server, wsctl --as).
	if err := h.allowAdmin(ctx, policy.AdminExport); err != nil {
		return workspace.VerifyReport{}, err
	}
	return verifyStore(ctx, h.st)
}

// verifyStore is Verify of st, which may be read-only (a snapshot's copy).
func verifyStore(ctx context.Context, st driver.Store) (workspace.VerifyReport, error) {
	var r workspace.VerifyReport
	err := st.View(ctx, func(tx driver.ReadTx) error {
		r = workspace.VerifyReport{}
		ids, err := verifyChain(ctx, tx, &r)
		if err != nil {
			return err
		}
		return verifyContents(ctx, tx, ids, &r)
	})
	return r, wrapErr("verify", err)
}

// BackupFile implements workspace.FileBackuper over a FileSnapshotter:
// the copy must pass the store's integrity check and Verify, read-only,
// or it is removed.
func (h *handle) BackupFile(ctx context.Context, path string) (workspace.VerifyReport, error) {
	if err := h.alive(); err != nil {
		return workspace.VerifyReport{}, err
	}
	// A copy holds every record, as an archive does: the same right.
	if err := h.allowAdmin(ctx, policy.AdminExport); err != nil {
		return workspace.VerifyReport{}, err
	}
	fs, ok := h.st.(driver.FileSnapshotter)
	if !ok {
		return workspace.VerifyReport{}, fmt.Errorf("backup: this store is not kept in one file: %w", errors.ErrUnsupported)
	}
	cp, err := fs.SnapshotFile(ctx, path)
	if err != nil {
		return workspace.VerifyReport{}, wrapErr("backup", err)
	}
	r, err := verifyStore(ctx, cp)
	if cerr := cp.Close(); err == nil {
		err = cerr
	}
	if err == nil && !r.OK() {
		err = fmt.Errorf("the copy does not verify: %s: %w", strings.Join(r.Problems, "; "), workspace.ErrInvalid)
	}
	if err != nil {
		_ = os.Remove(path)
		return r, wrapErr("backup", err)
	}
	return r, nil
}

// verifyChain checks the links from the floor to the head and returns the
// artifact IDs the log names (for deleted artifacts' versions).
func verifyChain(ctx context.Context, tx driver.ReadTx, r *workspace.VerifyReport) (map[string]bool, error) {
	var err error
	if r.Floor, err = tx.Floor(ctx); err != nil {
		return nil, err
	}
	if r.Head, err = tx.Head(ctx); err != nil {
		return nil, err
	}
	prev, err := tx.ChainBase(ctx)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	next, chained := r.Floor, false
	broken := func(seq int64, format string, args ...any) {
		if r.BrokenSeq == 0 {
			r.BrokenSeq = seq
			r.Problems = append(r.Problems, fmt.Sprintf("event %d: ", seq)+fmt.Sprintf(format, args...))
		}
	}
	after := r.Floor - 1
	for r.BrokenSeq == 0 {
		evs, err := tx.ChainEvents(ctx, after, archivePage)
		if err != nil {
			return nil, err
		}
		for _, ce := range evs {
			e := ce.Event
			if e.Subject.Kind == workspace.SubjectArtifact && e.Subject.ID != "" {
				ids[e.Subject.ID] = true
			}
			if r.BrokenSeq != 0 {
				continue
			}
			switch {
			case e.Seq != next:
				broken(next, "missing (the next event stored is %d)", e.Seq)
				continue
			case ce.Hash == nil && !chained:
				r.Unchained++ // written before the store kept the chain
			case ce.Hash == nil:
				broken(e.Seq, "has no hash, after chained events")
			default:
				chained = true
				want := driver.ChainHash(prev, e)
				if !bytes.Equal(want, ce.Hash) {
					broken(e.Seq, "stored hash %s, computed %s: this event, or the link before it, was changed",
						short(ce.Hash), short(want))
				}
				prev = ce.Hash
				r.Events++
			}
			next = e.Seq + 1
		}
		if len(evs) < archivePage {
			break
		}
		after = evs[len(evs)-1].Event.Seq
	}
	if r.BrokenSeq == 0 && next != r.Head+1 {
		broken(next, "missing (the log's head is %d)", r.Head)
	}
	r.HeadHash = hex.EncodeToString(prev)
	return ids, nil
}

func short(h []byte) string {
	s := hex.EncodeToString(h)
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// verifyContents checks every stored version of the live artifacts and of
// those the log names.
func verifyContents(ctx context.Context, tx driver.ReadTx, ids map[string]bool, r *workspace.VerifyReport) error {
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
		if errors.Is(err, workspace.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("artifact %s versions: %w", id, err)
		}
		for _, v := range versions {
			content, err := tx.Content(ctx, id, v.Version, v.SHA256)
			if errors.Is(err, workspace.ErrNotFound) {
				r.Problems = append(r.Problems, fmt.Sprintf("artifact %s (%s) version %d: content missing", id, v.Name, v.Version))
				continue
			}
			if err != nil {
				return fmt.Errorf("artifact %s version %d content: %w", id, v.Version, err)
			}
			sum := sha256.Sum256(content)
			if got := hex.EncodeToString(sum[:]); got != v.SHA256 {
				r.Problems = append(r.Problems, fmt.Sprintf("artifact %s (%s) version %d: content hashes to %s, recorded %s",
					id, v.Name, v.Version, got[:16]+"…", truncate(v.SHA256, 16)+"…"))
			}
			r.Versions++
		}
	}
	return nil
}
