"""The client against a real `wsctl serve`: every operation, the typed
errors, the OpenAPI document, leases and claims held by context managers."""

from __future__ import annotations

import json
import os
import threading
import time
import unittest
import urllib.request
from datetime import datetime, timedelta

import support

import agentspace
from agentspace import (
    AgentspaceError,
    AlreadyExistsError,
    Artifact,
    AuthError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    LockedError,
    LockLostError,
    NoTaskError,
    NotFoundError,
    NotHolderError,
    Op,
    StaleFenceError,
    Task,
    TaskResult,
    TooLargeError,
    Workspace,
)
from agentspace._client import OPERATIONS


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.url = support.shared_url()

    def ws(self, actor: str) -> Workspace:
        w = Workspace(self.url, actor=actor, retry_for=5)
        self.addCleanup(w.close)
        return w

    def test_artifacts_round_trip_text_and_binary_content(self) -> None:
        ws = self.ws("alice")
        name = support.unique("c/art") + "/plan.md"
        a = ws.create_artifact(name, "# Plan\n", kind="plan", content_type="text/markdown", labels={"team": "api"})
        self.assertIsInstance(a, Artifact)
        self.assertEqual((a.version, a.kind, a.owner, a.labels, a.size), (1, "plan", "alice", {"team": "api"}, 7))
        self.assertIsInstance(a.created_at, datetime)
        blob = bytes(range(256))
        b = ws.update_artifact(name, blob, if_version=1)
        self.assertEqual(b.version, 2)
        got = ws.get_artifact(name)
        self.assertEqual(got.content, blob)
        self.assertEqual(ws.get_artifact(name, version=1).text, "# Plan\n")
        self.assertEqual(ws.get_artifact(a.id, by="id").name, name)
        self.assertEqual([v.version for v in ws.artifact_versions(name)], [1, 2])
        page = ws.list_artifacts(name_prefix=name.rsplit("/", 1)[0], labels={"team": "api"})
        self.assertEqual([x.name for x in page.artifacts], [name])
        self.assertIsNone(page.artifacts[0].content, "lists carry metadata only")
        self.assertEqual([x.name for x in ws.iter_artifacts(name_prefix=name)], [name])
        r = ws.rollback_artifact(name, 1)
        self.assertEqual((r.version, ws.get_artifact(name).text), (3, "# Plan\n"))
        ws.delete_artifact(name, if_version=3)
        with self.assertRaises(NotFoundError):
            ws.get_artifact(name)

    def test_names_with_slashes_dots_and_spaces_reach_the_right_record(self) -> None:
        ws = self.ws("alice")
        base = support.unique("c/odd")
        for name in (base + "/a b/c?d#e.md", base + "/%2F", base + "/ünï.md", base + "/x."):
            ws.create_artifact(name, name)
            self.assertEqual(ws.get_artifact(name).text, name)
        with self.assertRaises(InvalidError) as cm:
            ws.get_artifact("")
        self.assertEqual(cm.exception.field, "ref")

    def test_conflict_carries_the_current_version(self) -> None:
        alice, bob = self.ws("alice"), self.ws("bob")
        name = support.unique("c/conflict")
        alice.create_artifact(name, "1")
        bob.update_artifact(name, "2", if_version=1)
        with self.assertRaises(ConflictError) as cm:
            alice.update_artifact(name, "2'", if_version=1)
        e = cm.exception
        self.assertEqual((e.code, e.status, e.expected, e.current), ("conflict", 409, 1, 2))
        self.assertEqual((e.subject.kind, e.subject.name), ("artifact", name))
        self.assertIsInstance(e, AgentspaceError)
        with self.assertRaises(AlreadyExistsError):
            bob.create_artifact(name, "again")

    def test_tasks_claims_and_results(self) -> None:
        lead, w1 = self.ws("lead"), self.ws("worker-1")
        label = {"suite": support.unique("tasks")}
        first = lead.create_task("first", labels=label, priority=1, description="d")
        second = lead.create_task("second", labels=label, priority=9, depends_on=[first.id])
        self.assertIsInstance(first, Task)
        self.assertEqual(second.depends_on, [first.id])
        got = w1.claim_task(lease=timedelta(minutes=1), labels=label)
        self.assertEqual((got.id, got.status, got.assignee), (first.id, "in_progress", "worker-1"))
        self.assertIsInstance(got.lease_expires_at, datetime)
        with self.assertRaises(NoTaskError):
            w1.claim_task(labels=label)
        t0 = time.monotonic()
        with self.assertRaises(NoTaskError):
            w1.claim_task(labels=label, wait=0.3)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3, "the claim waited")
        self.assertEqual(w1.heartbeat_task(first.id, lease=120).status, "in_progress")
        done = w1.complete_task(first.id, "did it", ["out.md"])
        self.assertEqual(done.result, TaskResult("did it", ["out.md"]))

        # A waiting claim is woken by the task becoming ready.
        third = lead.create_task("third", labels=label, depends_on=[second.id])
        got2 = w1.claim_task(labels=label, wait=5)
        self.assertEqual(got2.id, second.id)
        w1.fail_task(second.id, "broke")
        updated = lead.update_task(third.id, title="third, renamed", priority=3, if_version=third.version)
        self.assertEqual((updated.title, updated.priority), ("third, renamed", 3))
        # Only a claim's holder finishes a task: a pending one must be claimed first.
        with self.assertRaises(NotHolderError):
            lead.update_task(third.id, status="done")
        page = lead.list_tasks(labels=label, status="failed")
        self.assertEqual([t.id for t in page.tasks], [second.id])

    def test_notes(self) -> None:
        ws = self.ws("alice")
        key = support.unique("note")
        n = ws.put_note("decision", key, title="T", body="B")
        self.assertEqual((n.version, n.author), (1, "alice"))
        with self.assertRaises(ConflictError):
            ws.put_note("decision", key, body="C", if_version=5)
        self.assertEqual(ws.get_note("decision", key).body, "B")
        self.assertIn(key, [x.key for x in ws.list_notes(kind="decision", limit=1000).notes])
        ws.delete_note("decision", key)
        with self.assertRaises(NotFoundError):
            ws.get_note("decision", key)
        with self.assertRaises(ForbiddenError) as cm:
            ws.get_note("token", "x")
        self.assertEqual(cm.exception.status, 403)

    def test_locks_carry_holder_expiry_and_fence(self) -> None:
        alice, bob = self.ws("alice"), self.ws("bob")
        name = support.unique("c/locked")
        alice.create_artifact(name, "1")
        res = agentspace.artifact_resource(name)
        lease = alice.acquire_lock(res, ttl=30)
        with self.assertRaises(LockedError) as cm:
            bob.update_artifact(name, "bob")
        e = cm.exception
        self.assertEqual((e.holder, e.resource, e.token, e.status), ("alice", res, lease.token, 423))
        self.assertIsInstance(e.expires_at, datetime)
        with self.assertRaises(LockedError):
            bob.acquire_lock(res, ttl=5, wait=0.2)
        self.assertEqual(bob.get_lock(res).owner, "alice")
        self.assertIn(res, [x.resource for x in bob.list_locks()])
        self.assertEqual(alice.renew_lock(res, lease.token, ttl=60).token, lease.token)
        with self.assertRaises(NotHolderError):
            bob.release_lock(res, lease.token)
        bob.force_release_lock(res, message="alice is gone")
        taken = bob.acquire_lock(res, ttl=30)
        self.assertGreater(taken.token, lease.token)
        bob.release_lock(res, taken.token)
        with self.assertRaises(StaleFenceError) as sf:
            alice.update_artifact(name, "late", fence=lease.token)
        self.assertEqual((sf.exception.fence, sf.exception.newest), (lease.token, taken.token))
        with self.assertRaises(LockLostError):
            alice.renew_lock(res, lease.token)

    def test_a_waiting_acquire_gets_the_lease_when_it_is_released(self) -> None:
        alice, bob = self.ws("alice"), self.ws("bob")
        res = support.unique("file:wait")
        held = alice.acquire_lock(res, ttl=30)
        threading.Timer(0.3, lambda: self.ws("alice").release_lock(res, held.token)).start()
        got = bob.acquire_lock(res, ttl=30, wait=10)
        self.assertEqual(got.owner, "bob")
        self.assertGreater(got.token, held.token)
        bob.release_lock(res, got.token)

    def test_batches_are_all_or_nothing(self) -> None:
        ws = self.ws("alice")
        p = support.unique("c/batch")
        with self.assertRaises(NotFoundError) as cm:
            ws.commit([Op.create_artifact(p + "/a", "a"), Op.put_note("decision", p.replace("/", "-"), body="x"),
                       Op.update_artifact(p + "/missing", "x")])
        self.assertEqual(cm.exception.batch_index, 2)
        self.assertIn("batch op 2", str(cm.exception))
        with self.assertRaises(NotFoundError):
            ws.get_artifact(p + "/a")
        t = ws.create_task("batch task")
        res = ws.commit([
            Op.create_artifact(p + "/a", b"\x00binary", kind="output"),
            Op.update_task(t.id, status="blocked", if_version=t.version),
            Op.create_task("follow-up", depends_on=[t.id]),
        ], idempotency_key=support.unique("batch"))
        self.assertFalse(res.replayed)
        assert res.results[0].artifact is not None and res.results[1].task is not None and res.results[2].task is not None
        self.assertEqual(res.results[0].artifact.version, 1)
        self.assertEqual(res.results[1].task.status, "blocked")
        self.assertEqual(res.results[2].task.depends_on, [t.id])
        self.assertEqual([e.seq - res.events[0].seq for e in res.events], [0, 1, 2], "consecutive seqs")
        self.assertEqual(ws.get_artifact(p + "/a").content, b"\x00binary")
        lease = ws.acquire_lock(p + "-lock", ttl=30)
        ws.commit([Op.delete_artifact(p + "/a", if_version=1), Op.release_lock(lease.resource, lease.token)])
        with self.assertRaises(NotFoundError):
            ws.get_lock(lease.resource)

    def test_an_explicit_idempotency_key_returns_the_first_result(self) -> None:
        ws = self.ws("alice")
        name, key = support.unique("c/idem"), support.unique("key")
        a = ws.create_artifact(name, "x", idempotency_key=key)
        head = ws.events_head()
        again = ws.create_artifact(name, "x", idempotency_key=key)
        self.assertEqual((again.id, again.version), (a.id, 1))
        self.assertEqual(ws.events_head(), head, "nothing new written")
        with self.assertRaises(InvalidError):
            ws.create_artifact(name, "different", idempotency_key=key)

    def test_events_read_and_follow(self) -> None:
        ws = self.ws("reader")
        head = ws.events_head()
        name = support.unique("c/ev")
        ws.create_artifact(name, "1")
        ws.update_artifact(name, "2")
        page = ws.read_events(after=head, subject_name=name)
        self.assertEqual([e.type for e in page.events], ["artifact.created", "artifact.updated"])
        self.assertEqual(page.events[0].actor, "reader")
        self.assertIsInstance(page.events[0].time, datetime)
        since = page.events[0].time
        assert since is not None
        self.assertEqual(len(ws.read_events(after=head, since=since, until=since + timedelta(hours=1), subject_name=name).events), 2)
        stream = ws.follow(after=head, types=["artifact.updated"], subject_name=name)
        ev = next(stream)
        stream.close()
        self.assertEqual((ev.type, ev.version, ev.subject.name), ("artifact.updated", 2, name))
        st = ws.status()
        self.assertGreaterEqual(st.head, page.events[-1].seq)
        self.assertGreaterEqual(st.artifacts, 1)

    def test_verify_and_a_dry_run_of_gc(self) -> None:
        # The server is shared with the other tests: gc only reports here.
        ws = self.ws("janitor")
        for i in range(3):
            ws.put_note("decision", support.unique("gc") + str(i))
        report = ws.verify()
        self.assertEqual(report.get("broken_seq", 0), 0, report)
        self.assertGreaterEqual(report["events"], 3)
        self.assertEqual(len(report["head_hash"]), 64)
        before = ws.status()
        dry = ws.gc(keep_events=1, dry_run=True)
        self.assertTrue(dry["dry_run"])
        self.assertGreaterEqual(dry["events"]["count"], 2)
        self.assertGreaterEqual(dry["floor_after"], before.head)
        self.assertEqual(ws.status().floor, before.floor, "a dry run removes nothing")
        with self.assertRaises(InvalidError):
            ws.gc(keep_events=-1)

    def test_follow_waits_for_live_events(self) -> None:
        ws = self.ws("reader")
        head = ws.events_head()
        name = support.unique("c/live")
        threading.Timer(0.3, lambda: self.ws("writer").create_artifact(name, "x")).start()
        stream = ws.follow(after=head, subject_name=name)
        ev = next(stream)
        stream.close()
        self.assertEqual((ev.type, ev.actor, ev.seq > head), ("artifact.created", "writer", True))

    def test_lock_context_manager_renews_and_releases(self) -> None:
        alice, bob = self.ws("alice"), self.ws("bob")
        res = support.unique("file:cm")
        with alice.lock(res, ttl=0.6) as lease:
            time.sleep(1.5)  # past two TTLs: only renewals keep it
            with self.assertRaises(LockedError):
                bob.acquire_lock(res, ttl=5)
            self.assertFalse(lease.lost)
            lease.check()
            self.assertEqual(alice.get_lock(res).token, lease.token)
        with self.assertRaises(NotFoundError):
            bob.get_lock(res)

    def test_lock_context_manager_reports_a_lost_lease_and_its_writes_are_fenced(self) -> None:
        alice, bob = self.ws("alice"), self.ws("bob")
        name = support.unique("c/fenced")
        alice.create_artifact(name, "1")
        with alice.lock(agentspace.artifact_resource(name), ttl=0.3) as lease:
            bob.force_release_lock(lease.resource)
            taken = bob.acquire_lock(lease.resource, ttl=30)
            deadline = time.monotonic() + 5
            while not lease.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(lease.lost, "the renewal saw the lease taken")
            with self.assertRaises((LockLostError, NotHolderError)):
                lease.check()
            with self.assertRaises(StaleFenceError):
                alice.update_artifact(name, "mine", fence=lease.token)
            bob.release_lock(taken.resource, taken.token)
            with self.assertRaises(StaleFenceError):
                alice.update_artifact(name, "mine", fence=lease.token)
        self.assertEqual(alice.get_artifact(name).version, 1)

    def test_claim_context_manager_heartbeats_and_completes(self) -> None:
        lead, worker = self.ws("lead"), self.ws("worker")
        label = {"suite": support.unique("claimcm")}
        t = lead.create_task("long work", labels=label)
        # A 2 s lease heartbeaten every 2/3 s: a heartbeat delayed by a
        # loaded machine (CI runs many suites at once) still lands in time.
        with worker.claim(lease=2, labels=label) as claim:
            self.assertEqual(claim.id, t.id)
            time.sleep(4.5)  # past two leases: only heartbeats keep it
            self.assertFalse(claim.lost)
            self.assertEqual(lead.get_task(t.id).attempts, 1, "never lapsed")
            done = claim.complete("finished", ["x.md"])
        self.assertEqual(done.status, "done")
        self.assertEqual(lead.get_task(t.id).status, "done")

    def test_claim_context_manager_releases_the_task_on_an_exception(self) -> None:
        lead, worker = self.ws("lead"), self.ws("worker")
        label = {"suite": support.unique("claimfail")}
        t = lead.create_task("fragile", labels=label)
        with self.assertRaises(RuntimeError):
            with worker.claim(lease=30, labels=label):
                raise RuntimeError("the agent crashed")
        self.assertEqual(lead.get_task(t.id).status, "pending")
        with self.assertRaises(NoTaskError):
            with worker.claim(labels={"suite": support.unique("none")}):
                self.fail("no task was ready")

    def test_tokens_bind_the_actor(self) -> None:
        tok = support.wsctl("token", "create", "--actor", "py-token", "--ttl", "1h").strip()
        ws = Workspace(self.url, token=tok)
        self.addCleanup(ws.close)
        self.assertEqual(ws.whoami().actor, "py-token")
        n = ws.put_note("decision", support.unique("tok"), body="x")
        self.assertEqual(n.author, "py-token")
        with self.assertRaises(AuthError) as cm, Workspace(self.url, token="ast_aaaaaaaaaaaaaaaa_" + "b" * 52) as bad:
            bad.whoami()
        self.assertEqual(cm.exception.status, 401)
        self.assertNotIn("bbbbbbbb", str(cm.exception))

    def test_environment_gives_url_and_token(self) -> None:
        tok = support.wsctl("token", "create", "--actor", "py-env", "--ttl", "1h").strip()
        old = dict(os.environ)
        try:
            # AGENTSPACE_DSN, as wsctl reads it; AGENTSPACE_URL is its alias.
            os.environ.pop("AGENTSPACE_DSN", None)
            os.environ["AGENTSPACE_URL"] = self.url
            os.environ["AGENTSPACE_TOKEN"] = tok
            with Workspace() as ws:
                self.assertEqual(ws.whoami().actor, "py-env")
            os.environ["AGENTSPACE_URL"] = "http://127.0.0.1:1"
            os.environ["AGENTSPACE_DSN"] = self.url
            with Workspace() as ws:
                self.assertEqual(ws.whoami().actor, "py-env")
            # A wsctl DSN's ws_token is the token, as wsctl takes it.
            os.environ["AGENTSPACE_TOKEN"] = ""
            os.environ["AGENTSPACE_DSN"] = self.url + "?ws_token=" + tok
            with Workspace() as ws:
                self.assertEqual(ws.whoami().actor, "py-env")
            # A DSN no client can reach says which variable named it.
            os.environ["AGENTSPACE_DSN"] = "sqlite:ws.db"
            with self.assertRaises(InvalidError) as cm:
                Workspace()
            self.assertIn("AGENTSPACE_DSN: scheme 'sqlite' is not a server's", str(cm.exception))
        finally:
            os.environ.clear()
            os.environ.update(old)

    def test_a_server_on_a_unix_socket(self) -> None:
        import shutil
        import tempfile

        d = tempfile.mkdtemp(prefix="ws")  # a socket's path must fit in 108 bytes
        self.addCleanup(shutil.rmtree, d, True)
        srv = support.ServerProcess(listen="unix:" + os.path.join(d, "s.sock"))
        srv.start()
        self.addCleanup(srv.stop)
        self.assertTrue(srv.url.startswith("http+unix:///"), srv.url)
        ws = self.ws_at(srv.url, "unix-agent")
        name = support.unique("c/unix") + "/a b.md"
        head = ws.events_head()
        ws.create_artifact(name, "over a socket")
        self.assertEqual(ws.get_artifact(name).text, "over a socket")
        stream = ws.follow(after=head, subject_name=name)
        self.assertEqual(next(stream).actor, "unix-agent")
        stream.close()

    def ws_at(self, url: str, actor: str) -> Workspace:
        w = Workspace(url, actor=actor, retry_for=5)
        self.addCleanup(w.close)
        return w

    def test_bad_arguments_are_refused_before_sending(self) -> None:
        ws = self.ws("alice")
        for call, field in [
            (lambda: ws.acquire_lock("r", ttl=-1), "ttl"),
            (lambda: ws.claim_task(lease="soon"), "lease"),  # type: ignore[arg-type]
            (lambda: ws.get_task(""), "id"),
            (lambda: ws.get_artifact("x", by="title"), "by"),
            (lambda: next(ws.follow(after=-1)), "after"),
        ]:
            with self.assertRaises(InvalidError) as cm:
                call()
            self.assertEqual(cm.exception.field, field)
        for url in ("ftp://example.org", "http://:80", "http://h:1/?x=1", "http+unix://host/s.sock"):
            with self.assertRaises(InvalidError) as cm:
                Workspace(url)
            self.assertEqual(cm.exception.field, "url")


class OpenAPITest(unittest.TestCase):
    """The client against the server's own description of the API."""

    @classmethod
    def setUpClass(cls) -> None:
        with urllib.request.urlopen(support.shared_url() + "/v1/openapi.json", timeout=30) as r:
            cls.doc = json.load(r)

    def test_every_operation_has_a_method(self) -> None:
        ids = {op["operationId"] for path in self.doc["paths"].values() for op in path.values() if isinstance(op, dict) and "operationId" in op}
        ids.discard("metrics")  # Prometheus text, for scrapers
        self.assertEqual(ids, set(OPERATIONS), "OPERATIONS lists the document's operations")
        for name in OPERATIONS.values():
            self.assertTrue(callable(getattr(Workspace, name, None)), name)

    def test_every_request_field_is_a_parameter(self) -> None:
        import inspect

        schemas = self.doc["components"]["schemas"]
        # A message's sender is the request's actor: "from" may only repeat it.
        wire_only = {"actor", "content_encoding", "idempotency_key", "if_version", "fence", "message", "from"}
        renamed = {"type": "types", "label": "labels", "Last-Event-ID": "after"}
        ignored = {"releaseLock": {"ttl"}}  # release ignores the body's ttl (it shares renew's shape)
        for path, item in self.doc["paths"].items():
            for op in item.values():
                if not isinstance(op, dict) or op.get("operationId") not in OPERATIONS:
                    continue
                method = getattr(Workspace, OPERATIONS[op["operationId"]])
                params = set(inspect.signature(method).parameters)
                names = {renamed.get(p["name"], p["name"]) for p in op.get("parameters", [])}
                body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
                if "$ref" in body:
                    names |= set(schemas[body["$ref"].rsplit("/", 1)[1]].get("properties", {}))
                if op["operationId"] == "commitBatch":
                    names -= {"ops"}
                    params |= {"ops"}
                missing = names - params - wire_only - ignored.get(op["operationId"], set())
                # Write fields are parameters wherever the body has them.
                for w in ("if_version", "fence", "message", "idempotency_key"):
                    if w in names and op["operationId"] not in ("deleteArtifact", "deleteNote") and w not in params:
                        missing.add(w)
                self.assertEqual(missing, set(), f"{op['operationId']} ({path})")

    def test_records_have_the_documents_fields(self) -> None:
        import dataclasses

        schemas = self.doc["components"]["schemas"]
        pairs = {
            "ArtifactWire": agentspace.Artifact, "Task": agentspace.Task, "TaskResult": agentspace.TaskResult,
            "Note": agentspace.Note, "Lease": agentspace.Lease, "Event": agentspace.Event, "Subject": agentspace.Subject,
            "BatchResult": agentspace.BatchResult, "OpResult": agentspace.OpResult, "ArtifactPage": agentspace.ArtifactPage,
            "TaskPage": agentspace.TaskPage, "NotePage": agentspace.NotePage, "EventPage": agentspace.EventPage,
            "Status": agentspace.Status, "Whoami": agentspace.Whoami, "Msg": agentspace.Msg, "MsgAck": agentspace.MsgAck,
            "InboxPage": agentspace.InboxPage, "InboxEvent": agentspace.InboxEvent, "AgentPause": agentspace.AgentPause,
        }
        keywords = {"from_": "from", "for_": "for"}  # Python keywords, named with a trailing _
        for schema, cls in pairs.items():
            want = set(schemas[schema]["properties"]) - {"$schema", "content_encoding"}
            have = {keywords.get(f.name, f.name) for f in dataclasses.fields(cls)}
            self.assertEqual(have, want, schema)

    def test_every_problem_code_has_its_class(self) -> None:
        problem = self.doc["components"]["schemas"]["Problem"]["properties"]
        for field in ("expected", "current", "holder", "token", "expires_at", "fence", "newest", "field", "reason", "floor", "requested",
                      "actor", "by", "since"):
            self.assertIn(field, problem)
        for code, cls in [("conflict", ConflictError), ("locked", LockedError), ("stale_fence", StaleFenceError),
                          ("not_found", NotFoundError), ("no_task", NoTaskError), ("forbidden", ForbiddenError),
                          ("invalid", InvalidError), ("too_large", TooLargeError), ("unauthorized", AuthError),
                          ("not_holder", NotHolderError), ("lock_lost", LockLostError), ("already_exists", AlreadyExistsError),
                          ("paused", agentspace.PausedError), ("too_many", agentspace.TooManyError)]:
            e = agentspace.error_from_problem(409, {"code": code, "detail": "d"})
            self.assertIs(type(e), cls, code)
            self.assertEqual(e.code, code)


class TooLargeTest(unittest.TestCase):
    def test_content_over_the_limit_is_too_large_and_writes_nothing(self) -> None:
        store = support.store_dsn()
        sep = "&" if "?" in store else "?"
        srv = support.ServerProcess(store=store + sep + "ws_max_artifact_size=1024")
        srv.start()
        self.addCleanup(srv.stop)
        ws = Workspace(srv.url, actor="alice", retry_for=5)
        self.addCleanup(ws.close)
        name = support.unique("c/big")
        with self.assertRaises(TooLargeError) as cm:
            ws.create_artifact(name, "x" * 2048)
        self.assertEqual((cm.exception.code, cm.exception.status), ("too_large", 413))
        self.assertIsInstance(cm.exception, InvalidError)
        with self.assertRaises(NotFoundError):
            ws.get_artifact(name)


if __name__ == "__main__":
    unittest.main()
