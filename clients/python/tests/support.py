"""What the tests share: real `wsctl serve` processes, and a TCP proxy that
drops connections on purpose.

The tests need a wsctl binary and a workspace store to serve:

    AGENTSPACE_TEST_WSCTL=/path/to/wsctl   (default: wsctl on PATH)
    AGENTSPACE_TEST_STORE=sqlite:/tmp/ws.db (a workspace that exists)

The Go test clients/python/python_test.go sets both, for SQLite and for
PostgreSQL. Without them the tests fail, saying so.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable

_URL = re.compile(r" on (\S+) for ")


def wsctl_binary() -> str:
    b = os.environ.get("AGENTSPACE_TEST_WSCTL") or shutil.which("wsctl")
    if not b:
        raise RuntimeError("set AGENTSPACE_TEST_WSCTL to a wsctl binary (go build ./cmd/wsctl), or put wsctl on PATH")
    return b


def store_dsn() -> str:
    s = os.environ.get("AGENTSPACE_TEST_STORE")
    if not s:
        raise RuntimeError("set AGENTSPACE_TEST_STORE to the DSN of a workspace (wsctl --dsn sqlite:/tmp/ws.db init)")
    return s


def wsctl(*args: str, store: str | None = None) -> str:
    """Run a wsctl command on the store and return its stdout."""
    out = subprocess.run([wsctl_binary(), "--dsn", store or store_dsn(), *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"wsctl {' '.join(args)}: exit {out.returncode}: {out.stderr}")
    return out.stdout


class ServerProcess:
    """A `wsctl serve` process on the test store."""

    def __init__(self, *args: str, store: str | None = None, listen: str = "127.0.0.1:0") -> None:
        self.store = store or store_dsn()
        self.listen = listen
        self.args = args
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log: list[str] = []

    def start(self) -> str:
        """Start the server and return its URL (the same port on a restart)."""
        self.proc = subprocess.Popen(
            [wsctl_binary(), "--dsn", self.store, "serve", "--listen", self.listen, *self.args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        found = threading.Event()
        proc = self.proc

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.log.append(line)
                m = _URL.search(line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not found.wait(60):
            self.kill()
            raise RuntimeError("wsctl serve did not start:\n" + "".join(self.log))
        if self.url.startswith("http://"):
            # A restart listens where the first start did.
            self.listen = self.url[len("http://"):]
        return self.url

    def stop(self) -> None:
        """Stop the server as SIGTERM does: it drains, then exits."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self._reap()

    def kill(self) -> None:
        """Kill the server with SIGKILL: no drain, no goodbye."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        self._reap()

    def _reap(self) -> None:
        if self.proc is None:
            return
        self.proc.wait(30)
        self._reader.join(30)
        if self.proc.stderr:
            self.proc.stderr.close()


_shared: ServerProcess | None = None
_shared_mu = threading.Lock()


def shared_url() -> str:
    """The URL of one server shared by the tests of this process."""
    global _shared
    with _shared_mu:
        if _shared is None:
            # The resilience tests put a TCP proxy (127.0.0.1, its own port)
            # in front of it: the server must answer to 127.0.0.1 on any port.
            _shared = ServerProcess("--heartbeat", "1s", "--allowed-host", "127.0.0.1")
            _shared.start()
            atexit.register(_shared.stop)
        return _shared.url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique(prefix: str) -> str:
    """A name no other test run used on this store."""
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"


FREEZE = -1


class Proxy:
    """A TCP proxy on loopback in front of an HTTP server. ``cut`` decides,
    for each chunk the server sends on a connection, how many of its bytes
    to pass on before closing both sides (None: all, keep going; FREEZE:
    none, and keep the connection open but silent, as a half-open TCP
    connection is)."""

    def __init__(self, upstream_url: str, cut: Callable[[int, bytes, int], int | None] | None = None) -> None:
        hostport = upstream_url.split("://", 1)[1].rstrip("/")
        host, port = hostport.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.cut = cut
        self.connections = 0
        self.cuts = 0
        self._ln = socket.socket()
        self._ln.bind(("127.0.0.1", 0))
        self._ln.listen(64)
        self.url = f"http://127.0.0.1:{self._ln.getsockname()[1]}"
        self._stop = False
        self._mu = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop = True
        self._ln.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                c, _ = self._ln.accept()
            except OSError:
                return
            with self._mu:
                n = self.connections
                self.connections += 1
            threading.Thread(target=self._pipe, args=(c, n), daemon=True).start()

    def _pipe(self, client: socket.socket, n: int) -> None:
        try:
            up = socket.create_connection(self.upstream, timeout=30)
        except OSError:
            client.close()
            return
        sent = 0
        try:
            while True:
                r, _, _ = select.select([client, up], [], [], 30)
                if not r:
                    return
                if client in r:
                    b = client.recv(65536)
                    if not b:
                        return
                    up.sendall(b)
                if up in r:
                    b = up.recv(65536)
                    if not b:
                        return
                    keep = self.cut(n, b, sent) if self.cut else None
                    if keep == FREEZE:
                        with self._mu:
                            self.cuts += 1
                        while not self._stop and client.recv(65536):
                            pass  # silent until the client gives up
                        return
                    if keep is not None:
                        with self._mu:
                            self.cuts += 1
                        client.sendall(b[:keep])
                        return
                    client.sendall(b)
                    sent += len(b)
        except OSError:
            return
        finally:
            for s in (client, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
