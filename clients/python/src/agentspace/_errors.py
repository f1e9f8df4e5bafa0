"""The error classes: one per problem code of the HTTP API.

Every error answer of the server is an RFC 9457 problem with a stable
``code``; :func:`error_from_problem` turns it into the matching class, with
the problem's typed fields as attributes, so a caller catches
``ConflictError`` and reads ``e.current`` instead of branching on a status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ._models import Subject, parse_time

__all__ = [
    "AgentspaceError",
    "AlreadyExistsError",
    "AuthError",
    "CompactedError",
    "ConflictError",
    "ForbiddenError",
    "InvalidError",
    "LockLostError",
    "LockedError",
    "NoTaskError",
    "NotFoundError",
    "NotHolderError",
    "PausedError",
    "ProtocolError",
    "ServerError",
    "ServerUnreachableError",
    "StaleFenceError",
    "TooLargeError",
    "TooManyError",
    "UnavailableError",
    "error_from_problem",
]


class AgentspaceError(Exception):
    """An error of the workspace or its server.

    ``code`` is the problem's stable code (``"conflict"``, ``"locked"``, ...),
    ``status`` the HTTP status (0 when no answer came), ``detail`` the
    server's one-line explanation, ``problem`` the whole problem body, and
    ``batch_index`` the failing op's index when the error is a batch's.
    """

    code: str = "internal"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail or self.code)
        self.detail = detail
        self.status = status
        self.problem: dict[str, Any] = dict(problem or {})
        if problem and isinstance(problem.get("code"), str):
            self.code = problem["code"]
        bi = self.problem.get("batch_index")
        self.batch_index: int | None = bi if isinstance(bi, int) else None

    def __str__(self) -> str:
        text = self.detail or self.code
        if self.batch_index is not None:
            text = f"batch op {self.batch_index}: {text}"
        return text


class NotFoundError(AgentspaceError):
    """The record does not exist, or no longer does (404 ``not_found``)."""

    code = "not_found"


class AlreadyExistsError(AgentspaceError):
    """A live record with that name or key exists (409 ``already_exists``)."""

    code = "already_exists"


class ConflictError(AgentspaceError):
    """An ``if_version`` condition failed (409 ``conflict``).

    ``expected`` is the version asked for, ``current`` the stored one (0 if
    the record does not exist), ``subject`` the record written. Re-read at
    ``current`` and retry.
    """

    code = "conflict"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail, status=status, problem=problem)
        p = self.problem
        self.expected: int = _int(p.get("expected"))
        self.current: int = _int(p.get("current"))
        self.subject: Subject = Subject.from_dict(p.get("subject") or {})


class LockedError(AgentspaceError):
    """Another owner holds a live lease on the resource (423 ``locked``).

    ``holder`` owns it until ``expires_at`` under ``token``.
    """

    code = "locked"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail, status=status, problem=problem)
        p = self.problem
        self.resource: str = str(p.get("resource") or "")
        self.holder: str = str(p.get("holder") or "")
        self.token: int = _int(p.get("token"))
        self.expires_at: datetime | None = parse_time(p.get("expires_at"))


class PausedError(AgentspaceError):
    """The actor is paused by an operator (423 ``paused``): its writes are
    refused, but acks, lock renewals, task heartbeats and releases pass.

    ``actor`` is the paused actor, ``by`` the operator, ``since`` when.
    Ack the pause message (its type is ``pause``; ``inbox(unacked=True)``
    lists it) and wait for the resume (``wait_for_work`` or ``inbox(wait=...)``).
    """

    code = "paused"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail, status=status, problem=problem)
        p = self.problem
        self.actor: str = str(p.get("actor") or "")
        self.by: str = str(p.get("by") or "")
        self.since: datetime | None = parse_time(p.get("since"))


class StaleFenceError(AgentspaceError):
    """A write's ``fence`` is older than the newest token of the record's
    lock (409 ``stale_fence``): the writer's lease lapsed and was taken."""

    code = "stale_fence"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail, status=status, problem=problem)
        p = self.problem
        self.resource: str = str(p.get("resource") or "")
        self.fence: int = _int(p.get("fence"))
        self.newest: int = _int(p.get("newest"))


class NotHolderError(AgentspaceError):
    """The caller does not hold the lease or claim it named (409 ``not_holder``)."""

    code = "not_holder"


class LockLostError(AgentspaceError):
    """The lease or claim expired and was taken over before this call
    (409 ``lock_lost``)."""

    code = "lock_lost"


class NoTaskError(AgentspaceError):
    """No task is ready to claim (404 ``no_task``)."""

    code = "no_task"


class CompactedError(AgentspaceError):
    """The events asked for are below the log's floor (410 ``compacted``).

    Re-read the state, then follow from ``floor - 1``.
    """

    code = "compacted"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail, status=status, problem=problem)
        self.requested: int = _int(self.problem.get("requested"))
        self.floor: int = _int(self.problem.get("floor"))


class RewoundError(AgentspaceError):
    """The event log went back (410 ``rewound``): the database failed over
    to a standby that had not replayed events this client saw or wrote, so
    a seq it holds may now name another event. Nothing was written; re-read
    the state and follow again from the log's head."""

    code = "rewound"


class InvalidError(AgentspaceError, ValueError):
    """Bad input (400 ``invalid``, or refused by the client before sending):
    ``field`` names it, ``reason`` says why. Nothing was written."""

    code = "invalid"

    def __init__(self, detail: str = "", *, status: int = 0, problem: dict[str, Any] | None = None) -> None:
        super().__init__(detail, status=status, problem=problem)
        self.field: str = str(self.problem.get("field") or "")
        self.reason: str = str(self.problem.get("reason") or "")


class TooLargeError(InvalidError):
    """Content over the workspace's size limit (413 ``too_large``)."""

    code = "too_large"


class AuthError(AgentspaceError):
    """No token where one is required, or one that is unknown, revoked or
    expired (401 ``unauthorized``)."""

    code = "unauthorized"


class ForbiddenError(AgentspaceError):
    """The token's actor may not do this (403 ``forbidden``)."""

    code = "forbidden"


class TooManyError(AgentspaceError):
    """The token holds as many streams as the server allows it (429
    ``too_many``): end one (close its generator) before opening another."""

    code = "too_many"


class UnavailableError(AgentspaceError):
    """The server or its store cannot serve now (503: ``unavailable``,
    ``closed``, ``schema``, ``no_workspace``; 504 ``timeout``)."""

    code = "unavailable"


class ServerError(AgentspaceError):
    """The server failed (500 ``internal``), or answered an error that is
    not a problem of the API."""

    code = "internal"


class ServerUnreachableError(AgentspaceError, ConnectionError):
    """No answer from the server: it is down, or the connection kept
    failing for as long as the client retries. A write that carried an
    idempotency key may be retried safely with the same key."""

    code = "unreachable"


class ProtocolError(AgentspaceError):
    """The server answered something that is not the API's: a malformed
    body, an unexpected content type, a truncated answer."""

    code = "protocol"


_BY_CODE: dict[str, type[AgentspaceError]] = {
    "not_found": NotFoundError,
    "no_route": NotFoundError,
    "already_exists": AlreadyExistsError,
    "conflict": ConflictError,
    "locked": LockedError,
    "paused": PausedError,
    "stale_fence": StaleFenceError,
    "not_holder": NotHolderError,
    "lock_lost": LockLostError,
    "no_task": NoTaskError,
    "compacted": CompactedError,
    "rewound": RewoundError,
    "invalid": InvalidError,
    "unsupported_media_type": InvalidError,
    "too_large": TooLargeError,
    "unauthorized": AuthError,
    "forbidden": ForbiddenError,
    "too_many": TooManyError,
    "unavailable": UnavailableError,
    "closed": UnavailableError,
    "schema": UnavailableError,
    "no_workspace": UnavailableError,
    "timeout": UnavailableError,
    "internal": ServerError,
}


def error_from_problem(status: int, problem: dict[str, Any]) -> AgentspaceError:
    """Return the typed error an answer with this status and problem body
    carries. An unknown code is a :class:`ServerError` keeping the code."""
    code = problem.get("code")
    cls = _BY_CODE.get(code, ServerError) if isinstance(code, str) else ServerError
    detail = problem.get("detail") or problem.get("title") or f"HTTP {status}"
    return cls(str(detail), status=status, problem=problem)


def error_from_body(status: int, body: bytes) -> AgentspaceError:
    """Return the typed error of an error answer's raw body; a body that is
    not a problem is a :class:`ServerError` (5xx) or :class:`ProtocolError`
    quoting its start."""
    import json

    try:
        problem = json.loads(body)
    except ValueError:
        problem = None
    if isinstance(problem, dict) and isinstance(problem.get("code"), str):
        return error_from_problem(status, problem)
    snippet = body[:200].decode("utf-8", errors="replace")
    cls = ServerError if status >= 500 else ProtocolError
    return cls(f"HTTP {status} without a problem body: {snippet!r}", status=status)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
