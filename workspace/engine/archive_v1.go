package engine

import (
	"encoding/base64"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Version 1 of the archive wrote each record's fields next to its "type",
// left empty fields out, kept content in base64 and an event's type in
// "event". Import still reads it; Export writes the current version.

type v1Result struct {
	Summary   string   `json:"summary,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
}

type v1Task struct {
	Type           string               `json:"type"`
	ID             string               `json:"id"`
	Title          string               `json:"title"`
	Description    string               `json:"description,omitempty"`
	Status         workspace.TaskStatus `json:"status"`
	Assignee       string               `json:"assignee,omitempty"`
	ParentID       string               `json:"parent_id,omitempty"`
	DependsOn      []string             `json:"depends_on,omitempty"`
	Priority       int                  `json:"priority,omitempty"`
	Labels         map[string]string    `json:"labels,omitempty"`
	Result         *v1Result            `json:"result,omitempty"`
	Attempts       int                  `json:"attempts,omitempty"`
	LeaseExpiresAt string               `json:"lease_expires_at,omitempty"`
	Version        int64                `json:"version"`
	CreatedAt      string               `json:"created_at"`
	CreatedBy      string               `json:"created_by"`
	UpdatedAt      string               `json:"updated_at"`
	UpdatedBy      string               `json:"updated_by"`
}

type v1Note struct {
	Type      string `json:"type"`
	Kind      string `json:"kind"`
	Key       string `json:"key"`
	Title     string `json:"title,omitempty"`
	Body      string `json:"body,omitempty"`
	Author    string `json:"author"`
	Version   int64  `json:"version"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	UpdatedBy string `json:"updated_by"`
}

type v1Artifact struct {
	Type        string            `json:"type"`
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Version     int64             `json:"version"`
	Kind        string            `json:"kind"`
	Owner       string            `json:"owner"`
	ContentType string            `json:"content_type"`
	SHA256      string            `json:"sha256"`
	Size        int64             `json:"size"`
	Labels      map[string]string `json:"labels,omitempty"`
	TaskID      string            `json:"task_id,omitempty"`
	CreatedAt   string            `json:"created_at"`
	CreatedBy   string            `json:"created_by"`
	UpdatedAt   string            `json:"updated_at"`
	UpdatedBy   string            `json:"updated_by"`
	// Content is base64, present on the first version with this SHA256.
	Content *string `json:"content,omitempty"`
}

type v1Lease struct {
	Type       string `json:"type"`
	Resource   string `json:"resource"`
	Owner      string `json:"owner,omitempty"`
	Token      int64  `json:"token"`
	AcquiredAt string `json:"acquired_at,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
}

type v1Subject struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

type v1Event struct {
	Type    string    `json:"type"`
	Seq     int64     `json:"seq"`
	Time    string    `json:"time"`
	Actor   string    `json:"actor"`
	Event   string    `json:"event"`
	Subject v1Subject `json:"subject"`
	Version int64     `json:"version,omitempty"`
	Message string    `json:"message,omitempty"`
}

// v1Time is a version 1 time field: its name, its text, where it goes.
type v1Time struct {
	field, text string
	dst         *time.Time
}

// v1Times parses a version 1 record's times into their fields.
func v1Times(ts ...v1Time) error {
	for _, t := range ts {
		v, err := parseArchiveTime(t.field, t.text)
		if err != nil {
			return err
		}
		*t.dst = v
	}
	return nil
}

func (r v1Task) task() (workspace.Task, error) {
	t := workspace.Task{
		ID: r.ID, Title: r.Title, Description: r.Description, Status: r.Status, Assignee: r.Assignee,
		ParentID: r.ParentID, DependsOn: r.DependsOn, Priority: r.Priority, Labels: r.Labels,
		Attempts: r.Attempts, Version: r.Version, CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy,
	}
	if r.Result != nil {
		t.Result = workspace.TaskResult{Summary: r.Result.Summary, Artifacts: r.Result.Artifacts}
	}
	return t, v1Times(v1Time{"lease_expires_at", r.LeaseExpiresAt, &t.LeaseExpiresAt},
		v1Time{"created_at", r.CreatedAt, &t.CreatedAt}, v1Time{"updated_at", r.UpdatedAt, &t.UpdatedAt})
}

func (r v1Note) note() (workspace.Note, error) {
	n := workspace.Note{Kind: r.Kind, Key: r.Key, Title: r.Title, Body: r.Body, Author: r.Author, Version: r.Version, UpdatedBy: r.UpdatedBy}
	return n, v1Times(v1Time{"created_at", r.CreatedAt, &n.CreatedAt}, v1Time{"updated_at", r.UpdatedAt, &n.UpdatedAt})
}

func (r v1Artifact) artifact() (workspace.Artifact, error) {
	a := workspace.Artifact{
		ID: r.ID, Name: r.Name, Kind: r.Kind, Owner: r.Owner, Version: r.Version, ContentType: r.ContentType,
		SHA256: r.SHA256, Size: r.Size, Labels: r.Labels, TaskID: r.TaskID, CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy,
	}
	if r.Content != nil {
		b, err := base64.StdEncoding.DecodeString(*r.Content)
		if err != nil {
			return a, invalid("content", "artifact %s version %d: not base64: %v", truncate(r.ID, 64), r.Version, err)
		}
		a.Content = b
	}
	return a, v1Times(v1Time{"created_at", r.CreatedAt, &a.CreatedAt}, v1Time{"updated_at", r.UpdatedAt, &a.UpdatedAt})
}

func (r v1Lease) lease() (workspace.Lease, error) {
	l := workspace.Lease{Resource: r.Resource, Owner: r.Owner, Token: r.Token}
	return l, v1Times(v1Time{"acquired_at", r.AcquiredAt, &l.AcquiredAt}, v1Time{"expires_at", r.ExpiresAt, &l.ExpiresAt})
}

func (r v1Event) event() (workspace.Event, error) {
	ev := workspace.Event{Seq: r.Seq, Actor: r.Actor, Type: r.Event, Subject: workspace.Subject(r.Subject), Version: r.Version, Message: r.Message}
	return ev, v1Times(v1Time{"time", r.Time, &ev.Time})
}
