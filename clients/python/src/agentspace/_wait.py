"""The agent loop's wait: block until a message arrives or a task is ready.

Two waiters race, each on a connection of its own: the inbox's long poll
(``GET /v1/inbox?unread=true&wait=...``, answered by the server the moment
the page would hold a message) and a follow of the task events from the
log's head read before the first look. Invariant: a task that becomes
ready after that look does so by a task event above the head, which wakes
the task waiter to look again; one ready before it was seen by the look.
Neither waiter polls on a timer; the first to finish wins and the other
is stopped by shutting its connection down.
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import ServerUnreachableError, error_from_body
from ._models import InboxPage, Task

if TYPE_CHECKING:
    from ._client import Workspace

__all__ = ["Work", "wait_for_work", "ready_tasks"]

# The longest single long poll asked for; the server caps it at its own
# --max-wait (60s by default) and the waiter asks again.
_POLL = 60.0


@dataclass(slots=True)
class Work:
    """What :meth:`Workspace.wait_for_work` returned with: the unread page
    of the inbox (with its counts), and the tasks ready to claim when a task
    woke the wait. Both empty: the timeout passed with nothing."""

    inbox: InboxPage = field(default_factory=InboxPage)
    ready: list[Task] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.inbox.messages or self.ready)


def ready_tasks(ws: Workspace, labels: Mapping[str, str] | None, parent_id: str | None) -> list[Task]:
    """The tasks a claim with these filters could take now: pending, each
    dependency done, best first (priority, then age), as claim orders them."""
    pending: list[Task] = []
    after = None
    while True:
        page = ws.list_tasks(status="pending", labels=labels, parent_id=parent_id, after=after)
        pending.extend(page.tasks)
        if not page.next:
            break
        after = page.next
    done: dict[str, bool] = {}
    ready = []
    for t in pending:
        for dep in t.depends_on:
            if dep not in done:
                done[dep] = ws.get_task(dep).status == "done"
        if all(done[d] for d in t.depends_on):
            ready.append(t)
    ready.sort(key=lambda t: -t.priority)  # stable: oldest first within a priority
    return ready


class _Race:
    """The sockets the waiters read, to shut them down when one wins."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._mu = threading.Lock()
        self._socks: list[socket.socket] = []

    def hold(self, c: http.client.HTTPConnection) -> None:
        """Connect c and keep its socket: http.client lets go of a
        streaming answer's socket (c.sock becomes None) but reads on it."""
        c.connect()
        s = c.sock
        with self._mu:
            self._socks.append(s)
            stopped = self.stop.is_set()
        if stopped:
            _shut(s)

    def end(self) -> None:
        with self._mu:
            self.stop.set()
            socks = list(self._socks)
        for s in socks:
            _shut(s)


def _shut(s: socket.socket) -> None:
    # shutdown wakes a thread blocked reading the socket; close alone may not.
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def wait_for_work(ws: Workspace, timeout: float | None, labels: Mapping[str, str] | None, parent_id: str | None) -> Work:
    """See Workspace.wait_for_work."""
    t = ws.transport
    head = ws.events_head()
    page = ws.inbox(unread=True)
    if page.messages:
        return Work(page, [])
    ready = ready_tasks(ws, labels, parent_id)
    if ready:
        return Work(page, ready)

    if timeout is not None and timeout <= 0:
        return Work(page, [])

    race = _Race()
    results: queue.Queue[tuple[str, Any]] = queue.Queue()

    def long_poll() -> InboxPage:
        from ._client import duration

        c = t.new_connection(t.timeout + _POLL)
        race.hold(c)
        try:
            c.request("GET", t.target("/v1/inbox", {"unread": True, "wait": duration(_POLL, "wait")}), headers=t.headers())
            resp = c.getresponse()
            raw = resp.read()
        finally:
            c.close()
        if resp.status >= 300:
            raise error_from_body(resp.status, raw)
        return InboxPage.from_dict(json.loads(raw))

    def messages() -> None:
        failing_since: float | None = None
        try:
            while not race.stop.is_set():
                try:
                    p = long_poll()
                except (OSError, http.client.HTTPException) as e:
                    # A dropped poll is asked again (it reads, it writes nothing).
                    if race.stop.is_set():
                        return
                    now = time.monotonic()
                    failing_since = failing_since or now
                    if now - failing_since > t.retry_for:
                        raise ServerUnreachableError(f"wait_for_work: no answer from {t.url} for {t.retry_for:g}s ({e})") from e
                    time.sleep(0.2)
                    continue
                failing_since = None
                if p.messages:
                    results.put(("messages", p))
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            if not race.stop.is_set():
                results.put(("error", e))

    def tasks() -> None:
        from ._sse import follow

        try:
            for _ in follow(t, head, {"subject_kind": "task", "heartbeat": "5000ms"}, 5.0, t.retry_for, stop=race.stop, hold=race.hold):
                r = ready_tasks(ws, labels, parent_id)
                if r:
                    results.put(("ready", r))
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            if not race.stop.is_set():
                results.put(("error", e))
        finally:
            t.close_thread()  # the connection its looks used

    threads = [threading.Thread(target=f, name="agentspace-wait-" + f.__name__, daemon=True) for f in (messages, tasks)]
    for th in threads:
        th.start()
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            kind, v = results.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            kind, v = "timeout", None
    finally:
        race.end()
        for th in threads:
            th.join()
    if kind == "error":
        raise v
    if kind == "messages":
        return Work(v, [])
    # A task, or the timeout: the page as it stands now, with its counts.
    return Work(ws.inbox(unread=True), v or [])
