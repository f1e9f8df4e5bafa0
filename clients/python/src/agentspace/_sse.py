"""Following the event log, or one inbox, over Server-Sent Events,
resuming after drops.

Invariant: ``cursor`` is the seq of the last event yielded (or the seq a
heartbeat said the server had examined), and every connection asks for
the events after it. The server's stream is gap-free and in order, so a
reconnect misses nothing and repeats nothing; an event is yielded only
once its record is complete (its blank line arrived), so a stream cut
mid-event yields no half event and the reconnect sends it whole.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from ._errors import ProtocolError, ServerUnreachableError, UnavailableError, error_from_body, error_from_problem
from ._http import Transport
from ._models import Event, InboxEvent

__all__ = ["follow", "follow_inbox"]

R = TypeVar("R")


def follow(t: Transport, after: int, query: dict[str, Any], heartbeat: float, reconnect_for: float, *,
           stop: threading.Event | None = None, hold: Callable[[http.client.HTTPConnection], None] | None = None) -> Generator[Event, None, None]:
    """Yield events after seq ``after`` for ever; see Workspace.follow.
    ``stop`` ends the generator before its next connection, and ``hold``
    is given each connection it opens (to shut it down from another thread)."""
    return stream(t, "/v1/events", "follow", after, query, heartbeat, reconnect_for, Event.from_dict, stop=stop, hold=hold)


def follow_inbox(t: Transport, after: int, query: dict[str, Any], heartbeat: float, reconnect_for: float) -> Generator[InboxEvent, None, None]:
    """Yield an inbox's records after seq ``after`` for ever; see Workspace.follow_inbox."""
    return stream(t, "/v1/inbox/stream", "follow_inbox", after, query, heartbeat, reconnect_for, InboxEvent.from_dict)


def stream(t: Transport, path: str, what: str, after: int, query: dict[str, Any], heartbeat: float, reconnect_for: float,
           parse: Callable[[dict[str, Any]], R], *, stop: threading.Event | None = None,
           hold: Callable[[http.client.HTTPConnection], None] | None = None) -> Generator[R, None, None]:
    """Yield the records of the stream at path after seq ``after``, each
    read by parse, resuming after drops as the module's invariant says."""
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        from ._errors import InvalidError

        raise InvalidError("after: not a seq (a whole number, 0 or more)", problem={"code": "invalid", "field": "after", "reason": "not a seq"})
    cursor = after
    failing_since: float | None = None
    backoff = 0.05
    # Three heartbeats of silence: the connection is dead (a half-open TCP
    # connection never says so).
    read_timeout = max(3 * heartbeat, 0.5)
    while stop is None or not stop.is_set():
        conn = t.new_connection(read_timeout)
        cause: BaseException | None = None
        try:
            if hold is not None:
                hold(conn)
            headers = t.headers("text/event-stream")
            headers["Last-Event-ID"] = str(cursor)
            conn.request("GET", t.target(path, dict(query, after=cursor)), headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                err = error_from_body(resp.status, resp.read())
                if not isinstance(err, UnavailableError):
                    raise err
                cause = err  # a server draining for a restart: come back
            else:
                ctype = resp.getheader("Content-Type", "") or ""
                if not ctype.startswith("text/event-stream"):
                    raise ProtocolError(f"{what}: answer of type {ctype!r}, not an event stream", status=resp.status)
                failing_since, backoff = None, 0.05
                for seq, rec in _records(resp, what):
                    if rec is None:
                        cursor = max(cursor, seq)  # a heartbeat's id
                    elif seq > cursor:
                        cursor = seq
                        yield parse(rec)
        except (OSError, http.client.HTTPException) as e:
            cause = e
        finally:
            conn.close()
        if stop is not None and stop.is_set():
            return
        now = time.monotonic()
        if failing_since is None:
            failing_since = now
        elif now - failing_since > reconnect_for:
            raise ServerUnreachableError(f"{what}: no stream from {t.url} for {reconnect_for:g}s ({cause or 'the stream ended'})") from cause
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


def _records(resp: http.client.HTTPResponse, what: str) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Yield the complete records of one response, (seq, record) for a
    record and (seq, None) for a heartbeat; return at the response's end."""
    data: list[str] = []
    ev_id: int | None = None
    ev_type = ""
    while True:
        raw = resp.readline(1 << 24)
        if not raw or not raw.endswith(b"\n"):
            return  # the end, or a line cut short: drop the partial record
        line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
        if line == "":
            if ev_type == "error":
                try:
                    problem = json.loads("\n".join(data))
                except ValueError:
                    problem = None
                if not isinstance(problem, dict):
                    raise ProtocolError(f"{what}: the stream ended with a malformed error")
                raise error_from_problem(int(problem.get("status") or 0), problem)
            if data:
                try:
                    d = json.loads("\n".join(data))
                except ValueError as e:
                    raise ProtocolError(f"{what}: a malformed record: {e}") from e
                seq = d.get("seq") if isinstance(d, dict) else None
                if not isinstance(seq, int) or isinstance(seq, bool):
                    raise ProtocolError(f"{what}: a record without a seq")
                if ev_id is not None and ev_id != seq:
                    raise ProtocolError(f"{what}: record id {ev_id} but seq {seq}")
                yield seq, d
            elif ev_id is not None:
                # A heartbeat: the server examined the log up to ev_id.
                yield ev_id, None
            data, ev_id, ev_type = [], None, ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "id":
            try:
                ev_id = int(value)
            except ValueError as e:
                raise ProtocolError(f"{what}: an id that is not a seq: {value[:40]!r}") from e
        elif name == "event":
            ev_type = value
