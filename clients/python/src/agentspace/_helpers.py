"""Context managers for the agent loop: a lease held for a block, and a
claim held for a block, each kept alive by a thread."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._errors import AgentspaceError, InvalidError, LockLostError, NotFoundError, NotHolderError
from ._models import Lease, Task

if TYPE_CHECKING:
    from ._client import Seconds, Workspace

__all__ = ["ClaimHolder", "HeldClaim", "HeldLease", "LockHolder"]

# Answers that mean the lease or claim is no longer ours.
_GONE = (LockLostError, NotHolderError, NotFoundError)


class _KeepAlive:
    """A thread that calls beat() every period until stopped, or until
    beat raises one of the _GONE errors (then lost is set). Other errors
    (a server restarting) are kept in error and retried next period."""

    def __init__(self, name: str, period: float, beat: Any, done: Any) -> None:
        self._stop = threading.Event()
        self._done = done
        self._beat = beat
        self._period = max(period, 0.001)
        self.lost: AgentspaceError | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._period):
                try:
                    self._beat()
                    self.error = None
                except _GONE as e:
                    self.lost = e
                    return
                except Exception as e:  # noqa: BLE001 - kept for the holder to see
                    self.error = e
        finally:
            self._done()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


class HeldLease:
    """The lease a ``with ws.lock(...)`` block holds. ``token`` fences the
    block's writes (pass ``fence=lease.token``); ``lost`` is set once a
    renewal found the lease taken or gone."""

    def __init__(self, lease: Lease) -> None:
        self._lease = lease
        self._keep: _KeepAlive | None = None

    @property
    def lease(self) -> Lease:
        """The lease as last acquired or renewed."""
        return self._lease

    @property
    def resource(self) -> str:
        """The locked resource."""
        return self._lease.resource

    @property
    def owner(self) -> str:
        """Who holds the lease."""
        return self._lease.owner

    @property
    def token(self) -> int:
        """The fencing token."""
        return self._lease.token

    @property
    def expires_at(self) -> datetime | None:
        """When the lease lapses unless renewed again."""
        return self._lease.expires_at

    @property
    def lost(self) -> bool:
        """Whether a renewal found the lease lapsed and taken, or released."""
        return self._keep is not None and self._keep.lost is not None

    def check(self) -> None:
        """Raise the error that lost the lease, if it was lost."""
        if self._keep is not None and self._keep.lost is not None:
            raise self._keep.lost


class LockHolder:
    """The context manager of Workspace.lock."""

    def __init__(self, ws: Workspace, resource: str, ttl: Seconds, *, wait: Seconds, renew: bool, message: str | None) -> None:
        from ._client import seconds_of

        self._ws, self._resource, self._ttl, self._wait, self._renew, self._message = ws, resource, ttl, wait, renew, message
        self._period = seconds_of(ttl) / 3
        self._held: HeldLease | None = None

    def __enter__(self) -> HeldLease:
        lease = self._ws.acquire_lock(self._resource, self._ttl, wait=self._wait, message=self._message)
        held = HeldLease(lease)
        if self._renew:
            def beat() -> None:
                held._lease = self._ws.renew_lock(self._resource, held._lease.token, self._ttl)

            held._keep = _KeepAlive(f"agentspace-lock:{self._resource}", self._period, beat, self._ws.transport.close_thread)
        self._held = held
        return held

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        held = self._held
        if held is None:
            return
        if held._keep is not None:
            held._keep.stop()
        if held.lost:
            return
        try:
            self._ws.release_lock(self._resource, held.token)
        except _GONE:
            pass  # it lapsed, or was forced free: nothing to release


class HeldClaim:
    """The task a ``with ws.claim(...)`` block holds. Finish it with
    complete() or fail(); leaving the block otherwise releases it."""

    def __init__(self, ws: Workspace, task: Task) -> None:
        self._ws = ws
        self._task = task
        self._keep: _KeepAlive | None = None
        self._mu = threading.Lock()
        self._done = False

    @property
    def task(self) -> Task:
        """The task as last claimed, heartbeaten or finished."""
        return self._task

    @property
    def id(self) -> str:
        """The task's id."""
        return self._task.id

    @property
    def lost(self) -> bool:
        """Whether a heartbeat found the claim lapsed and returned, or taken."""
        return self._keep is not None and self._keep.lost is not None

    @property
    def finished(self) -> bool:
        """Whether complete(), fail() or release() was called."""
        return self._done

    def check(self) -> None:
        """Raise the error that lost the claim, if it was lost."""
        if self._keep is not None and self._keep.lost is not None:
            raise self._keep.lost

    def _beat(self, lease: Seconds) -> None:
        with self._mu:
            if not self._done:
                self._task = self._ws.heartbeat_task(self._task.id, lease=lease)

    def _finish(self, call: Any) -> Task:
        with self._mu:
            if self._done:
                raise InvalidError("the claim is already finished", problem={"code": "invalid", "field": "claim", "reason": "already finished"})
            self._task = call()
            self._done = True
        if self._keep is not None:
            self._keep.stop()
        return self._task

    def complete(self, summary: str = "", artifacts: Sequence[str] = (), **write: Any) -> Task:
        """Mark the task done with its result (write fields as for complete_task)."""
        return self._finish(lambda: self._ws.complete_task(self._task.id, summary, artifacts, **write))

    def fail(self, summary: str = "", artifacts: Sequence[str] = (), **write: Any) -> Task:
        """Mark the task failed with its result."""
        return self._finish(lambda: self._ws.fail_task(self._task.id, summary, artifacts, **write))

    def release(self, **write: Any) -> Task:
        """Give the task back: pending again, for another agent."""
        return self._finish(lambda: self._ws.release_task(self._task.id, **write))


class ClaimHolder:
    """The context manager of Workspace.claim."""

    def __init__(self, ws: Workspace, *, lease: Seconds, labels: Mapping[str, str] | None, parent_id: str | None, wait: Seconds) -> None:
        from ._client import seconds_of

        self._ws, self._lease, self._labels, self._parent_id, self._wait = ws, lease, labels, parent_id, wait
        self._period = seconds_of(lease) / 3
        self._held: HeldClaim | None = None

    def __enter__(self) -> HeldClaim:
        task = self._ws.claim_task(lease=self._lease, labels=self._labels, parent_id=self._parent_id, wait=self._wait)
        held = HeldClaim(self._ws, task)
        held._keep = _KeepAlive(f"agentspace-claim:{task.id}", self._period, lambda: held._beat(self._lease), self._ws.transport.close_thread)
        self._held = held
        return held

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        held = self._held
        if held is None:
            return
        if held._keep is not None:
            held._keep.stop()
        if held.finished or held.lost:
            return
        try:
            held.release()
        except (*_GONE, InvalidError):
            pass  # the claim lapsed or the task moved on: nothing to give back
