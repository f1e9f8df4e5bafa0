"""The HTTP transport: one kept-alive connection per thread, typed errors,
and retries that are safe.

A request that never reached the server (refused, unreachable) is always
retried. One that may have reached it (the connection dropped before the
answer) is retried only when repeating it cannot do anything twice: reads,
and writes that carry an idempotency key, which the server answers with
the first result.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any

from ._errors import InvalidError, ProtocolError, ServerUnreachableError, error_from_body

__all__ = ["DEFAULT_URL", "Transport", "check_answer"]

DEFAULT_URL = "http://127.0.0.1:7465"

# Errors raised before a request left this process: repeating it is safe.
_NOT_SENT = (ConnectionRefusedError, FileNotFoundError, socket.gaierror)


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (http+unix:///path/to.sock)."""

    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Transport:
    """Sends the API's requests. Safe for use by many threads: each keeps
    its own connection."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        actor: str | None = None,
        timeout: float = 60.0,
        retry_for: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        # AGENTSPACE_DSN names the workspace for wsctl and the clients alike;
        # AGENTSPACE_URL is its older alias.
        source = "url"
        if not url:
            for var in ("AGENTSPACE_DSN", "AGENTSPACE_URL"):
                if os.environ.get(var):
                    url, source = os.environ[var], var
                    break
            else:
                url = DEFAULT_URL
        actor_source = "actor"
        if actor is None and os.environ.get("AGENTSPACE_ACTOR"):
            actor, actor_source = os.environ["AGENTSPACE_ACTOR"], "AGENTSPACE_ACTOR"
        actor = actor or None
        u = urllib.parse.urlsplit(url)
        if u.query and not u.fragment:
            # A wsctl DSN may carry the token as ws_token (and nothing else).
            q = urllib.parse.parse_qs(u.query)
            if list(q) == ["ws_token"] and len(q["ws_token"]) == 1:
                token = token if token is not None else q["ws_token"][0]  # as wsctl: the DSN's beats AGENTSPACE_TOKEN
                u = u._replace(query="")
                url = urllib.parse.urlunsplit(u)
        if u.query or u.fragment:
            raise _bad_url("takes no query or fragment (but ws_token)", source)
        token = token if token is not None else os.environ.get("AGENTSPACE_TOKEN") or None
        self.scheme = u.scheme
        if u.scheme in ("http", "https"):
            if not u.hostname:
                raise _bad_url("names no host", source)
            self._host = u.hostname
            self._port = u.port
            self.prefix = u.path.rstrip("/")
        elif u.scheme == "http+unix":
            if u.netloc or not u.path:
                raise _bad_url("want http+unix:///path/to.sock", source)
            self._sock_path = urllib.parse.unquote(u.path)
            self.prefix = ""
        else:
            raise _bad_url(f"scheme {u.scheme[:16]!r} is not a server's: want http, https or http+unix", source)
        self.url = url
        self.token = token
        self.actor = actor
        self._actor_source = actor_source
        # With both a token and an actor, the first request checks that the
        # token acts as that actor (see _check_actor); True once it does.
        self._actor_checked = not (token and actor)
        self._check_mu = threading.Lock()
        self.timeout = timeout
        self.retry_for = retry_for
        self._ssl = ssl_context
        self._local = threading.local()
        self._mu = threading.Lock()
        self._all: set[http.client.HTTPConnection] = set()

    # Connections.

    def new_connection(self, timeout: float | None) -> http.client.HTTPConnection:
        """Return a new, unopened connection to the server."""
        if self.scheme == "http+unix":
            return _UnixConnection(self._sock_path, timeout)
        if self.scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl or ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _conn(self) -> http.client.HTTPConnection:
        c: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if c is not None and c.sock is not None and _dropped(c.sock):
            # The server closed the idle connection (its keep-alive timeout,
            # a restart): a request sent on it would fail after leaving.
            c.close()
            c = None
        if c is None:
            c = self.new_connection(self.timeout)
            self._local.conn = c
            with self._mu:
                self._all.add(c)
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None
            with self._mu:
                self._all.discard(c)

    def close_thread(self) -> None:
        """Close the calling thread's connection; the next request opens another."""
        self._drop()

    def close(self) -> None:
        """Close every connection the transport opened, in every thread."""
        with self._mu:
            conns, self._all = self._all, set()
        for c in conns:
            c.close()

    def headers(self, accept: str = "application/json") -> dict[str, str]:
        """Return the headers every request carries: the token, or without
        one the actor. A token acts as its own actor only: the first call
        of a transport given both checks that they agree (InvalidError
        naming both when they do not)."""
        if not self._actor_checked:
            self._check_actor()
        h = {"Accept": accept, "User-Agent": "agentspace-python/1"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        elif self.actor:
            h["X-Agentspace-Actor"] = self.actor
        return h

    def _check_actor(self) -> None:
        """Ask the server whom the token acts as, once, and refuse an actor
        that is another: the server would refuse every request naming it
        (403), and acting as the token's actor instead would record the
        work under a name the caller did not give."""
        with self._check_mu:
            if self._actor_checked:
                return
            c = self.new_connection(self.timeout)
            try:
                c.request("GET", self.prefix + "/v1/whoami", headers={"Accept": "application/json", "Authorization": "Bearer " + str(self.token)})
                resp = c.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                return  # unreachable now: the request itself will say so, and the next one checks again
            finally:
                c.close()
            if resp.status >= 300:
                raise error_from_body(resp.status, raw)
            try:
                who = json.loads(raw).get("actor")
            except (ValueError, AttributeError) as e:
                raise ProtocolError("whoami: malformed answer", status=resp.status) from e
            if who != self.actor:
                src = "the actor given" if self._actor_source == "actor" else self._actor_source
                reason = f"is not the token's actor {who!r}"
                raise InvalidError(
                    f"{src} names {self.actor!r} but the token acts as {who!r}: a token acts as its own actor only; "
                    f"drop the actor (or name {who!r}), or use a token of {self.actor!r}",
                    problem={"code": "invalid", "field": "actor", "reason": reason},
                )
            self._actor_checked = True

    def target(self, path: str, query: dict[str, Any] | None = None) -> str:
        """Return the request target: the prefix, the path and the query."""
        t = self.prefix + path
        if query:
            pairs: list[tuple[str, str]] = []
            for k, v in query.items():
                if v is None or v == "" or v == [] or v == 0 and k in ("after", "limit", "version"):
                    continue
                if isinstance(v, (list, tuple)):
                    pairs.extend((k, str(x)) for x in v)
                elif isinstance(v, bool):
                    pairs.append((k, "true" if v else "false"))
                else:
                    pairs.append((k, str(v)))
            if pairs:
                t += "?" + urllib.parse.urlencode(pairs)
        return t

    # Requests.

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        retry: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Send one request and return its decoded JSON answer (None for
        204). An error answer raises its typed error. With retry, a dropped
        connection is retried (for up to retry_for seconds); a request that
        never reached the server is retried in any case."""
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        target = self.target(path, query)
        headers = self.headers()
        if payload is not None:
            headers["Content-Type"] = "application/json"
        deadline = 0.0
        backoff = 0.02
        while True:
            try:
                status, ctype, raw = self._once(method, target, payload, headers, timeout)
                break
            except (OSError, http.client.HTTPException) as e:
                self._drop()
                sent = not isinstance(e, _NOT_SENT)
                if sent and not retry:
                    raise ServerUnreachableError(
                        f"{method} {path}: the connection failed before an answer ({_describe(e)}); "
                        "the request may or may not have been applied"
                    ) from e
                now = time.monotonic()
                if deadline == 0.0:
                    deadline = now + self.retry_for
                if now >= deadline:
                    raise ServerUnreachableError(f"{method} {path}: no answer from {self.url} for {self.retry_for:g}s ({_describe(e)})") from e
                time.sleep(min(backoff, max(0.0, deadline - now)))
                backoff = min(backoff * 2, 1.0)
        if status >= 300:
            raise error_from_body(status, raw)
        if status == 204 or not raw:
            return None
        if not ctype.startswith("application/json"):
            raise ProtocolError(f"{method} {path}: answer of type {ctype!r}, not JSON", status=status)
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ProtocolError(f"{method} {path}: malformed JSON answer: {e}", status=status) from e

    def _once(self, method: str, target: str, payload: bytes | None, headers: dict[str, str], timeout: float | None) -> tuple[int, str, bytes]:
        c = self._conn()
        if timeout is not None:
            c.timeout = timeout
            if c.sock is not None:
                c.sock.settimeout(timeout)
        try:
            c.request(method, target, body=payload, headers=headers)
            resp = c.getresponse()
            raw = resp.read()
        finally:
            if timeout is not None:
                c.timeout = self.timeout
                if c.sock is not None:
                    c.sock.settimeout(self.timeout)
        if resp.will_close:
            self._drop()
        return resp.status, resp.getheader("Content-Type", "") or "", raw


def _bad_url(reason: str, source: str = "url") -> InvalidError:
    # The URL itself may hold a secret (a password): it is not repeated.
    return InvalidError(f"{source}: {reason}", problem={"code": "invalid", "field": "url", "reason": reason})


def _dropped(sock: socket.socket) -> bool:
    """Report whether an idle connection's peer has closed it (it reads
    as ready: EOF, or bytes no request asked for)."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def _describe(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text}" if text != type(e).__name__ else text


def check_answer(v: Any, what: str) -> dict[str, Any]:
    """Return v if it is a JSON object, else raise ProtocolError."""
    if not isinstance(v, dict):
        raise ProtocolError(f"{what}: want a JSON object, got {type(v).__name__}")
    return v

