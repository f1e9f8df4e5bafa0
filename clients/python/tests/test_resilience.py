"""Bad days: a server that is down, restarted or killed, connections that
drop before the answer, event streams cut mid-event, answers that are not
the API's. Each gives a clear typed error, and no acknowledged write is
lost or applied twice."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
import unittest
from collections.abc import Callable

import support

from agentspace import (
    CompactedError,
    ConflictError,
    ProtocolError,
    RewoundError,
    ServerError,
    ServerUnreachableError,
    Workspace,
)


def cut_first_answer(n: int, chunk: bytes, sent: int) -> int | None:
    """Drop the first connection's answer: the server did the work, the
    client never hears of it."""
    return 0 if n == 0 else None


def cut_in_event(k: int) -> Callable[[int, bytes, int], int | None]:
    """Cut the first connection in the middle of its k-th event's data."""
    seen = {"n": 0}

    def cut(n: int, chunk: bytes, sent: int) -> int | None:
        if n != 0:
            return None
        at = 0
        while True:
            i = chunk.find(b"data: {", at)
            if i < 0:
                return None
            seen["n"] += 1
            if seen["n"] == k:
                return i + 12
            at = i + 1

    return cut


class ResilienceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.url = support.shared_url()

    def ws(self, url: str, actor: str, **kw: object) -> Workspace:
        w = Workspace(url, actor=actor, **kw)  # type: ignore[arg-type]
        self.addCleanup(w.close)
        return w

    def proxy(self, cut: Callable[[int, bytes, int], int | None]) -> support.Proxy:
        p = support.Proxy(self.url, cut)
        self.addCleanup(p.close)
        return p

    def test_a_server_that_is_down_is_a_clear_error(self) -> None:
        down = f"http://127.0.0.1:{support.free_port()}"
        ws = self.ws(down, "alice", retry_for=0.3)
        for call in (lambda: ws.get_artifact("x"), lambda: ws.create_artifact("x", "y"), lambda: ws.claim_task()):
            t0 = time.monotonic()
            with self.assertRaises(ServerUnreachableError) as cm:
                call()
            self.assertGreaterEqual(time.monotonic() - t0, 0.3, "retried for retry_for")
            self.assertIsInstance(cm.exception, ConnectionError)
            self.assertIn("127.0.0.1", str(cm.exception))
        unix = self.ws("http+unix:///nonexistent/agentspace.sock", "alice", retry_for=0.1)
        with self.assertRaises(ServerUnreachableError):
            unix.whoami()
        stream = ws.follow(after=0, reconnect_for=0.3)
        with self.assertRaises(ServerUnreachableError):
            next(stream)

    def test_a_write_whose_answer_was_lost_is_retried_with_its_key_and_applied_once(self) -> None:
        direct = self.ws(self.url, "alice")
        name = support.unique("r/lost-answer")
        p = self.proxy(cut_first_answer)
        a = self.ws(p.url, "alice", retry_for=10).create_artifact(name, "v1")
        self.assertEqual((p.cuts, p.connections), (1, 2), "the first answer was dropped and the write sent again")
        self.assertEqual(a.version, 1)
        # A conditional write: without its key the repeat would be a conflict.
        p2 = self.proxy(cut_first_answer)
        b = self.ws(p2.url, "alice", retry_for=10).update_artifact(name, "v2", if_version=1)
        self.assertEqual((p2.cuts, b.version), (1, 2))
        events = direct.read_events(subject_name=name).events
        self.assertEqual([e.type for e in events], ["artifact.created", "artifact.updated"], "each applied once")

    def test_without_a_key_a_lost_answer_is_reported_not_repeated(self) -> None:
        direct = self.ws(self.url, "alice")
        name = support.unique("r/no-key")
        direct.create_artifact(name, "v1")
        p = self.proxy(cut_first_answer)
        nokeys = self.ws(p.url, "alice", retry_for=10, idempotency_keys=False)
        with self.assertRaises(ServerUnreachableError) as cm:
            nokeys.update_artifact(name, "v2", if_version=1)
        self.assertIn("may or may not have been applied", str(cm.exception))
        self.assertEqual(direct.get_artifact(name).version, 2, "it was applied; the client said it could not know")
        with self.assertRaises(ConflictError):
            direct.update_artifact(name, "v2 again", if_version=1)

    def test_a_claim_whose_answer_was_lost_is_not_repeated(self) -> None:
        direct = self.ws(self.url, "lead")
        label = {"suite": support.unique("lost-claim")}
        t1 = direct.create_task("one", labels=label)
        direct.create_task("two", labels=label)
        p = self.proxy(cut_first_answer)
        with self.assertRaises(ServerUnreachableError):
            self.ws(p.url, "worker", retry_for=10).claim_task(labels=label)
        tasks = {t.id: t for t in direct.list_tasks(labels=label).tasks}
        self.assertEqual(tasks[t1.id].status, "in_progress", "the first claim went through")
        self.assertEqual(sum(t.status == "in_progress" for t in tasks.values()), 1, "and was not repeated")

    def test_follow_resumes_after_a_stream_cut_mid_event(self) -> None:
        actor = support.unique("cut-writer")
        w = self.ws(self.url, actor)
        head = w.events_head()
        names = [support.unique("r/cut") for _ in range(5)]
        for n in names:
            w.create_artifact(n, "x")
        p = self.proxy(cut_in_event(3))
        stream = self.ws(p.url, "reader").follow(after=head, actor=actor)
        got = [next(stream) for _ in range(5)]
        stream.close()
        self.assertEqual(p.cuts, 1)
        self.assertGreaterEqual(p.connections, 2, "reconnected")
        self.assertEqual([e.subject.name for e in got], names, "no gap, no duplicate, in order")
        self.assertEqual([e.seq - got[0].seq for e in got], [0, 1, 2, 3, 4])

    def test_follow_takes_a_silent_connection_for_dead(self) -> None:
        actor = support.unique("silent-writer")
        w = self.ws(self.url, actor)
        head = w.events_head()
        names = [support.unique("r/silent") for _ in range(3)]
        for n in names:
            w.create_artifact(n, "x")
        # The first connection goes silent after its headers: no events,
        # no heartbeats, no close.
        p = self.proxy(lambda n, chunk, sent: support.FREEZE if n == 0 else None)
        t0 = time.monotonic()
        stream = self.ws(p.url, "reader").follow(after=head, actor=actor, heartbeat=0.2)
        got = [next(stream).subject.name for _ in range(3)]
        stream.close()
        self.assertEqual(got, names)
        self.assertEqual(p.cuts, 1)
        self.assertGreaterEqual(time.monotonic() - t0, 0.6, "three heartbeats of silence first")

    def test_a_connection_the_server_closed_while_idle_is_replaced(self) -> None:
        srv = support.ServerProcess()
        srv.start()
        self.addCleanup(srv.kill)
        lead = self.ws(srv.url, "lead")
        worker = self.ws(srv.url, "worker", retry_for=10)
        label = {"suite": support.unique("idle")}
        lead.create_task("one", labels=label)
        worker.whoami()  # the worker now has a kept-alive connection
        srv.stop()
        srv.start()  # same port; the worker's connection was closed by the old server
        # A claim is never repeated after a drop: it succeeds only because
        # the dead connection is noticed before the claim is sent on it.
        self.assertEqual(worker.claim_task(labels=label).title, "one")

    def test_follow_survives_a_server_restart(self) -> None:
        srv = support.ServerProcess("--heartbeat", "1s")
        srv.start()
        self.addCleanup(srv.kill)
        actor = support.unique("restart-writer")
        writer = self.ws(self.url, actor)  # writes through the other server, on the same store
        head = writer.events_head()
        got: list[str] = []
        errors: list[BaseException] = []
        done = threading.Event()

        def follow() -> None:
            try:
                with Workspace(srv.url, actor="reader") as r:
                    for ev in r.follow(after=head, actor=actor, heartbeat=1, reconnect_for=30):
                        got.append(ev.subject.name)
                        if len(got) == 9:
                            break
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            finally:
                done.set()

        threading.Thread(target=follow, daemon=True).start()
        names = [support.unique("r/restart") for _ in range(9)]
        for n in names[:3]:
            writer.create_artifact(n, "x")
        self.wait_for(lambda: len(got) == 3)
        srv.kill()
        for n in names[3:6]:
            writer.create_artifact(n, "x")
        srv.start()
        for n in names[6:]:
            writer.create_artifact(n, "x")
        self.assertTrue(done.wait(30), f"the follower got {len(got)} of 9")
        self.assertEqual(errors, [])
        self.assertEqual(got, names)

    def test_acknowledged_writes_survive_a_server_killed_and_restarted(self) -> None:
        srv = support.ServerProcess()
        srv.start()
        self.addCleanup(srv.kill)
        actor = support.unique("kill-writer")
        acked: list[tuple[str, int]] = []
        errors: list[BaseException] = []
        n = 30

        def write() -> None:
            try:
                with Workspace(srv.url, actor=actor, retry_for=30) as w:
                    for i in range(n):
                        name = f"{actor}/a{i:02d}"
                        a = w.create_artifact(name, f"content {i}")
                        acked.append((name, a.version))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        t = threading.Thread(target=write, daemon=True)
        t.start()
        self.wait_for(lambda: len(acked) >= 10)
        srv.kill()
        time.sleep(0.3)
        srv.start()
        t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(len(acked), n)
        check = self.ws(self.url, "checker")
        for name, version in acked:
            self.assertEqual(check.get_artifact(name).version, version, name)
        created = check.read_events(actor=actor, types=["artifact.created"], limit=1000).events
        self.assertEqual(len(created), n, "every write applied exactly once")

    def wait_for(self, cond: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                self.fail("timed out waiting")
            time.sleep(0.01)


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers that are not the API's, by path."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path == "/v1/whoami":
            self.answer(200, "application/json", b'{"actor": "trunc')
        elif path == "/v1/status":
            self.answer(200, "text/html", b"<html>a login page</html>")
        elif path.startswith("/v1/tasks/"):
            self.answer(502, "text/html", b"<html>Bad Gateway</html>")
        elif path.startswith("/v1/notes/"):
            body = {"type": "urn:agentspace:problem:conflict", "title": "Conflict", "status": 409, "code": "conflict",
                    "detail": "note d/k: version conflict", "expected": 3, "current": 7, "subject": {"kind": "note", "id": "d/k", "name": "k"}}
            self.answer(409, "application/problem+json", json.dumps(body).encode())
        elif path == "/v1/locks":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b'{"locks": [')
        elif path == "/v1/events":
            mode = os.path.basename(self.headers.get("X-Agentspace-Actor", ""))
            if mode == "malformed":
                self.answer(200, "text/event-stream", b"id: 1\ndata: {not json\n\n")
            elif mode == "rewound":
                problem = {"code": "rewound", "status": 410, "detail": "the log's head is 7, below seq 9"}
                self.answer(200, "text/event-stream", b"event: error\ndata: " + json.dumps(problem).encode() + b"\n\n")
            elif mode == "compacted-later":
                problem = {"code": "compacted", "status": 410, "requested": 0, "floor": 5, "detail": "compacted"}
                self.answer(200, "text/event-stream", b"event: error\ndata: " + json.dumps(problem).encode() + b"\n\n")
            else:
                problem = {"code": "compacted", "status": 410, "requested": 0, "floor": 9, "detail": "below the floor"}
                self.answer(410, "application/problem+json", json.dumps(problem).encode())
        else:
            self.answer(404, "text/plain", b"nothing here")

    def answer(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class MalformedAnswersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
        cls.srv.daemon_threads = True
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.url = f"http://127.0.0.1:{cls.srv.server_address[1]}"

    @classmethod
    def tearDownClass(cls) -> None:
        cls.srv.shutdown()
        cls.srv.server_close()

    def ws(self, actor: str = "x") -> Workspace:
        w = Workspace(self.url, actor=actor, retry_for=0.3)
        self.addCleanup(w.close)
        return w

    def test_a_malformed_body_is_a_protocol_error(self) -> None:
        with self.assertRaises(ProtocolError) as cm:
            self.ws().whoami()
        self.assertIn("malformed JSON", str(cm.exception))
        with self.assertRaises(ProtocolError) as cm2:
            self.ws().status()
        self.assertIn("text/html", str(cm2.exception))

    def test_an_error_that_is_not_a_problem_keeps_its_status(self) -> None:
        with self.assertRaises(ServerError) as cm:
            self.ws().get_task("t1")
        self.assertEqual(cm.exception.status, 502)
        self.assertIn("Bad Gateway", str(cm.exception))
        with self.assertRaises(ProtocolError) as cm2:
            self.ws().get_lock("r")  # 404 text/plain: not the API's 404
        self.assertEqual(cm2.exception.status, 404)

    def test_a_problem_becomes_its_typed_error(self) -> None:
        with self.assertRaises(ConflictError) as cm:
            self.ws().get_note("d", "k")
        e = cm.exception
        self.assertEqual((e.expected, e.current, e.subject.name, e.status), (3, 7, "k", 409))

    def test_a_truncated_answer_is_retried_then_reported(self) -> None:
        with self.assertRaises(ServerUnreachableError) as cm:
            self.ws().list_locks()
        self.assertIn("IncompleteRead", str(cm.exception))

    def test_follow_reports_what_it_cannot_resume_from(self) -> None:
        with self.assertRaises(CompactedError) as cm:
            next(self.ws("at-start").follow(after=1))
        self.assertEqual(cm.exception.floor, 9)
        with self.assertRaises(CompactedError) as cm2:
            next(self.ws("compacted-later").follow(after=1))
        self.assertEqual(cm2.exception.floor, 5)
        with self.assertRaises(ProtocolError):
            next(self.ws("malformed").follow(after=0))
        # A failover to a standby behind: the log went back past what
        # this follower saw.
        with self.assertRaises(RewoundError) as cm3:
            next(self.ws("rewound").follow(after=9))
        self.assertEqual(cm3.exception.code, "rewound")


if __name__ == "__main__":
    unittest.main()
