"""Messages, the inbox, pause and resume, and the agent loop's wait,
against a real `wsctl serve`."""

from __future__ import annotations

import os
import threading
import unittest
from datetime import datetime, timedelta, timezone

import support

from agentspace import (
    AgentPause,
    ForbiddenError,
    InboxEvent,
    InboxPage,
    InvalidError,
    Msg,
    MsgAck,
    NotFoundError,
    Op,
    PausedError,
    Task,
    Work,
    Workspace,
)


class MessagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.url = support.shared_url()

    def ws(self, actor: str) -> Workspace:
        w = Workspace(self.url, actor=actor, retry_for=5)
        self.addCleanup(w.close)
        return w

    def agent(self, prefix: str) -> tuple[str, Workspace]:
        """A fresh actor that has written once: a message may name it."""
        name = support.unique(prefix)
        w = self.ws(name)
        w.put_note("decision", support.unique("hello"), body=name)
        return name, w

    def test_send_read_ack_and_reply_round_trip(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        deadline = datetime.now(timezone.utc) + timedelta(hours=1)
        m = lead.send_message(bob_name, "rebase on main, then tell me", subject="rebase", type="question", severity="warning",
                              data={"branch": "feat/x"}, requires_ack=True, deadline=deadline)
        self.assertIsInstance(m, Msg)
        self.assertEqual((m.from_, m.to, m.type, m.severity, m.data), (lead_name, [bob_name], "question", "warning", {"branch": "feat/x"}))
        self.assertEqual((m.thread, m.pending, m.requires_ack), (m.id, [bob_name], True))
        self.assertIsNotNone(m.deadline)
        self.assertTrue(m.owed_by(bob_name))

        page = bob.inbox(unread=True)
        self.assertIsInstance(page, InboxPage)
        self.assertEqual(([x.id for x in page.messages], page.unread, page.unacked, page.paused), ([m.id], 1, 1, False))
        self.assertEqual(bob.get_message(m.id).subject, "rebase")
        bob.mark_read(m.id)
        after = bob.inbox(unread=True)
        self.assertEqual((after.messages, after.unread, after.cursor), ([], 0, m.id))
        self.assertEqual([x.id for x in bob.inbox(unacked=True).messages], [m.id])

        acked = bob.ack_message(m.id, "rebased")
        self.assertEqual(acked.pending, [])
        self.assertEqual(len(acked.acks), 1)
        ack = acked.acks[0]
        self.assertIsInstance(ack, MsgAck)
        self.assertEqual((ack.by, ack.for_, ack.reply), (bob_name, bob_name, "rebased"))
        again = bob.ack_message(m.id, "twice")
        self.assertEqual([(a.by, a.reply) for a in again.acks], [(bob_name, "rebased")], "an ack is recorded once")
        self.assertEqual(bob.inbox(unacked=True).messages, [])

        reply = bob.send_message(lead_name, "done", reply_to=m.id)
        self.assertEqual(reply.thread, m.id, "a reply joins its parent's thread")
        self.assertEqual([x.id for x in lead.inbox(thread=m.id).messages], [reply.id])
        self.assertEqual(Msg.from_dict(m.to_dict()), m)

    def test_bad_messages_are_refused_and_nothing_is_sent(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        head = lead.events_head()
        for call, field in [
            (lambda: lead.send_message(support.unique("nobody"), "hi"), "to"),
            (lambda: lead.send_message(bob_name, ""), "body"),
            (lambda: lead.send_message(bob_name, "late", requires_ack=True, deadline=datetime.now(timezone.utc) - timedelta(hours=1)), "deadline"),
        ]:
            with self.assertRaises(InvalidError) as cm:
                call()
            self.assertIn(field, cm.exception.field)
        m = lead.send_message(bob_name, "fyi")
        with self.assertRaises(InvalidError):
            bob.ack_message(m.id)  # needs no ack
        with self.assertRaises(NotFoundError):
            self.ws(support.unique("eve")).get_message(m.id)
        with self.assertRaises(ForbiddenError):
            bob.inbox(actor=lead_name)
        self.assertEqual([e.type for e in lead.read_events(after=head, types=["message.sent"]).events], ["message.sent"])

    def test_a_message_rides_in_the_batch_of_the_write_it_is_about(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        name = support.unique("m/plan") + ".md"
        res = lead.commit([Op.create_artifact(name, "plan"), Op.send_message(bob_name, "read " + name, subject="plan ready")])
        m = res.results[1].message
        assert m is not None
        self.assertEqual((m.from_, m.subject), (lead_name, "plan ready"))
        self.assertEqual([e.type for e in res.events], ["artifact.created", "message.sent"])
        with self.assertRaises(InvalidError) as cm:
            lead.commit([Op.create_artifact(name + ".2", "x"), Op.send_message(support.unique("nobody"), "x")])
        self.assertEqual(cm.exception.batch_index, 1)
        with self.assertRaises(NotFoundError):
            lead.get_artifact(name + ".2")
        need = lead.send_message(bob_name, "ack in a batch", requires_ack=True)
        done = bob.commit([Op.ack_message(need.id, "ok")]).results[0].message
        assert done is not None
        self.assertEqual(done.acks[0].reply, "ok")

    def test_the_long_poll_returns_when_a_message_arrives(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        empty = bob.inbox(unread=True, wait=0.2)
        self.assertEqual((empty.messages, empty.unread), ([], 0))
        threading.Timer(0.3, lambda: lead.send_message(bob_name, "wake up")).start()
        page = bob.inbox(unread=True, wait=30)
        self.assertEqual([m.body for m in page.messages], ["wake up"])
        self.assertEqual(page.messages[0].from_, lead_name)

    def test_the_inbox_stream_yields_sends_and_acks_and_resumes(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        head = bob.events_head()
        stream = bob.follow_inbox(after=head, heartbeat=0.2)
        self.addCleanup(stream.close)
        threading.Timer(0.2, lambda: lead.send_message(bob_name, "first", requires_ack=True)).start()
        rec = next(stream)
        self.assertIsInstance(rec, InboxEvent)
        self.assertEqual((rec.type, rec.message.body, rec.message.from_), ("message.sent", "first", lead_name))
        bob.ack_message(rec.message.id, "seen")
        lead.send_message(lead_name, "to myself: not bob's")
        lead.send_message(bob_name, "second")
        acked = next(stream)
        self.assertEqual((acked.type, acked.message.id, acked.message.acks[0].reply), ("message.acked", rec.message.id, "seen"))
        second = next(stream)
        self.assertEqual((second.type, second.message.body), ("message.sent", "second"), "another's message is not in bob's stream")
        stream.close()
        # Another process resumes after the first record: the rest, once each.
        resumed = bob.follow_inbox(after=rec.seq, heartbeat=0.2)
        self.addCleanup(resumed.close)
        self.assertEqual([next(resumed).seq, next(resumed).seq], [acked.seq, second.seq])
        with self.assertRaises(ForbiddenError):
            next(self.ws(bob_name).follow_inbox(actor=lead_name))

    def test_pause_refuses_writes_but_not_acks_until_resume(self) -> None:
        lead_name, lead = self.agent("lead")
        w_name, worker = self.agent("worker")
        res = support.unique("file:paused")
        held = worker.acquire_lock(res, ttl=30)
        p = lead.pause_agent(w_name, message="checkpoint: stop writing", ack_timeout=timedelta(minutes=5))
        self.assertIsInstance(p, AgentPause)
        assert p.message is not None
        self.assertEqual((p.actor, p.message.type, p.message.to, p.message.requires_ack), (w_name, "pause", [w_name], True))
        self.assertEqual(lead.pause_agent(w_name).message.id, p.message.id, "pausing a paused agent answers the first pause")  # type: ignore[union-attr]
        with self.assertRaises(PausedError) as cm:
            worker.put_note("decision", support.unique("blocked"), body="x")
        e = cm.exception
        self.assertEqual((e.code, e.status, e.actor, e.by), ("paused", 423, w_name, lead_name))
        self.assertIsInstance(e.since, datetime)
        page = worker.inbox(unacked=True)
        self.assertTrue(page.paused)
        self.assertEqual([m.id for m in page.messages], [p.message.id])
        worker.ack_message(p.message.id, "paused, holding my lease")
        self.assertEqual(worker.renew_lock(res, held.token, ttl=30).token, held.token, "renewals pass while paused")
        r = lead.resume_agent(w_name, message="carry on")
        self.assertEqual(r.actor, w_name)
        worker.put_note("decision", support.unique("free"), body="x")
        self.assertFalse(worker.inbox().paused)
        with self.assertRaises(NotFoundError):
            lead.resume_agent(w_name)

    def test_wait_for_work_returns_on_a_message(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        labels = {"suite": support.unique("nothing")}
        threading.Timer(0.3, lambda: lead.send_message(bob_name, "review my branch")).start()
        work = bob.wait_for_work(timeout=60, labels=labels)
        self.assertIsInstance(work, Work)
        self.assertTrue(work)
        self.assertEqual(([m.body for m in work.inbox.messages], work.ready), (["review my branch"], []))

    def test_wait_for_work_returns_on_a_task_made_ready(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        labels = {"suite": support.unique("ready")}
        first = lead.create_task("first", labels=labels)
        second = lead.create_task("second", labels=labels, depends_on=[first.id], priority=5)
        claimed = lead.claim_task(labels=labels)
        self.assertEqual(claimed.id, first.id)
        # Nothing is ready: second waits on first, which lead holds.
        threading.Timer(0.3, lambda: lead.complete_task(first.id, "done")).start()
        work = bob.wait_for_work(timeout=60, labels=labels)
        self.assertEqual(([t.id for t in work.ready], work.inbox.messages), ([second.id], []))
        self.assertIsInstance(work.ready[0], Task)
        self.assertEqual(bob.claim_task(labels=labels).id, second.id)

    def test_wait_for_work_with_work_waiting_returns_at_once_and_a_timeout_with_nothing(self) -> None:
        lead_name, lead = self.agent("lead")
        bob_name, bob = self.agent("bob")
        labels = {"suite": support.unique("timeout")}
        nothing = bob.wait_for_work(timeout=0.3, labels=labels)
        self.assertFalse(nothing)
        self.assertEqual((nothing.inbox.unread, nothing.ready), (0, []))
        t = lead.create_task("waiting", labels=labels)
        self.assertEqual([x.id for x in bob.wait_for_work(labels=labels).ready], [t.id])
        lead.send_message(bob_name, "also this")
        self.assertEqual(len(bob.wait_for_work(labels=labels).inbox.messages), 1)


class ActorAndTokenTest(unittest.TestCase):
    """A token acts as its own actor only: a client given both a token and
    another actor says so before it sends anything, naming both."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.url = support.shared_url()

    def test_an_actor_that_is_not_the_tokens_is_a_clear_error(self) -> None:
        actor = support.unique("py-tokactor")
        tok = support.wsctl("token", "create", "--actor", actor, "--ttl", "1h").strip()
        with Workspace(self.url, token=tok, actor="someone-else") as ws:
            with self.assertRaises(InvalidError) as cm:
                ws.put_note("decision", support.unique("x"), body="x")
            self.assertEqual(cm.exception.field, "actor")
            self.assertIn(f"the token acts as {actor!r}", str(cm.exception))
            self.assertIn("'someone-else'", str(cm.exception))
        old = dict(os.environ)
        try:
            os.environ["AGENTSPACE_ACTOR"] = "someone-else"
            with Workspace(self.url, token=tok) as ws:
                with self.assertRaises(InvalidError) as cm:
                    ws.whoami()
                self.assertIn("AGENTSPACE_ACTOR names 'someone-else'", str(cm.exception))
            # The same name as the token's is no contradiction.
            os.environ["AGENTSPACE_ACTOR"] = actor
            with Workspace(self.url, token=tok) as ws:
                self.assertEqual(ws.put_note("decision", support.unique("ok"), body="x").author, actor)
        finally:
            os.environ.clear()
            os.environ.update(old)


if __name__ == "__main__":
    unittest.main()
