"""The records of the workspace, as the HTTP API sends them.

Each class is the snake_case JSON shape of the matching workspace type
(the server's ``/v1/openapi.json`` describes them; a test checks that the
fields here are the document's). ``from_dict`` reads an answer, ``to_dict``
gives the wire shape back.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "Artifact",
    "ArtifactPage",
    "BatchResult",
    "Event",
    "EventPage",
    "AgentPause",
    "InboxEvent",
    "InboxPage",
    "Lease",
    "Msg",
    "MsgAck",
    "Note",
    "NotePage",
    "OpResult",
    "Status",
    "Subject",
    "Task",
    "TaskPage",
    "TaskResult",
    "Whoami",
    "format_time",
    "parse_time",
]

_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(v: Any) -> datetime | None:
    """Parse an RFC 3339 time as the server writes it (nanoseconds are cut
    to microseconds); None for an absent or empty value."""
    if not isinstance(v, str) or v == "":
        return None
    m = _TIME.match(v)
    if m is None:
        raise ValueError(f"not an RFC 3339 time: {v[:40]!r}")
    day, clock, frac, zone = m.groups()
    frac = (frac or "")[:6].ljust(6, "0")
    zone = "+00:00" if zone in ("Z", "z") else zone
    return datetime.fromisoformat(f"{day}T{clock}.{frac}{zone}")


def format_time(t: datetime | None) -> str | None:
    """Format a time as RFC 3339 in UTC, as the server does; None stays None."""
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _s(d: dict[str, Any], k: str) -> str:
    v = d.get(k)
    return v if isinstance(v, str) else ""


def _i(d: dict[str, Any], k: str) -> int:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _labels(d: dict[str, Any], k: str = "labels") -> dict[str, str]:
    v = d.get(k)
    return {str(a): str(b) for a, b in v.items()} if isinstance(v, dict) else {}


def _strs(d: dict[str, Any], k: str) -> list[str]:
    v = d.get(k)
    return [str(x) for x in v] if isinstance(v, list) else []


def _dicts(d: dict[str, Any], k: str) -> list[dict[str, Any]]:
    v = d.get(k)
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _put_time(out: dict[str, Any], k: str, t: datetime | None) -> None:
    if t is not None:
        out[k] = format_time(t)


def encode_content(content: bytes | str) -> tuple[str, str]:
    """Return content as the wire's (content, content_encoding): text when
    it is UTF-8 without NUL bytes, base64 otherwise."""
    if isinstance(content, str):
        b = content.encode("utf-8")
    else:
        b = bytes(content)
    if b"\x00" not in b:
        try:
            return b.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(b).decode("ascii"), "base64"


def decode_content(d: dict[str, Any]) -> bytes | None:
    """Return an artifact answer's content as bytes, None when absent."""
    c = d.get("content")
    if not isinstance(c, str):
        return None
    if d.get("content_encoding") == "base64":
        return base64.b64decode(c, validate=True)
    return c.encode("utf-8")


@dataclass(slots=True)
class Subject:
    """The record an event (or a conflict) is about."""

    kind: str = ""  # artifact, task, note, lock
    id: str = ""  # artifact or task id; KIND/KEY for notes; the resource for locks
    name: str = ""  # artifact name, task title, note key, lock resource

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Subject:
        """Read the wire shape."""
        return cls(kind=_s(d, "kind"), id=_s(d, "id"), name=_s(d, "name"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"kind": self.kind, "id": self.id, "name": self.name}


@dataclass(slots=True)
class Artifact:
    """One version of an artifact. ``content`` is None in metadata-only
    answers (lists, versions, batch results)."""

    id: str
    name: str
    kind: str = ""
    owner: str = ""
    version: int = 0
    content: bytes | None = None
    content_type: str = ""
    sha256: str = ""
    size: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    task_id: str = ""
    created_at: datetime | None = None
    created_by: str = ""
    updated_at: datetime | None = None
    updated_by: str = ""

    @property
    def text(self) -> str:
        """The content decoded as UTF-8 (empty when there is none)."""
        return (self.content or b"").decode("utf-8")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Artifact:
        """Read the wire shape."""
        return cls(
            id=_s(d, "id"), name=_s(d, "name"), kind=_s(d, "kind"), owner=_s(d, "owner"),
            version=_i(d, "version"), content=decode_content(d), content_type=_s(d, "content_type"),
            sha256=_s(d, "sha256"), size=_i(d, "size"), labels=_labels(d), task_id=_s(d, "task_id"),
            created_at=parse_time(d.get("created_at")), created_by=_s(d, "created_by"),
            updated_at=parse_time(d.get("updated_at")), updated_by=_s(d, "updated_by"),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape (content as text or base64, as the server sends it)."""
        out: dict[str, Any] = {
            "id": self.id, "name": self.name, "kind": self.kind, "owner": self.owner,
            "version": self.version, "content_type": self.content_type, "sha256": self.sha256,
            "size": self.size, "labels": dict(self.labels), "task_id": self.task_id,
            "created_by": self.created_by, "updated_by": self.updated_by,
        }
        _put_time(out, "created_at", self.created_at)
        _put_time(out, "updated_at", self.updated_at)
        if self.content is not None:
            out["content"], out["content_encoding"] = encode_content(self.content)
        return out


@dataclass(slots=True)
class TaskResult:
    """What a finished or failed task produced."""

    summary: str = ""
    artifacts: list[str] = field(default_factory=list)  # artifact names

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskResult:
        """Read the wire shape."""
        return cls(summary=_s(d, "summary"), artifacts=_strs(d, "artifacts"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"summary": self.summary, "artifacts": list(self.artifacts)}


@dataclass(slots=True)
class Task:
    """A unit of work, claimed and done by one agent at a time."""

    id: str
    title: str = ""
    description: str = ""
    status: str = ""  # pending, in_progress, blocked, done, failed, cancelled
    assignee: str = ""
    parent_id: str = ""
    depends_on: list[str] = field(default_factory=list)
    priority: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    areas: list[str] = field(default_factory=list)  # paths the task expects to touch
    result: TaskResult = field(default_factory=TaskResult)
    attempts: int = 0
    lease_expires_at: datetime | None = None
    version: int = 0
    created_at: datetime | None = None
    created_by: str = ""
    updated_at: datetime | None = None
    updated_by: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        """Read the wire shape."""
        r = d.get("result")
        return cls(
            id=_s(d, "id"), title=_s(d, "title"), description=_s(d, "description"), status=_s(d, "status"),
            assignee=_s(d, "assignee"), parent_id=_s(d, "parent_id"), depends_on=_strs(d, "depends_on"),
            priority=_i(d, "priority"), labels=_labels(d), areas=_strs(d, "areas"),
            result=TaskResult.from_dict(r if isinstance(r, dict) else {}), attempts=_i(d, "attempts"),
            lease_expires_at=parse_time(d.get("lease_expires_at")), version=_i(d, "version"),
            created_at=parse_time(d.get("created_at")), created_by=_s(d, "created_by"),
            updated_at=parse_time(d.get("updated_at")), updated_by=_s(d, "updated_by"),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {
            "id": self.id, "title": self.title, "description": self.description, "status": self.status,
            "assignee": self.assignee, "parent_id": self.parent_id, "depends_on": list(self.depends_on),
            "priority": self.priority, "labels": dict(self.labels), "areas": list(self.areas), "result": self.result.to_dict(),
            "attempts": self.attempts, "version": self.version,
            "created_by": self.created_by, "updated_by": self.updated_by,
        }
        _put_time(out, "lease_expires_at", self.lease_expires_at)
        _put_time(out, "created_at", self.created_at)
        _put_time(out, "updated_at", self.updated_at)
        return out


@dataclass(slots=True)
class Note:
    """Shared context: a decision, a constraint, a glossary term."""

    kind: str
    key: str
    title: str = ""
    body: str = ""
    author: str = ""
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    updated_by: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Note:
        """Read the wire shape."""
        return cls(
            kind=_s(d, "kind"), key=_s(d, "key"), title=_s(d, "title"), body=_s(d, "body"),
            author=_s(d, "author"), version=_i(d, "version"), created_at=parse_time(d.get("created_at")),
            updated_at=parse_time(d.get("updated_at")), updated_by=_s(d, "updated_by"),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {
            "kind": self.kind, "key": self.key, "title": self.title, "body": self.body,
            "author": self.author, "version": self.version, "updated_by": self.updated_by,
        }
        _put_time(out, "created_at", self.created_at)
        _put_time(out, "updated_at", self.updated_at)
        return out


@dataclass(slots=True)
class Lease:
    """A lock on a resource. ``token`` is its fencing token: it grows each
    time the resource changes hands; pass it as ``fence`` on writes."""

    resource: str
    owner: str = ""
    token: int = 0
    acquired_at: datetime | None = None
    expires_at: datetime | None = None
    #: The span, in nanoseconds, its holder last asked for (its acquire's or
    #: last renew's TTL); 0 on leases stored before it was recorded.
    ttl_ns: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Lease:
        """Read the wire shape."""
        return cls(
            resource=_s(d, "resource"), owner=_s(d, "owner"), token=_i(d, "token"),
            acquired_at=parse_time(d.get("acquired_at")), expires_at=parse_time(d.get("expires_at")),
            ttl_ns=_i(d, "ttl_ns"),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {"resource": self.resource, "owner": self.owner, "token": self.token}
        _put_time(out, "acquired_at", self.acquired_at)
        _put_time(out, "expires_at", self.expires_at)
        if self.ttl_ns:
            out["ttl_ns"] = self.ttl_ns
        return out


@dataclass(slots=True)
class Event:
    """One entry of the event log. ``seq`` grows by one per event, in
    commit order, with no gaps."""

    seq: int
    type: str = ""
    actor: str = ""
    subject: Subject = field(default_factory=Subject)
    version: int = 0  # the record's version after the change; the token for locks
    message: str = ""
    time: datetime | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        """Read the wire shape."""
        s = d.get("subject")
        return cls(
            seq=_i(d, "seq"), type=_s(d, "type"), actor=_s(d, "actor"),
            subject=Subject.from_dict(s if isinstance(s, dict) else {}), version=_i(d, "version"),
            message=_s(d, "message"), time=parse_time(d.get("time")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {
            "seq": self.seq, "actor": self.actor, "type": self.type, "subject": self.subject.to_dict(),
            "version": self.version, "message": self.message,
        }
        _put_time(out, "time", self.time)
        return out


@dataclass(slots=True)
class MsgAck:
    """One recorded acknowledgement of a message."""

    by: str = ""  # who acked
    for_: str = ""  # the obligation it answered ("for" on the wire): the actor, or "role:NAME"
    at: datetime | None = None
    reply: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MsgAck:
        """Read the wire shape."""
        return cls(by=_s(d, "by"), for_=_s(d, "for"), at=parse_time(d.get("at")), reply=_s(d, "reply"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {"by": self.by, "for": self.for_}
        _put_time(out, "at", self.at)
        if self.reply:
            out["reply"] = self.reply
        return out


@dataclass(slots=True)
class Msg:
    """A message between agents. ``from_`` (``from`` on the wire) is the
    principal that sent it, never a field the sender sets; ``pending``
    lists who still owes an ack (actors, and ``role:NAME`` for a role any
    one member answers for); ``data`` is a JSON object or None."""

    id: str
    thread: str = ""  # the thread's first message's id
    reply_to: str = ""
    from_: str = ""
    to: list[str] = field(default_factory=list)  # actors and "role:NAME"
    each: bool = False  # a role message that each member of the role answers
    type: str = ""  # note, question, pause, resume, shadow_discarded, ...
    severity: str = ""  # info, warning, error, critical
    subject: str = ""
    body: str = ""
    data: dict[str, Any] | None = None
    requires_ack: bool = False
    deadline: datetime | None = None
    escalate_to: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    acks: list[MsgAck] = field(default_factory=list)
    escalated_at: datetime | None = None
    version: int = 0
    sent_at: datetime | None = None

    def owed_by(self, actor: str) -> bool:
        """Report whether actor still owes this message an ack by name
        (an obligation of a role it holds is listed as ``role:NAME``)."""
        return self.requires_ack and actor in self.pending

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Msg:
        """Read the wire shape."""
        data = d.get("data")
        return cls(
            id=_s(d, "id"), thread=_s(d, "thread"), reply_to=_s(d, "reply_to"), from_=_s(d, "from"), to=_strs(d, "to"),
            each=d.get("each") is True, type=_s(d, "type"), severity=_s(d, "severity"), subject=_s(d, "subject"),
            body=_s(d, "body"), data=data if isinstance(data, dict) else None, requires_ack=d.get("requires_ack") is True,
            deadline=parse_time(d.get("deadline")), escalate_to=_strs(d, "escalate_to"), pending=_strs(d, "pending"),
            acks=[MsgAck.from_dict(x) for x in _dicts(d, "acks")], escalated_at=parse_time(d.get("escalated_at")),
            version=_i(d, "version"), sent_at=parse_time(d.get("sent_at")),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {
            "id": self.id, "thread": self.thread, "from": self.from_, "to": list(self.to), "type": self.type,
            "severity": self.severity, "subject": self.subject, "body": self.body, "requires_ack": self.requires_ack,
            "version": self.version,
        }
        if self.reply_to:
            out["reply_to"] = self.reply_to
        if self.each:
            out["each"] = True
        if self.data is not None:
            out["data"] = dict(self.data)
        if self.escalate_to:
            out["escalate_to"] = list(self.escalate_to)
        if self.pending:
            out["pending"] = list(self.pending)
        if self.acks:
            out["acks"] = [a.to_dict() for a in self.acks]
        _put_time(out, "deadline", self.deadline)
        _put_time(out, "escalated_at", self.escalated_at)
        _put_time(out, "sent_at", self.sent_at)
        return out


@dataclass(slots=True)
class InboxPage:
    """One page of an inbox, oldest first, with the inbox's counts:
    ``unread`` (after the read cursor) and ``unacked`` (acks still owed),
    ``cursor`` (the last message marked read) and ``paused`` (the actor is
    paused by an operator). Pass ``next`` as ``after`` for the next page."""

    messages: list[Msg] = field(default_factory=list)
    next: str = ""
    cursor: str = ""
    unread: int = 0
    unacked: int = 0
    paused: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InboxPage:
        """Read the wire shape."""
        return cls(messages=[Msg.from_dict(x) for x in _dicts(d, "messages")], next=_s(d, "next"), cursor=_s(d, "cursor"),
                   unread=_i(d, "unread"), unacked=_i(d, "unacked"), paused=d.get("paused") is True)

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {"messages": [m.to_dict() for m in self.messages], "unread": self.unread, "unacked": self.unacked}
        if self.next:
            out["next"] = self.next
        if self.cursor:
            out["cursor"] = self.cursor
        if self.paused:
            out["paused"] = True
        return out


@dataclass(slots=True)
class InboxEvent:
    """One record of an inbox stream: the log's event (``seq``, ``type``:
    message.sent, message.acked or message.escalated) and its message as
    it stood when the server read it."""

    seq: int
    type: str = ""
    message: Msg = field(default_factory=lambda: Msg(id=""))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InboxEvent:
        """Read the wire shape."""
        m = d.get("message")
        return cls(seq=_i(d, "seq"), type=_s(d, "type"), message=Msg.from_dict(m if isinstance(m, dict) else {}))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"seq": self.seq, "type": self.type, "message": self.message.to_dict()}


@dataclass(slots=True)
class AgentPause:
    """What pausing or resuming an agent did, in one batch: the message it
    sent the agent (the pause message the agent must ack; the resume
    message) and the batch's events."""

    actor: str = ""
    message: Msg | None = None
    events: list[Event] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentPause:
        """Read the wire shape."""
        m = d.get("message")
        return cls(actor=_s(d, "actor"), message=Msg.from_dict(m) if isinstance(m, dict) else None,
                   events=[Event.from_dict(x) for x in _dicts(d, "events")])

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {"actor": self.actor, "events": [e.to_dict() for e in self.events]}
        if self.message is not None:
            out["message"] = self.message.to_dict()
        return out


@dataclass(slots=True)
class ArtifactPage:
    """One page of artifacts (metadata only), by name. Pass ``next`` as
    ``after`` for the next page; it is empty at the end."""

    artifacts: list[Artifact] = field(default_factory=list)
    next: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ArtifactPage:
        """Read the wire shape."""
        return cls(artifacts=[Artifact.from_dict(x) for x in _dicts(d, "artifacts")], next=_s(d, "next"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"artifacts": [a.to_dict() for a in self.artifacts], "next": self.next}


@dataclass(slots=True)
class TaskPage:
    """One page of tasks, oldest first."""

    tasks: list[Task] = field(default_factory=list)
    next: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskPage:
        """Read the wire shape."""
        return cls(tasks=[Task.from_dict(x) for x in _dicts(d, "tasks")], next=_s(d, "next"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"tasks": [t.to_dict() for t in self.tasks], "next": self.next}


@dataclass(slots=True)
class NotePage:
    """One page of notes, by kind then key."""

    notes: list[Note] = field(default_factory=list)
    next: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NotePage:
        """Read the wire shape."""
        return cls(notes=[Note.from_dict(x) for x in _dicts(d, "notes")], next=_s(d, "next"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"notes": [n.to_dict() for n in self.notes], "next": self.next}


@dataclass(slots=True)
class EventPage:
    """One page of the log. ``next`` is the ``after`` of the next page (the
    last seq examined, matching or not); ``head`` the log's head when read."""

    events: list[Event] = field(default_factory=list)
    next: int = 0
    head: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EventPage:
        """Read the wire shape."""
        return cls(events=[Event.from_dict(x) for x in _dicts(d, "events")], next=_i(d, "next"), head=_i(d, "head"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"events": [e.to_dict() for e in self.events], "next": self.next, "head": self.head}


@dataclass(slots=True)
class OpResult:
    """What one op of a batch wrote (artifacts without content); all None
    for deletes and releases."""

    artifact: Artifact | None = None
    task: Task | None = None
    note: Note | None = None
    message: Msg | None = None  # what send_message, ack_message and pause_actor wrote

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OpResult:
        """Read the wire shape."""
        a, t, n, m = d.get("artifact"), d.get("task"), d.get("note"), d.get("message")
        return cls(
            artifact=Artifact.from_dict(a) if isinstance(a, dict) else None,
            task=Task.from_dict(t) if isinstance(t, dict) else None,
            note=Note.from_dict(n) if isinstance(n, dict) else None,
            message=Msg.from_dict(m) if isinstance(m, dict) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        out: dict[str, Any] = {}
        if self.artifact is not None:
            out["artifact"] = self.artifact.to_dict()
        if self.task is not None:
            out["task"] = self.task.to_dict()
        if self.note is not None:
            out["note"] = self.note.to_dict()
        if self.message is not None:
            out["message"] = self.message.to_dict()
        return out


@dataclass(slots=True)
class BatchResult:
    """What a batch wrote: one result per op, in order, and its events
    (consecutive seqs). ``replayed`` is set when an idempotency key matched
    an earlier batch: nothing was written this time."""

    results: list[OpResult] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    replayed: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchResult:
        """Read the wire shape."""
        return cls(
            results=[OpResult.from_dict(x) for x in _dicts(d, "results")],
            events=[Event.from_dict(x) for x in _dicts(d, "events")],
            replayed=d.get("replayed") is True,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"results": [r.to_dict() for r in self.results], "events": [e.to_dict() for e in self.events], "replayed": self.replayed}


@dataclass(slots=True)
class Status:
    """The dashboard: counts, active tasks, live locks, recent events."""

    head: int = 0
    floor: int = 0
    artifacts: int = 0
    notes: int = 0
    tasks: dict[str, int] = field(default_factory=dict)  # by status
    active_tasks: list[Task] = field(default_factory=list)
    locks: list[Lease] = field(default_factory=list)
    recent_events: list[Event] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Status:
        """Read the wire shape."""
        tasks = d.get("tasks")
        return cls(
            head=_i(d, "head"), floor=_i(d, "floor"), artifacts=_i(d, "artifacts"), notes=_i(d, "notes"),
            tasks={str(k): v for k, v in tasks.items() if isinstance(v, int)} if isinstance(tasks, dict) else {},
            active_tasks=[Task.from_dict(x) for x in _dicts(d, "active_tasks")],
            locks=[Lease.from_dict(x) for x in _dicts(d, "locks")],
            recent_events=[Event.from_dict(x) for x in _dicts(d, "recent_events")],
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {
            "head": self.head, "floor": self.floor, "artifacts": self.artifacts, "notes": self.notes,
            "tasks": dict(self.tasks), "active_tasks": [t.to_dict() for t in self.active_tasks],
            "locks": [lease.to_dict() for lease in self.locks], "recent_events": [e.to_dict() for e in self.recent_events],
        }


@dataclass(slots=True)
class Whoami:
    """Who the requests act as: the token's actor and role, or the actor
    named without a token."""

    actor: str = ""
    role: str = ""
    token: str = ""  # the token's public id; empty without one

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Whoami:
        """Read the wire shape."""
        return cls(actor=_s(d, "actor"), role=_s(d, "role"), token=_s(d, "token"))

    def to_dict(self) -> dict[str, Any]:
        """Return the wire shape."""
        return {"actor": self.actor, "role": self.role, "token": self.token}
