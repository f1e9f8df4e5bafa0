"""Following the event log over Server-Sent Events, resuming after drops.

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
import time
from collections.abc import Generator, Iterator
from typing import Any

from ._errors import ProtocolError, ServerUnreachableError, UnavailableError, error_from_body, error_from_problem
from ._http import Transport
from ._models import Event

__all__ = ["follow"]


def follow(t: Transport, after: int, query: dict[str, Any], heartbeat: float, reconnect_for: float) -> Generator[Event, None, None]:
    """Yield events after seq ``after`` for ever; see Workspace.follow."""
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        from ._errors import InvalidError

        raise InvalidError("after: not a seq (a whole number, 0 or more)", problem={"code": "invalid", "field": "after", "reason": "not a seq"})
    cursor = after
    failing_since: float | None = None
    backoff = 0.05
    # Three heartbeats of silence: the connection is dead (a half-open TCP
    # connection never says so).
    read_timeout = max(3 * heartbeat, 0.5)
    while True:
        conn = t.new_connection(read_timeout)
        cause: BaseException | None = None
        try:
            headers = t.headers("text/event-stream")
            headers["Last-Event-ID"] = str(cursor)
            conn.request("GET", t.target("/v1/events", dict(query, after=cursor)), headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                err = error_from_body(resp.status, resp.read())
                if not isinstance(err, UnavailableError):
                    raise err
                cause = err  # a server draining for a restart: come back
            else:
                ctype = resp.getheader("Content-Type", "") or ""
                if not ctype.startswith("text/event-stream"):
                    raise ProtocolError(f"follow: answer of type {ctype!r}, not an event stream", status=resp.status)
                failing_since, backoff = None, 0.05
                for item in _records(resp):
                    if isinstance(item, int):
                        cursor = max(cursor, item)  # a heartbeat's id
                    elif item.seq > cursor:
                        cursor = item.seq
                        yield item
        except (OSError, http.client.HTTPException) as e:
            cause = e
        finally:
            conn.close()
        now = time.monotonic()
        if failing_since is None:
            failing_since = now
        elif now - failing_since > reconnect_for:
            raise ServerUnreachableError(f"follow: no stream from {t.url} for {reconnect_for:g}s ({cause or 'the stream ended'})") from cause
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


def _records(resp: http.client.HTTPResponse) -> Iterator[Event | int]:
    """Yield the complete records of one response, an Event for an event
    and the seq for a heartbeat; return at the response's end."""
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
                    raise ProtocolError("follow: the stream ended with a malformed error")
                raise error_from_problem(int(problem.get("status") or 0), problem)
            if data:
                try:
                    d = json.loads("\n".join(data))
                except ValueError as e:
                    raise ProtocolError(f"follow: a malformed event: {e}") from e
                if not isinstance(d, dict) or not isinstance(d.get("seq"), int):
                    raise ProtocolError("follow: an event without a seq")
                ev = Event.from_dict(d)
                if ev_id is not None and ev_id != ev.seq:
                    raise ProtocolError(f"follow: event id {ev_id} but seq {ev.seq}")
                yield ev
            elif ev_id is not None:
                # A heartbeat: the server examined the log up to ev_id.
                yield ev_id
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
                raise ProtocolError(f"follow: an id that is not a seq: {value[:40]!r}") from e
        elif name == "event":
            ev_type = value
