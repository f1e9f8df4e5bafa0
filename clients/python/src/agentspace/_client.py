"""The workspace client: every operation of the HTTP API as a method."""

from __future__ import annotations

import time
import urllib.parse
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._errors import InvalidError, LockedError, NoTaskError, ProtocolError
from ._http import Transport, check_answer
from ._models import (
    AgentPause,
    Artifact,
    ArtifactPage,
    BatchResult,
    Event,
    EventPage,
    InboxEvent,
    InboxPage,
    Lease,
    Msg,
    Note,
    NotePage,
    Status,
    Task,
    TaskPage,
    TaskResult,
    Whoami,
    encode_content,
    format_time,
)

if TYPE_CHECKING:
    from ._helpers import ClaimHolder, LockHolder
    from ._wait import Work

__all__ = ["Workspace", "Op", "Seconds", "artifact_resource", "task_resource"]

# Seconds is how the client takes durations: a number of seconds or a timedelta.
Seconds = float | int | timedelta

# OPERATIONS maps each operationId of the server's OpenAPI document to the
# method that calls it; a test checks the document against it.
OPERATIONS: dict[str, str] = {
    "createArtifact": "create_artifact",
    "listArtifacts": "list_artifacts",
    "getArtifact": "get_artifact",
    "updateArtifact": "update_artifact",
    "deleteArtifact": "delete_artifact",
    "rollbackArtifact": "rollback_artifact",
    "artifactVersions": "artifact_versions",
    "createTask": "create_task",
    "listTasks": "list_tasks",
    "getTask": "get_task",
    "updateTask": "update_task",
    "claimTask": "claim_task",
    "heartbeatTask": "heartbeat_task",
    "completeTask": "complete_task",
    "failTask": "fail_task",
    "releaseTask": "release_task",
    "putNote": "put_note",
    "getNote": "get_note",
    "deleteNote": "delete_note",
    "listNotes": "list_notes",
    "acquireLock": "acquire_lock",
    "renewLock": "renew_lock",
    "releaseLock": "release_lock",
    "forceReleaseLock": "force_release_lock",
    "getLock": "get_lock",
    "listLocks": "list_locks",
    "commitBatch": "commit",
    "listAgents": "list_agents",
    "getAgent": "get_agent",
    "stopAgent": "stop_agent",
    "pauseAgent": "pause_agent",
    "resumeAgent": "resume_agent",
    "sendMessage": "send_message",
    "getMessage": "get_message",
    "ackMessage": "ack_message",
    "escalateMessages": "escalate_messages",
    "readInbox": "inbox",
    "markInboxRead": "mark_read",
    "streamInbox": "follow_inbox",
    "streamEvents": "follow",
    "readEvents": "read_events",
    "eventsHead": "events_head",
    "compactEvents": "compact_events",
    "gc": "gc",
    "verify": "verify",
    "status": "status",
    "whoami": "whoami",
    "healthz": "healthy",
}


def artifact_resource(name: str) -> str:
    """The lock resource that guards the artifact called name: while another
    actor holds it, writes to the artifact fail with LockedError."""
    return "artifact:" + name


def task_resource(task_id: str) -> str:
    """The lock resource that guards a task, as artifact_resource does."""
    return "task:" + task_id


def duration(v: Seconds | None, field: str) -> str | None:
    """Return a duration in the wire's form ("1500ms"); None stays None."""
    if v is None:
        return None
    s = v.total_seconds() if isinstance(v, timedelta) else v
    if isinstance(s, bool) or not isinstance(s, (int, float)) or s != s:
        raise InvalidError(f"{field}: not a number of seconds", problem={"code": "invalid", "field": field, "reason": "not a number of seconds"})
    if s < 0:
        raise InvalidError(f"{field}: is negative", problem={"code": "invalid", "field": field, "reason": "is negative"})
    return f"{round(s * 1000)}ms"


def seconds_of(v: Seconds | None) -> float:
    """Return v in seconds (0 for None)."""
    if v is None:
        return 0.0
    return v.total_seconds() if isinstance(v, timedelta) else float(v)


def segment(field: str, s: str) -> str:
    """Escape one path segment: "/" as %2F, and "." and ".." so that no one
    cleans them away. An empty one would name another route."""
    if not isinstance(s, str) or s == "":
        raise InvalidError(f"{field}: must not be empty", problem={"code": "invalid", "field": field, "reason": "must not be empty"})
    if s == ".":
        return "%2E"
    if s == "..":
        return "%2E%2E"
    return urllib.parse.quote(s, safe="")


def _content(body: dict[str, Any], content: bytes | str | None) -> None:
    if content is not None:
        body["content"], body["content_encoding"] = encode_content(content)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """Drop the fields left at None: the server keeps those as they are."""
    return {k: v for k, v in d.items() if v is not None}


class Op:
    """Constructors of batch ops for :meth:`Workspace.commit`. Each returns
    the op in the wire shape of ``POST /v1/batch``; plain dicts of that
    shape are accepted too."""

    @staticmethod
    def create_artifact(name: str, content: bytes | str | None = None, *, kind: str | None = None, content_type: str | None = None,
                        labels: Mapping[str, str] | None = None, task_id: str | None = None, message: str | None = None) -> dict[str, Any]:
        """Create an artifact."""
        op = _clean({"op": "create_artifact", "name": name, "kind": kind, "content_type": content_type,
                     "labels": dict(labels) if labels is not None else None, "task_id": task_id, "message": message})
        _content(op, content)
        return op

    @staticmethod
    def update_artifact(name: str | None = None, content: bytes | str | None = None, *, id: str | None = None, kind: str | None = None,
                        content_type: str | None = None, owner: str | None = None, task_id: str | None = None,
                        labels: Mapping[str, str] | None = None, if_version: int | None = None, fence: int | None = None,
                        message: str | None = None) -> dict[str, Any]:
        """Write an artifact's next version (named by name or id)."""
        op = _clean({"op": "update_artifact", "name": name, "id": id, "kind": kind, "content_type": content_type, "owner": owner,
                     "task_id": task_id, "labels": dict(labels) if labels is not None else None,
                     "if_version": if_version or None, "fence": fence or None, "message": message})
        _content(op, content)
        return op

    @staticmethod
    def delete_artifact(name: str | None = None, *, id: str | None = None, if_version: int | None = None, fence: int | None = None,
                        message: str | None = None) -> dict[str, Any]:
        """Delete an artifact."""
        return _clean({"op": "delete_artifact", "name": name, "id": id, "if_version": if_version or None, "fence": fence or None, "message": message})

    @staticmethod
    def rollback_artifact(name: str | None = None, to: int = 0, *, id: str | None = None, if_version: int | None = None,
                          fence: int | None = None, message: str | None = None) -> dict[str, Any]:
        """Write a new head from version ``to``."""
        return _clean({"op": "rollback_artifact", "name": name, "id": id, "to": to, "if_version": if_version or None,
                       "fence": fence or None, "message": message})

    @staticmethod
    def create_task(title: str, *, description: str | None = None, parent_id: str | None = None, depends_on: Sequence[str] | None = None,
                    priority: int | None = None, labels: Mapping[str, str] | None = None, assignee: str | None = None,
                    areas: Sequence[str] | None = None, message: str | None = None) -> dict[str, Any]:
        """Create a pending task."""
        return _clean({"op": "create_task", "title": title, "description": description, "parent_id": parent_id,
                       "depends_on": list(depends_on) if depends_on is not None else None, "priority": priority,
                       "labels": dict(labels) if labels is not None else None, "assignee": assignee,
                       "areas": list(areas) if areas is not None else None, "message": message})

    @staticmethod
    def update_task(id: str, *, status: str | None = None, title: str | None = None, description: str | None = None,
                    assignee: str | None = None, priority: int | None = None, labels: Mapping[str, str] | None = None,
                    result: TaskResult | None = None, if_version: int | None = None, fence: int | None = None,
                    message: str | None = None) -> dict[str, Any]:
        """Change a task's fields or status."""
        return _clean({"op": "update_task", "id": id, "status": status, "title": title, "description": description, "assignee": assignee,
                       "priority": priority, "labels": dict(labels) if labels is not None else None,
                       "result": result.to_dict() if result is not None else None,
                       "if_version": if_version or None, "fence": fence or None, "message": message})

    @staticmethod
    def put_note(kind: str, key: str, *, title: str | None = None, body: str | None = None, if_version: int | None = None,
                 fence: int | None = None, message: str | None = None) -> dict[str, Any]:
        """Create or update a note."""
        return _clean({"op": "put_note", "kind": kind, "key": key, "title": title, "body": body, "if_version": if_version or None,
                       "fence": fence or None, "message": message})

    @staticmethod
    def delete_note(kind: str, key: str, *, if_version: int | None = None, fence: int | None = None, message: str | None = None) -> dict[str, Any]:
        """Delete a note."""
        return _clean({"op": "delete_note", "kind": kind, "key": key, "if_version": if_version or None, "fence": fence or None, "message": message})

    @staticmethod
    def release_lock(resource: str, token: int, *, message: str | None = None) -> dict[str, Any]:
        """Release a lease the batch's actor holds with token."""
        return _clean({"op": "release_lock", "resource": resource, "token": token, "message": message})

    @staticmethod
    def send_message(to: str | Sequence[str], body: str = "", *, subject: str | None = None, type: str | None = None,
                     severity: str | None = None, data: Mapping[str, Any] | None = None, requires_ack: bool = False,
                     deadline: datetime | None = None, escalate_to: Sequence[str] | None = None, reply_to: str | None = None,
                     each: bool = False) -> dict[str, Any]:
        """Send a message as the batch's actor, atomically with the batch's
        other writes (its OpResult's ``message``)."""
        return {"op": "send_message", "msg": _new_msg(to, body, subject=subject, type=type, severity=severity, data=data,
                                                      requires_ack=requires_ack, deadline=deadline, escalate_to=escalate_to,
                                                      reply_to=reply_to, each=each)}

    @staticmethod
    def ack_message(id: str, reply: str | None = None) -> dict[str, Any]:
        """Acknowledge a message as the batch's actor, with an optional short reply."""
        return _clean({"op": "ack_message", "id": id, "reply": reply})

    @staticmethod
    def pause_actor(actor: str, *, message: str | None = None, ack_timeout: Seconds | None = None) -> dict[str, Any]:
        """Pause an agent (needs the admin "tokens" right); see Workspace.pause_agent."""
        return _clean({"op": "pause_actor", "actor": actor, "message": message, "ack_timeout": duration(ack_timeout, "ack_timeout")})

    @staticmethod
    def resume_actor(actor: str, *, message: str | None = None) -> dict[str, Any]:
        """Resume a paused agent (needs the admin "tokens" right)."""
        return _clean({"op": "resume_actor", "actor": actor, "message": message})


def _new_msg(to: str | Sequence[str], body: str, *, subject: str | None, type: str | None, severity: str | None,
             data: Mapping[str, Any] | None, requires_ack: bool, deadline: datetime | None, escalate_to: Sequence[str] | None,
             reply_to: str | None, each: bool) -> dict[str, Any]:
    """Return a new message in the wire's shape; a single recipient may be
    given as a string."""
    return _clean({"to": [to] if isinstance(to, str) else list(to), "body": body or None, "subject": subject, "type": type,
                   "severity": severity, "data": dict(data) if data is not None else None, "requires_ack": requires_ack or None,
                   "deadline": format_time(deadline), "escalate_to": list(escalate_to) if escalate_to is not None else None,
                   "reply_to": reply_to, "each": each or None})


class Workspace:
    """A workspace served by ``wsctl serve``.

    ``url`` is ``http://HOST:PORT``, ``https://…`` or
    ``http+unix:///path/to.sock`` (default: ``AGENTSPACE_DSN``, the variable
    wsctl reads, else its alias ``AGENTSPACE_URL``, else
    http://127.0.0.1:7465; a ``?ws_token=`` on it is the token); ``token`` a
    bearer token (default: ``AGENTSPACE_TOKEN``). Without a token, on a loopback server, ``actor``
    (default: ``AGENTSPACE_ACTOR``) names who acts.

    A write's ``if_version`` of None or 0 means no condition, as the Go
    API's ``IfVersion`` 0 (versions start at 1).

    Every error answer raises its typed error (:class:`ConflictError`,
    :class:`LockedError`, ...). Writes carry an idempotency key (a fresh
    one unless given), so a write whose connection dropped before the
    answer is sent again for up to ``retry_for`` seconds and applied once.
    A Workspace may be shared by threads.
    """

    def __init__(self, url: str | None = None, *, token: str | None = None, actor: str | None = None,
                 timeout: float = 60.0, retry_for: float = 15.0, idempotency_keys: bool = True,
                 ssl_context: Any = None) -> None:
        self._t = Transport(url, token=token, actor=actor, timeout=timeout, retry_for=retry_for, ssl_context=ssl_context)
        self._keys = idempotency_keys

    @property
    def url(self) -> str:
        """The server's URL."""
        return self._t.url

    @property
    def transport(self) -> Transport:
        """The transport the client sends with."""
        return self._t

    def close(self) -> None:
        """Close the client's connections (a later call opens new ones)."""
        self._t.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Plumbing.

    def _write(self, method: str, path: str, body: dict[str, Any], *, if_version: int | None, fence: int | None,
               message: str | None, idempotency_key: str | None, query: dict[str, Any] | None = None) -> Any:
        body = _clean(body)
        if if_version:
            body["if_version"] = if_version
        if fence:
            body["fence"] = fence
        if message:
            body["message"] = message
        key = idempotency_key or (self._new_key() if self._keys else None)
        if key:
            body["idempotency_key"] = key
        return self._t.request(method, path, query=query, body=body, retry=key is not None)

    def _new_key(self) -> str:
        return "py-" + uuid.uuid4().hex

    def _get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        return self._t.request("GET", path, query=query, retry=True)

    def _artifact_path(self, ref: str, by: str) -> tuple[str, dict[str, Any]]:
        if by not in ("name", "id"):
            raise InvalidError("by: want name or id", problem={"code": "invalid", "field": "by", "reason": "want name or id"})
        return "/v1/artifacts/" + segment("ref", ref), ({"by": "id"} if by == "id" else {})

    # Meta.

    def whoami(self) -> Whoami:
        """Who the requests act as."""
        return Whoami.from_dict(check_answer(self._get("/v1/whoami"), "whoami"))

    def status(self) -> Status:
        """The dashboard: counts, active tasks, live locks, recent events."""
        return Status.from_dict(check_answer(self._get("/v1/status"), "status"))

    def healthy(self) -> bool:
        """Report whether the server answers its health check."""
        self._t.request("GET", "/healthz", retry=False)
        return True

    # Artifacts.

    def create_artifact(self, name: str, content: bytes | str = b"", *, kind: str | None = None, content_type: str | None = None,
                        labels: Mapping[str, str] | None = None, task_id: str | None = None, if_version: int | None = None,
                        fence: int | None = None, message: str | None = None, idempotency_key: str | None = None) -> Artifact:
        """Create an artifact at version 1 (AlreadyExistsError on a live name)."""
        body: dict[str, Any] = {"name": name, "kind": kind, "content_type": content_type,
                                "labels": dict(labels) if labels is not None else None, "task_id": task_id}
        _content(body, content)
        v = self._write("POST", "/v1/artifacts", body, if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Artifact.from_dict(check_answer(v, "create_artifact"))

    def get_artifact(self, ref: str, *, version: int = 0, by: str = "name") -> Artifact:
        """Read an artifact's head (or one version), with its content."""
        path, q = self._artifact_path(ref, by)
        if version:
            q["version"] = version
        return Artifact.from_dict(check_answer(self._get(path, q), "get_artifact"))

    def update_artifact(self, ref: str, content: bytes | str | None = None, *, by: str = "name", kind: str | None = None,
                        content_type: str | None = None, owner: str | None = None, task_id: str | None = None,
                        labels: Mapping[str, str] | None = None, if_version: int | None = None, fence: int | None = None,
                        message: str | None = None, idempotency_key: str | None = None) -> Artifact:
        """Write the artifact's next version; fields left None stay as they are."""
        path, q = self._artifact_path(ref, by)
        body: dict[str, Any] = {"kind": kind, "content_type": content_type, "owner": owner, "task_id": task_id,
                                "labels": dict(labels) if labels is not None else None}
        _content(body, content)
        v = self._write("PATCH", path, body, query=q, if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Artifact.from_dict(check_answer(v, "update_artifact"))

    def delete_artifact(self, ref: str, *, by: str = "name", if_version: int | None = None, fence: int | None = None,
                        message: str | None = None, idempotency_key: str | None = None) -> None:
        """Delete an artifact from the live set (its versions stay in the log)."""
        path, q = self._artifact_path(ref, by)
        key = idempotency_key or (self._new_key() if self._keys else None)
        q.update(_clean({"if_version": if_version or None, "fence": fence or None, "message": message, "idempotency_key": key}))
        self._t.request("DELETE", path, query=q, retry=key is not None)

    def rollback_artifact(self, ref: str, to: int, *, by: str = "name", if_version: int | None = None, fence: int | None = None,
                          message: str | None = None, idempotency_key: str | None = None) -> Artifact:
        """Write a new head whose content is version ``to``'s."""
        path, q = self._artifact_path(ref, by)
        v = self._write("POST", path + "/rollback", {"to": to}, query=q, if_version=if_version, fence=fence,
                        message=message, idempotency_key=idempotency_key)
        return Artifact.from_dict(check_answer(v, "rollback_artifact"))

    def artifact_versions(self, ref: str, *, by: str = "name") -> list[Artifact]:
        """Every version's metadata, oldest first."""
        path, q = self._artifact_path(ref, by)
        v = check_answer(self._get(path + "/versions", q), "artifact_versions")
        return [Artifact.from_dict(x) for x in v.get("versions") or [] if isinstance(x, dict)]

    def list_artifacts(self, *, kind: str | None = None, owner: str | None = None, name_prefix: str | None = None,
                       task_id: str | None = None, labels: Mapping[str, str] | None = None, after: str | None = None,
                       limit: int = 0) -> ArtifactPage:
        """One page of live artifacts (metadata), by name."""
        q = {"kind": kind, "owner": owner, "name_prefix": name_prefix, "task_id": task_id, "after": after, "limit": limit,
             "labels": _labels_query(labels)}
        return ArtifactPage.from_dict(check_answer(self._get("/v1/artifacts", q), "list_artifacts"))

    def iter_artifacts(self, **filters: Any) -> Iterator[Artifact]:
        """Every live artifact matching the filters of list_artifacts, page by page."""
        after = None
        while True:
            page = self.list_artifacts(after=after, **filters)
            yield from page.artifacts
            if not page.next:
                return
            after = page.next

    # Tasks.

    def create_task(self, title: str, *, description: str | None = None, parent_id: str | None = None,
                    depends_on: Sequence[str] | None = None, priority: int | None = None, labels: Mapping[str, str] | None = None,
                    assignee: str | None = None, areas: Sequence[str] | None = None, if_version: int | None = None,
                    fence: int | None = None, message: str | None = None, idempotency_key: str | None = None) -> Task:
        """Add a pending task; ``areas`` are the paths it expects to touch."""
        body = {"title": title, "description": description, "parent_id": parent_id,
                "depends_on": list(depends_on) if depends_on is not None else None, "priority": priority,
                "labels": dict(labels) if labels is not None else None, "assignee": assignee,
                "areas": list(areas) if areas is not None else None}
        v = self._write("POST", "/v1/tasks", body, if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Task.from_dict(check_answer(v, "create_task"))

    def get_task(self, id: str) -> Task:
        """Read a task."""
        return Task.from_dict(check_answer(self._get("/v1/tasks/" + segment("id", id)), "get_task"))

    def update_task(self, id: str, *, status: str | None = None, title: str | None = None, description: str | None = None,
                    assignee: str | None = None, priority: int | None = None, labels: Mapping[str, str] | None = None,
                    result: TaskResult | None = None, if_version: int | None = None, fence: int | None = None,
                    message: str | None = None, idempotency_key: str | None = None) -> Task:
        """Change a task's fields or status (an illegal transition is InvalidError)."""
        body = {"status": status, "title": title, "description": description, "assignee": assignee, "priority": priority,
                "labels": dict(labels) if labels is not None else None, "result": result.to_dict() if result is not None else None}
        v = self._write("PATCH", "/v1/tasks/" + segment("id", id), body, if_version=if_version, fence=fence, message=message,
                        idempotency_key=idempotency_key)
        return Task.from_dict(check_answer(v, "update_task"))

    def list_tasks(self, *, status: str | None = None, assignee: str | None = None, parent_id: str | None = None,
                   labels: Mapping[str, str] | None = None, after: str | None = None, limit: int = 0) -> TaskPage:
        """One page of tasks, oldest first."""
        q = {"status": status, "assignee": assignee, "parent_id": parent_id, "after": after, "limit": limit, "labels": _labels_query(labels)}
        return TaskPage.from_dict(check_answer(self._get("/v1/tasks", q), "list_tasks"))

    def claim_task(self, *, lease: Seconds = 300, labels: Mapping[str, str] | None = None, parent_id: str | None = None,
                   wait: Seconds = 0, avoid_overlap: bool = False) -> Task:
        """Claim the best ready task (pending, every dependency done; highest
        priority, then oldest) for ``lease`` seconds. NoTaskError when none
        is ready after waiting up to ``wait`` seconds. ``avoid_overlap``
        prefers a task whose areas overlap no task in progress."""
        body = _clean({"lease": duration(lease, "lease"), "labels": dict(labels) if labels is not None else None, "parent_id": parent_id,
                       "avoid_overlap": avoid_overlap or None})
        deadline = time.monotonic() + seconds_of(wait)
        while True:
            left = deadline - time.monotonic()
            if left > 0:
                body["wait"] = duration(left, "wait")
            else:
                body.pop("wait", None)
            # A claim is not repeated after a dropped connection: it could
            # take a second task. One that never left is.
            try:
                v = self._t.request("POST", "/v1/tasks/claim", body=body, timeout=self._t.timeout + max(left, 0))
            except NoTaskError:
                if deadline - time.monotonic() <= 0:
                    raise
                continue
            return Task.from_dict(check_answer(v, "claim_task"))

    def heartbeat_task(self, id: str, *, lease: Seconds | None = None, if_version: int | None = None, fence: int | None = None,
                       message: str | None = None, idempotency_key: str | None = None) -> Task:
        """Extend the caller's claim on a task by ``lease`` seconds from now."""
        v = self._write("POST", f"/v1/tasks/{segment('id', id)}/heartbeat", {"lease": duration(lease, "lease")},
                        if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Task.from_dict(check_answer(v, "heartbeat_task"))

    def complete_task(self, id: str, summary: str = "", artifacts: Sequence[str] = (), *, if_version: int | None = None,
                      fence: int | None = None, message: str | None = None, idempotency_key: str | None = None) -> Task:
        """Mark a claimed task done with its result."""
        v = self._write("POST", f"/v1/tasks/{segment('id', id)}/complete", {"summary": summary or None, "artifacts": list(artifacts) or None},
                        if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Task.from_dict(check_answer(v, "complete_task"))

    def fail_task(self, id: str, summary: str = "", artifacts: Sequence[str] = (), *, if_version: int | None = None,
                  fence: int | None = None, message: str | None = None, idempotency_key: str | None = None) -> Task:
        """Mark a claimed task failed with its result."""
        v = self._write("POST", f"/v1/tasks/{segment('id', id)}/fail", {"summary": summary or None, "artifacts": list(artifacts) or None},
                        if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Task.from_dict(check_answer(v, "fail_task"))

    def release_task(self, id: str, *, if_version: int | None = None, fence: int | None = None, message: str | None = None,
                     idempotency_key: str | None = None) -> Task:
        """Return a claimed task to pending, for another agent to claim."""
        v = self._write("POST", f"/v1/tasks/{segment('id', id)}/release", {}, if_version=if_version, fence=fence, message=message,
                        idempotency_key=idempotency_key)
        return Task.from_dict(check_answer(v, "release_task"))

    # Notes.

    def put_note(self, kind: str, key: str, *, title: str | None = None, body: str | None = None, if_version: int | None = None,
                 fence: int | None = None, message: str | None = None, idempotency_key: str | None = None) -> Note:
        """Create or update a note."""
        v = self._write("PUT", f"/v1/notes/{segment('kind', kind)}/{segment('key', key)}", {"title": title, "body": body},
                        if_version=if_version, fence=fence, message=message, idempotency_key=idempotency_key)
        return Note.from_dict(check_answer(v, "put_note"))

    def get_note(self, kind: str, key: str) -> Note:
        """Read a note."""
        return Note.from_dict(check_answer(self._get(f"/v1/notes/{segment('kind', kind)}/{segment('key', key)}"), "get_note"))

    def delete_note(self, kind: str, key: str, *, if_version: int | None = None, fence: int | None = None, message: str | None = None,
                    idempotency_key: str | None = None) -> None:
        """Delete a note."""
        key_ = idempotency_key or (self._new_key() if self._keys else None)
        q = _clean({"if_version": if_version or None, "fence": fence or None, "message": message, "idempotency_key": key_})
        self._t.request("DELETE", f"/v1/notes/{segment('kind', kind)}/{segment('key', key)}", query=q, retry=key_ is not None)

    def list_notes(self, *, kind: str | None = None, after: str | None = None, limit: int = 0) -> NotePage:
        """One page of notes, by kind then key."""
        return NotePage.from_dict(check_answer(self._get("/v1/notes", {"kind": kind, "after": after, "limit": limit}), "list_notes"))

    # Locks.

    def acquire_lock(self, resource: str, ttl: Seconds = 30, *, wait: Seconds = 0, message: str | None = None) -> Lease:
        """Take the lease on resource for ``ttl`` seconds, or extend it if
        the caller holds it (same token). LockedError names the holder when
        another holds it after waiting up to ``wait`` seconds."""
        body = _clean({"ttl": duration(ttl, "ttl"), "message": message})
        path = f"/v1/locks/{segment('resource', resource)}/acquire"
        deadline = time.monotonic() + seconds_of(wait)
        while True:
            left = deadline - time.monotonic()
            if left > 0:
                body["wait"] = duration(left, "wait")
            else:
                body.pop("wait", None)
            # Repeating an acquire is safe: the owner's second acquire
            # extends its own lease and keeps the token.
            try:
                v = self._t.request("POST", path, body=body, retry=True, timeout=self._t.timeout + max(left, 0))
            except LockedError:
                if deadline - time.monotonic() <= 0:
                    raise
                continue
            return Lease.from_dict(check_answer(v, "acquire_lock"))

    def renew_lock(self, resource: str, token: int, ttl: Seconds = 30) -> Lease:
        """Extend a live lease by ``ttl`` seconds from now (LockLostError
        once it lapsed and was taken)."""
        body = {"token": token, "ttl": duration(ttl, "ttl")}
        v = self._t.request("POST", f"/v1/locks/{segment('resource', resource)}/renew", body=body, retry=True)
        return Lease.from_dict(check_answer(v, "renew_lock"))

    def release_lock(self, resource: str, token: int) -> None:
        """Free a lease the caller holds with token."""
        self._t.request("POST", f"/v1/locks/{segment('resource', resource)}/release", body={"token": token})

    def force_release_lock(self, resource: str, *, if_version: int | None = None, fence: int | None = None,
                           message: str | None = None, idempotency_key: str | None = None) -> None:
        """Free a lease whoever holds it (recorded in the log)."""
        self._write("POST", f"/v1/locks/{segment('resource', resource)}/force-release", {}, if_version=if_version, fence=fence,
                    message=message, idempotency_key=idempotency_key)

    def get_lock(self, resource: str) -> Lease:
        """The live lease on resource (NotFoundError when free)."""
        return Lease.from_dict(check_answer(self._get(f"/v1/locks/{segment('resource', resource)}"), "get_lock"))

    def list_locks(self) -> list[Lease]:
        """Every live lease, by resource."""
        v = check_answer(self._get("/v1/locks"), "list_locks")
        return [Lease.from_dict(x) for x in v.get("locks") or [] if isinstance(x, dict)]

    # Batches.

    def commit(self, ops: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None) -> BatchResult:
        """Apply the ops (see :class:`Op`) all or nothing. The failing op's
        error carries its ``batch_index``; nothing of the batch is written."""
        key = idempotency_key or (self._new_key() if self._keys else None)
        body: dict[str, Any] = {"ops": [dict(o) for o in ops]}
        if key:
            body["idempotency_key"] = key
        v = self._t.request("POST", "/v1/batch", body=body, retry=key is not None)
        return BatchResult.from_dict(check_answer(v, "commit"))

    # Events.

    def events_head(self) -> int:
        """The newest seq of the log (0 for an empty log)."""
        v = check_answer(self._get("/v1/events/head"), "events_head")
        head = v.get("head")
        if not isinstance(head, int):
            raise ProtocolError("events_head: no head in the answer")
        return head

    def read_events(self, *, after: int = 0, types: Sequence[str] | None = None, actor: str | None = None,
                    subject_kind: str | None = None, subject_id: str | None = None, subject_name: str | None = None,
                    since: datetime | None = None, until: datetime | None = None, limit: int = 0) -> EventPage:
        """One page of the log after seq ``after``."""
        q = {"after": after, "type": ",".join(types) if types else None, "actor": actor, "subject_kind": subject_kind,
             "subject_id": subject_id, "subject_name": subject_name, "since": format_time(since), "until": format_time(until), "limit": limit}
        return EventPage.from_dict(check_answer(self._get("/v1/events/history", q), "read_events"))

    def compact_events(self, floor: int) -> None:
        """Remove the events below seq ``floor``."""
        self._t.request("POST", "/v1/events/compact", body={"floor": floor}, retry=True)

    def gc(self, *, keep_events: int | None = None, keep_events_for: Seconds | None = None, keep_versions: int | None = None,
           keep_tasks_for: Seconds | None = None, keep_messages_for: Seconds | None = None, min_events: int | None = None,
           reclaim: bool = False, dry_run: bool = False, batch: int | None = None, batch_time: Seconds | None = None) -> dict[str, Any]:
        """Remove what the retention policy given does not keep, in short
        transactions (docs/retention.md); a zero or absent rule keeps
        everything of its kind (``keep_messages_for`` never removes a
        message that still owes an ack). Needs the admin "compact" right under a
        policy. Returns the report: counts and bytes per kind, the floor
        before and after, batches."""
        body = {"keep_events": keep_events, "keep_events_for": duration(keep_events_for, "keep_events_for"),
                "keep_versions": keep_versions, "keep_tasks_for": duration(keep_tasks_for, "keep_tasks_for"),
                "keep_messages_for": duration(keep_messages_for, "keep_messages_for"),
                "min_events": min_events, "reclaim": reclaim or None, "dry_run": dry_run or None, "batch": batch,
                "batch_time": duration(batch_time, "batch_time")}
        v = self._t.request("POST", "/v1/admin/gc", body=_clean(body), retry=False)
        return dict(check_answer(v, "gc"))

    def verify(self) -> dict[str, Any]:
        """Check the event log's hash chain and every artifact version's
        content. Needs the admin "export" right under a policy. Returns the
        report; a broken chain is in it (broken_seq, problems), not raised."""
        return dict(check_answer(self._get("/v1/admin/verify"), "verify"))

    # Agents (docs/agents.md).

    def list_agents(self) -> list[dict[str, Any]]:
        """Every agent's state (working, idle, stale, gone), claims, leases,
        tokens, recent events and conflict count."""
        v = check_answer(self._get("/v1/agents"), "list_agents")
        return [dict(x) for x in v.get("agents") or [] if isinstance(x, dict)]

    def get_agent(self, actor: str) -> dict[str, Any]:
        """One agent's summary (NotFoundError for an actor nothing is known of)."""
        return dict(check_answer(self._get(f"/v1/agents/{segment('actor', actor)}"), "get_agent"))

    def stop_agent(self, actor: str, *, message: str | None = None) -> dict[str, Any]:
        """Stop an agent in one batch: revoke its tokens, end its leases
        (revoking their fencing tokens), return its claims. Needs the admin
        "tokens" right. Returns what it did: tokens, leases, tasks, events."""
        v = self._t.request("POST", f"/v1/agents/{segment('actor', actor)}/stop", body=_clean({"message": message}), retry=False)
        return dict(check_answer(v, "stop_agent"))

    def pause_agent(self, actor: str, *, message: str | None = None, ack_timeout: Seconds | None = None) -> AgentPause:
        """Pause an agent: its writes fail with PausedError until
        resume_agent, except acks, lock renewals, task heartbeats and
        releases; nothing it holds is taken from it. It is sent a message
        of type ``pause`` that needs its ack, by ``ack_timeout`` if given
        (else escalated). Needs the admin "tokens" right. Pausing a paused
        agent changes nothing and returns the first pause's message."""
        body = _clean({"message": message, "ack_timeout": duration(ack_timeout, "ack_timeout")})
        v = self._t.request("POST", f"/v1/agents/{segment('actor', actor)}/pause", body=body, retry=True)
        return AgentPause.from_dict(check_answer(v, "pause_agent"))

    def resume_agent(self, actor: str, *, message: str | None = None) -> AgentPause:
        """Resume a paused agent (NotFoundError when it is not paused); it is
        sent a ``resume`` message. Needs the admin "tokens" right."""
        v = self._t.request("POST", f"/v1/agents/{segment('actor', actor)}/resume", body=_clean({"message": message}), retry=False)
        return AgentPause.from_dict(check_answer(v, "resume_agent"))

    # Messages (docs/messages.md).

    def send_message(self, to: str | Sequence[str], body: str = "", *, subject: str | None = None, type: str | None = None,
                     severity: str | None = None, data: Mapping[str, Any] | None = None, requires_ack: bool = False,
                     deadline: datetime | None = None, escalate_to: Sequence[str] | None = None, reply_to: str | None = None,
                     each: bool = False, idempotency_key: str | None = None) -> Msg:
        """Send a message as the caller to ``to``: actors, and ``role:NAME``
        for a role (answered by any one member, or by each with ``each``).
        ``type`` defaults to ``note``, ``severity`` to ``info`` (warning,
        error, critical); ``data`` is a JSON object. With ``requires_ack``
        each recipient owes an ack, by ``deadline`` if given: past it the
        message is escalated once to ``escalate_to`` (default role:admin).
        A reply (``reply_to``) joins its parent's thread."""
        payload = _new_msg(to, body, subject=subject, type=type, severity=severity, data=data, requires_ack=requires_ack,
                           deadline=deadline, escalate_to=escalate_to, reply_to=reply_to, each=each)
        key = idempotency_key or (self._new_key() if self._keys else None)
        if key:
            payload["idempotency_key"] = key
        v = self._t.request("POST", "/v1/messages", body=payload, retry=key is not None)
        return Msg.from_dict(check_answer(v, "send_message"))

    def get_message(self, id: str) -> Msg:
        """Read a message the caller sent or received (NotFoundError for
        anyone else's, as if it did not exist)."""
        return Msg.from_dict(check_answer(self._get("/v1/messages/" + segment("id", id)), "get_message"))

    def ack_message(self, id: str, reply: str | None = None, *, idempotency_key: str | None = None) -> Msg:
        """Acknowledge a message the caller owes an ack, with an optional
        short reply. An ack is recorded once: acking again answers the
        first ack's record."""
        key = idempotency_key or (self._new_key() if self._keys else None)
        v = self._t.request("POST", f"/v1/messages/{segment('id', id)}/ack", body=_clean({"reply": reply, "idempotency_key": key}),
                            retry=key is not None)
        return Msg.from_dict(check_answer(v, "ack_message"))

    def escalate_messages(self) -> list[Msg]:
        """Escalate the messages past their ack deadline now (a server does
        it every second by itself); returns those escalated by this call."""
        v = check_answer(self._t.request("POST", "/v1/messages/escalate", body={}, retry=True), "escalate_messages")
        return [Msg.from_dict(x) for x in v.get("messages") or [] if isinstance(x, dict)]

    def inbox(self, *, actor: str | None = None, unread: bool = False, unacked: bool = False, thread: str | None = None,
              after: str | None = None, limit: int = 0, wait: Seconds | None = None) -> InboxPage:
        """One page of the caller's inbox (``actor``: another's, with the
        admin role), oldest first, with its unread and unacked counts:
        ``unread`` keeps the messages after the read cursor, ``unacked``
        those the caller still owes an ack, ``thread`` one thread's.

        With ``wait`` (seconds) it is a long poll: it returns as soon as the
        page would hold a message, or after ``wait`` with the empty page
        and the counts. The server answers a long poll at its --max-wait
        at most; this call asks again until ``wait`` has passed."""
        q: dict[str, Any] = {"actor": actor, "unread": unread or None, "unacked": unacked or None, "thread": thread,
                             "after": after, "limit": limit}
        deadline = time.monotonic() + seconds_of(wait)
        while True:
            left = deadline - time.monotonic()
            q["wait"] = duration(left, "wait") if left > 0 else None
            v = self._t.request("GET", "/v1/inbox", query=q, retry=True, timeout=self._t.timeout + max(left, 0))
            page = InboxPage.from_dict(check_answer(v, "inbox"))
            if page.messages or deadline - time.monotonic() <= 0:
                return page

    def mark_read(self, id: str) -> None:
        """Move the caller's read cursor to message ``id`` (never back): the
        messages up to it are no longer unread, across restarts."""
        self._t.request("POST", "/v1/inbox/read", body={"id": id}, retry=True)

    def follow_inbox(self, after: int = 0, *, actor: str | None = None, heartbeat: Seconds = 5.0,
                     reconnect_for: Seconds | None = None) -> Generator[InboxEvent, None, None]:
        """Yield the caller's inbox as it changes, after seq ``after``, for
        ever: each message sent to it or to a role it holds, and each ack or
        escalation of one, as an InboxEvent (``seq``, ``type``, ``message``
        as it stands). It resumes after a dropped connection or a server
        restart from the last seq received: no gap, no duplicate. Pass a
        record's ``seq`` as ``after`` to resume in another process. Close
        the generator (or leave the loop) to stop."""
        from ._sse import follow_inbox

        q = {"actor": actor, "heartbeat": duration(heartbeat, "heartbeat")}
        return follow_inbox(self._t, after, q, seconds_of(heartbeat), self._t.retry_for if reconnect_for is None else seconds_of(reconnect_for))

    def wait_for_work(self, timeout: Seconds | None = None, *, labels: Mapping[str, str] | None = None,
                      parent_id: str | None = None) -> Work:
        """Block until the caller has an unread message or a task is ready
        to claim (with these filters), whichever comes first, or
        ``timeout`` seconds pass (None: for ever). Returns a Work: ``inbox``,
        the unread page with its counts, and ``ready``, the tasks ready to
        claim when a task woke the wait (best first; claim one with
        claim_task: another agent may take it first). Both are empty after
        the timeout. The wait is the inbox's long poll raced against the
        task events' stream; nothing polls on a timer."""
        from ._wait import wait_for_work

        return wait_for_work(self, None if timeout is None else seconds_of(timeout), labels, parent_id)

    def follow(self, after: int = 0, *, types: Sequence[str] | None = None, actor: str | None = None,
               subject_kind: str | None = None, subject_id: str | None = None, subject_name: str | None = None,
               since: datetime | None = None, until: datetime | None = None,
               heartbeat: Seconds = 5.0, reconnect_for: Seconds | None = None) -> Generator[Event, None, None]:
        """Yield the events after seq ``after``, the backlog then live, for ever.

        A dropped connection, a truncated stream or a server restart is
        met by reconnecting from the last seq received: no gap, no
        duplicate. A connection silent for three heartbeats is taken for
        dead. When no server answers for ``reconnect_for`` seconds
        (default: the client's retry_for), ServerUnreachableError.
        Close the generator (or leave the loop) to stop.
        """
        from ._sse import follow

        q = {"type": ",".join(types) if types else None, "actor": actor, "subject_kind": subject_kind, "subject_id": subject_id,
             "subject_name": subject_name, "since": format_time(since), "until": format_time(until),
             "heartbeat": duration(heartbeat, "heartbeat")}
        return follow(self._t, after, q, seconds_of(heartbeat), self._t.retry_for if reconnect_for is None else seconds_of(reconnect_for))

    # Agent-loop helpers.

    def lock(self, resource: str, ttl: Seconds = 30, *, wait: Seconds = 0, renew: bool = True, message: str | None = None) -> LockHolder:
        """A context manager holding the lease on resource for the block:
        ``with ws.lock("build", ttl=30) as lease: ...``. It renews the lease
        in a thread every third of ``ttl`` and releases it at the end. Pass
        ``fence=lease.token`` on writes: if the lease lapsed and another
        took it, they fail with StaleFenceError instead of overwriting."""
        from ._helpers import LockHolder

        return LockHolder(self, resource, ttl, wait=wait, renew=renew, message=message)

    def claim(self, *, lease: Seconds = 300, labels: Mapping[str, str] | None = None, parent_id: str | None = None,
              wait: Seconds = 0) -> ClaimHolder:
        """A context manager claiming the best ready task for the block:
        ``with ws.claim(lease=60) as claim: ... claim.complete("done")``. It
        heartbeats in a thread every third of ``lease``; a block left
        without complete() or fail() (or by an exception) releases the task
        for another agent. NoTaskError when no task is ready."""
        from ._helpers import ClaimHolder

        return ClaimHolder(self, lease=lease, labels=labels, parent_id=parent_id, wait=wait)


def _labels_query(labels: Mapping[str, str] | None) -> str | None:
    if not labels:
        return None
    import json

    return json.dumps(dict(labels), separators=(",", ":"), sort_keys=True)
