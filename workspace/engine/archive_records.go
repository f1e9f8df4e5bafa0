package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Each archive record is validated here before it is queued for the store.

// times checks that a record's required times are set and brings every
// time to UTC microseconds, as the stores keep them.
func (im *importer) times(required []string, ts ...*time.Time) error {
	for i, t := range ts {
		if i < len(required) && t.IsZero() {
			return im.errf("%s is missing", required[i])
		}
		*t = t.UTC().Truncate(time.Microsecond)
	}
	return nil
}

// checkRecord returns the first validation error, placed at the line.
func (im *importer) checkRecord(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return im.errf("%v", err)
		}
	}
	return nil
}

func checkVersionFrom1(v int64) error {
	if v < 1 {
		return invalid("version", "%d: versions start at 1", v)
	}
	return nil
}

func (im *importer) task(ctx context.Context, r workspace.Task) error {
	if err := im.checkRecord(
		checkID("task id", r.ID),
		checkKey("title", r.Title, workspace.MaxTitleLen),
		checkText("description", r.Description, workspace.MaxTextLen),
		checkOptionalID("parent id", r.ParentID),
		checkLabels("labels", r.Labels),
		checkPriority(r.Priority),
		checkVersionFrom1(r.Version),
	); err != nil {
		return err
	}
	if !r.Status.Valid() {
		return im.errf("task %s: status %q is not a task status", r.ID, r.Status)
	}
	if r.ID <= im.lastTask {
		return im.errf("task %s is out of order or repeated (tasks come by id)", r.ID)
	}
	if r.ParentID != "" && !im.tasks[r.ParentID] {
		return im.errf("task %s: parent %s is not earlier in the archive", r.ID, r.ParentID)
	}
	if len(r.Areas) > workspace.MaxAreas {
		return im.errf("task %s: more than %d areas", r.ID, workspace.MaxAreas)
	}
	for _, a := range r.Areas {
		if err := checkArea(a); err != nil {
			return im.errf("task %s: %v", r.ID, err)
		}
	}
	for _, d := range r.DependsOn {
		if err := checkID("depends on", d); err != nil {
			return im.errf("%v", err)
		}
		if !im.tasks[d] {
			return im.errf("task %s: dependency %s is not earlier in the archive", r.ID, d)
		}
	}
	if err := im.times([]string{"created_at", "updated_at"}, &r.CreatedAt, &r.UpdatedAt, &r.LeaseExpiresAt); err != nil {
		return err
	}
	t := r
	im.lastTask = r.ID
	im.tasks[r.ID] = true
	im.p.stats.Tasks++
	return im.add(ctx, 0, func(ctx context.Context, tx driver.Tx) error { return tx.PutTask(ctx, t) })
}

func (im *importer) note(ctx context.Context, r workspace.Note) error {
	if err := im.checkRecord(
		checkKind("note kind", r.Kind),
		checkKey("note key", r.Key, workspace.MaxKeyLen),
		checkText("note title", r.Title, workspace.MaxTitleLen),
		checkText("note body", r.Body, workspace.MaxTextLen),
		checkVersionFrom1(r.Version),
	); err != nil {
		return err
	}
	k := [2]string{r.Kind, r.Key}
	if im.p.stats.Notes+im.skippedSealed > 0 && (k[0] < im.lastNote[0] || k[0] == im.lastNote[0] && k[1] <= im.lastNote[1]) {
		return im.errf("note %s/%s is out of order or repeated (notes come by kind, then key)", r.Kind, r.Key)
	}
	if err := im.times([]string{"created_at", "updated_at"}, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return err
	}
	n := r
	im.lastNote = k
	if e, ok := reserve.Lookup(n.Kind); ok && e.Credential && !im.p.opts.WithSealed {
		im.skippedSealed++
		return nil
	}
	im.p.stats.Notes++
	return im.add(ctx, 0, func(ctx context.Context, tx driver.Tx) error { return tx.PutNote(ctx, n) })
}

// closeArtifact ends the artifact being read: a live one holds its name.
func (im *importer) closeArtifact() {
	if im.art != nil && !im.artDone {
		im.live[im.art.Name] = im.art.ID
	}
	im.art, im.artDone, im.blobs = nil, false, nil
}

func (im *importer) artifact(ctx context.Context, r workspace.Artifact) error {
	if err := im.checkRecord(
		checkID("artifact id", r.ID),
		checkName("name", r.Name),
		checkKind("kind", r.Kind),
		checkContentType(r.ContentType),
		checkLabels("labels", r.Labels),
		checkOptionalID("task id", r.TaskID),
		checkVersionFrom1(r.Version),
	); err != nil {
		return err
	}
	if im.art == nil || im.art.ID != r.ID {
		// A new artifact: ids ascend, names of live ones are unique.
		// Versions ascend from 1, with gaps where retention removed some.
		im.closeArtifact()
		if r.ID <= im.lastArt {
			return im.errf("artifact %s is out of order or repeated (artifacts come by id)", r.ID)
		}
		if other, ok := im.live[r.Name]; ok {
			return im.errf("artifact %s: name %q is already held by live artifact %s", r.ID, r.Name, other)
		}
		im.lastArt = r.ID
		im.blobs = map[string]int64{}
		im.p.stats.Artifacts++
	} else {
		if im.artDone {
			return im.errf("artifact %s has a version after its deletion", r.ID)
		}
		if r.Version <= im.art.Version {
			return im.errf("artifact %s: version %d follows version %d", r.ID, r.Version, im.art.Version)
		}
		if r.Name != im.art.Name {
			return im.errf("artifact %s: version %d is named %q, version 1 %q", r.ID, r.Version, r.Name, im.art.Name)
		}
	}
	if r.TaskID != "" && !im.tasks[r.TaskID] {
		return im.errf("artifact %s: task %s is not in the archive", r.ID, r.TaskID)
	}
	if len(r.SHA256) != 64 {
		return im.errf("artifact %s version %d: sha256 %q is not a hex SHA-256", r.ID, r.Version, truncate(r.SHA256, 80))
	}
	var content []byte
	size, stored := im.blobs[r.SHA256]
	switch {
	case r.Content != nil:
		b := r.Content
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != r.SHA256 || int64(len(b)) != r.Size {
			return im.errf("artifact %s version %d: content does not match its sha256 and size", r.ID, r.Version)
		}
		if int64(len(b)) > im.h.opts.MaxArtifactSize {
			return tooLarge("content", "archive line %d: artifact %q version %d is %d bytes, over this store's limit of %d (raise ws_max_artifact_size)", im.line, r.Name, r.Version, len(b), im.h.opts.MaxArtifactSize)
		}
		if !stored {
			content = b
			im.blobs[r.SHA256] = r.Size
			im.p.stats.ContentBytes += r.Size
		}
	case !stored:
		return im.errf("artifact %s version %d: no content for sha256 %s", r.ID, r.Version, r.SHA256)
	case size != r.Size:
		return im.errf("artifact %s version %d: size %d differs from %d for the same sha256", r.ID, r.Version, r.Size, size)
	}
	if err := im.times([]string{"created_at", "updated_at"}, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return err
	}
	a := r
	a.Content = nil
	im.art = &a
	im.p.stats.Versions++
	return im.add(ctx, int64(len(content)), func(ctx context.Context, tx driver.Tx) error { return tx.PutArtifact(ctx, a, content) })
}

func (im *importer) deleted(ctx context.Context, r archiveDeleted) error {
	if im.art == nil || im.art.ID != r.ID || im.artDone {
		return im.errf("artifact_deleted %s does not follow that artifact's versions", truncate(r.ID, 64))
	}
	im.artDone = true
	im.p.stats.DeletedArtifacts++
	id := r.ID
	return im.add(ctx, 0, func(ctx context.Context, tx driver.Tx) error { return tx.DeleteArtifact(ctx, id) })
}

func (im *importer) lease(ctx context.Context, r workspace.Lease) error {
	if err := im.checkRecord(checkResource(r.Resource)); err != nil {
		return err
	}
	if r.Owner != "" {
		if err := im.checkRecord(checkActor(r.Owner)); err != nil {
			return err
		}
	}
	if r.Token < 1 {
		return im.errf("lease %q: token %d is not at least 1", r.Resource, r.Token)
	}
	if im.p.stats.Leases > 0 && r.Resource <= im.lastRes {
		return im.errf("lease %q is out of order or repeated (leases come by resource)", r.Resource)
	}
	if r.TTL < 0 {
		return im.errf("lease %q: ttl %s is negative", r.Resource, r.TTL)
	}
	if err := im.times(nil, &r.AcquiredAt, &r.ExpiresAt); err != nil {
		return err
	}
	l := r
	im.lastRes = r.Resource
	im.p.stats.Leases++
	return im.add(ctx, 0, func(ctx context.Context, tx driver.Tx) error { return tx.PutLease(ctx, l) })
}

func (im *importer) event(ctx context.Context, r workspace.Event, hash string) error {
	if r.Seq != im.nextSeq {
		return im.errf("event seq %d where %d was due: the log must be gap-free from its floor", r.Seq, im.nextSeq)
	}
	if r.Seq > im.head {
		return im.errf("event seq %d is past the log's head %d", r.Seq, im.head)
	}
	if err := im.checkRecord(
		checkKey("event type", r.Type, workspace.MaxKindLen),
		checkText("actor", r.Actor, workspace.MaxActorLen),
		checkText("subject kind", r.Subject.Kind, workspace.MaxKindLen),
		checkText("subject id", r.Subject.ID, workspace.MaxNameLen+workspace.MaxKeyLen),
		checkText("subject name", r.Subject.Name, workspace.MaxNameLen+workspace.MaxTitleLen),
		checkText("message", r.Message, workspace.MaxTextLen),
	); err != nil {
		return err
	}
	if err := im.times([]string{"time"}, &r.Time); err != nil {
		return err
	}
	if err := im.chain.link(im, r, hash); err != nil {
		return err
	}
	im.events = append(im.events, r)
	im.nextSeq++
	im.p.stats.Events++
	im.p.tick()
	return im.maybeFlush(ctx)
}
