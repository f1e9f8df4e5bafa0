package wire

import "github.com/agentspace/agentspace/workspace"

// SendMessageBody is the body of POST /v1/messages: a message and who
// sends it. The sender is always the request's actor (behind a token, the
// token's): Actor and From may only repeat it, and a body naming another
// sender is refused as forbidden, as a write naming another actor is.
type SendMessageBody struct {
	Actor          string `json:"actor,omitempty" doc:"Who sends. Behind a token: the token's actor or empty."`
	From           string `json:"from,omitempty" doc:"The sender, as a message shows it: empty or the request's actor (anything else is refused with 403)."`
	IdempotencyKey string `json:"idempotency_key,omitempty" doc:"A retry with the same key returns the first result."`
	MessageBody
}

// AckMessageBody is the body of POST /v1/messages/{id}/ack.
type AckMessageBody struct {
	Actor          string `json:"actor,omitempty" doc:"Who acknowledges. Behind a token: the token's actor or empty."`
	Reply          string `json:"reply,omitempty" doc:"A short answer kept with the ack (at most 4096 bytes)."`
	IdempotencyKey string `json:"idempotency_key,omitempty" doc:"A retry with the same key returns the first result."`
}

// InboxReadBody is the body of POST /v1/inbox/read: it moves the actor's
// read cursor to message ID (never back).
type InboxReadBody struct {
	Actor string `json:"actor,omitempty" doc:"Whose cursor. Behind a token: the token's actor or empty."`
	ID    string `json:"id" doc:"The last message read."`
}

// PauseAgentBody is the body of POST /v1/agents/{actor}/pause.
type PauseAgentBody struct {
	Actor      string   `json:"actor,omitempty" doc:"Who pauses the agent (the operator); behind a token, the token's actor."`
	Message    string   `json:"message,omitempty" doc:"The pause message's body: what the agent is to know."`
	AckTimeout Duration `json:"ack_timeout,omitempty" doc:"How long the agent has to acknowledge the pause before it is escalated (empty: no deadline)."`
}

// ResumeAgentBody is the body of POST /v1/agents/{actor}/resume.
type ResumeAgentBody struct {
	Actor   string `json:"actor,omitempty" doc:"Who resumes the agent (the operator); behind a token, the token's actor."`
	Message string `json:"message,omitempty" doc:"The resume message's body."`
}

// AgentPause is what pausing or resuming an agent did, in the one batch
// that did it: the pause message (nil for a resume) and the batch's events.
type AgentPause struct {
	Actor   string            `json:"actor"`
	Message *workspace.Msg    `json:"message,omitempty"`
	Events  []workspace.Event `json:"events"`
}

// InboxEvent is one record of the inbox stream (GET /v1/inbox/stream):
// the event of the log (its seq is the record's SSE id) and the message
// it is about, as it stands when the stream reads it.
type InboxEvent struct {
	Seq     int64         `json:"seq"`
	Type    string        `json:"type" doc:"message.sent, message.acked or message.escalated"`
	Message workspace.Msg `json:"message"`
}

// EscalateBody is the body of POST /v1/messages/escalate.
type EscalateBody struct {
	Actor string `json:"actor,omitempty" doc:"Whom the escalations are recorded as. Behind a token: the token's actor or empty."`
}

// Escalated is what an escalation did: the messages it escalated now.
type Escalated struct {
	Messages []workspace.Msg `json:"messages"`
}
