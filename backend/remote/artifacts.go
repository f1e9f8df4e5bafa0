package remote

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

type artifacts struct{ c *Client }

// refPath is the path of an artifact by name or, with by=id, by id.
func refPath(ref workspace.ArtifactRef) (string, url.Values, error) {
	q := url.Values{}
	switch {
	case ref.ID != "" && ref.Name != "":
		return "", nil, &workspace.InvalidError{Field: "ref", Reason: "give an ID or a Name, not both"}
	case ref.ID != "":
		seg, err := segment("ref.id", ref.ID)
		if err != nil {
			return "", nil, err
		}
		q.Set("by", "id")
		return "/v1/artifacts/" + seg, q, nil
	case ref.Name == "":
		return "", nil, &workspace.InvalidError{Field: "ref", Reason: "give an ID or a Name"}
	}
	if err := workspace.ValidateName(ref.Name); err != nil {
		return "", nil, err
	}
	seg, err := segment("ref.name", ref.Name)
	return "/v1/artifacts/" + seg, q, err
}

func (a artifacts) Create(ctx context.Context, w workspace.Write, n workspace.NewArtifact) (workspace.Artifact, error) {
	var out workspace.Artifact
	if err := a.c.checkContent(n.Content); err != nil {
		return out, err
	}
	body := wire.NewArtifactBody{WriteFields: wire.WriteFieldsOf(w), Name: n.Name, Kind: n.Kind, ContentType: n.ContentType, Labels: n.Labels, TaskID: n.TaskID, Content: wire.ContentOf(n.Content)}
	err := a.c.callRetry(ctx, http.MethodPost, "/v1/artifacts", nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (a artifacts) Get(ctx context.Context, ref workspace.ArtifactRef) (workspace.Artifact, error) {
	var out workspace.Artifact
	p, q, err := refPath(ref)
	if err != nil {
		return out, err
	}
	if ref.Version < 0 {
		return out, &workspace.InvalidError{Field: "ref.version", Reason: "must not be negative"}
	}
	setInt(q, "version", ref.Version)
	err = a.c.call(ctx, http.MethodGet, p, q, nil, &out)
	if err == nil && out.Content == nil {
		out.Content = []byte{}
	}
	return out, err
}

func (a artifacts) Update(ctx context.Context, w workspace.Write, ref workspace.ArtifactRef, ch workspace.ArtifactChange) (workspace.Artifact, error) {
	var out workspace.Artifact
	p, q, err := refPath(ref)
	if err != nil {
		return out, err
	}
	if ref.Version != 0 {
		return out, &workspace.InvalidError{Field: "version", Reason: "an update always writes a new head: use IfVersion for a condition"}
	}
	if err := a.c.checkContent(ch.Content); err != nil {
		return out, err
	}
	body := wire.ArtifactChangeBody{WriteFields: wire.WriteFieldsOf(w), Kind: ch.Kind, ContentType: ch.ContentType, Owner: ch.Owner, TaskID: ch.TaskID, Labels: ch.Labels, Content: wire.ContentOf(ch.Content)}
	err = a.c.callRetry(ctx, http.MethodPatch, p, q, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (a artifacts) Delete(ctx context.Context, w workspace.Write, ref workspace.ArtifactRef) error {
	p, q, err := refPath(ref)
	if err != nil {
		return err
	}
	for k, v := range writeQuery(w) {
		q[k] = v
	}
	return a.c.callRetry(ctx, http.MethodDelete, p, q, nil, nil, w.IdempotencyKey != "")
}

func (a artifacts) Rollback(ctx context.Context, w workspace.Write, ref workspace.ArtifactRef, to int64) (workspace.Artifact, error) {
	var out workspace.Artifact
	p, q, err := refPath(ref)
	if err != nil {
		return out, err
	}
	body := wire.RollbackBody{WriteFields: wire.WriteFieldsOf(w), To: to}
	err = a.c.callRetry(ctx, http.MethodPost, p+"/rollback", q, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (a artifacts) Versions(ctx context.Context, ref workspace.ArtifactRef) ([]workspace.Artifact, error) {
	p, q, err := refPath(ref)
	if err != nil {
		return nil, err
	}
	var out struct {
		Versions []workspace.Artifact `json:"versions"`
	}
	err = a.c.call(ctx, http.MethodGet, p+"/versions", q, nil, &out)
	return out.Versions, err
}

func (a artifacts) List(ctx context.Context, f workspace.ArtifactFilter) (workspace.ArtifactPage, error) {
	q := url.Values{}
	setStr(q, "kind", f.Kind)
	setStr(q, "owner", f.Owner)
	setStr(q, "name_prefix", f.NamePrefix)
	setStr(q, "task_id", f.TaskID)
	setStr(q, "after", f.After)
	setInt(q, "limit", int64(f.Limit))
	labelQuery(q, f.Labels)
	var out workspace.ArtifactPage
	err := a.c.call(ctx, http.MethodGet, "/v1/artifacts", q, nil, &out)
	return out, err
}
