"""A message's hand-over: from the sender's send_message call to the
moment the recipient's wait returns with it, through the inbox stream
(SSE, follow_inbox), the inbox's long poll (inbox(wait=)), wait_for_work,
and reading the inbox every second as agents without a wake-up do.
Sender and recipient are two clients in this process (one clock); p50
and p99 in ms, as JSON.

    python3 bench/bench_messages.py --url http://127.0.0.1:7465 [--n 200] [--polled 30]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agentspace import Workspace  # noqa: E402


def fig(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    at = lambda p: s[min(len(s) - 1, int(p / 100 * len(s)))]  # noqa: E731
    return {"p50_ms": round(at(50) * 1000, 2), "p99_ms": round(at(99) * 1000, 2), "n": len(s)}


def waited(bob: Workspace, wait, lead: Workspace, to: str, body: str) -> float:
    """Start wait() in a thread, send once it is in place, and return the
    time from the send call to wait's return."""
    out: dict[str, object] = {}

    def run() -> None:
        out["page"] = wait()
        out["at"] = time.perf_counter()

    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.005)  # the wait reaches the server
    t0 = time.perf_counter()
    lead.send_message(to, body)
    th.join()
    page = out["page"]
    msgs = page.messages if hasattr(page, "messages") else page.inbox.messages  # type: ignore[attr-defined]
    bob.mark_read(msgs[-1].id)
    return float(out["at"]) - t0  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--polled", type=int, default=30)
    a = ap.parse_args()
    tag = uuid.uuid4().hex[:8]
    lead, bob = Workspace(a.url, actor=f"bench-lead-{tag}"), Workspace(a.url, actor=f"bench-bob-{tag}")
    to = f"bench-bob-{tag}"
    bob.put_note("bench", "bob-" + tag, body="ready")
    labels = {"bench": tag}  # no task has them: only messages wake wait_for_work

    sse = []
    stream = bob.follow_inbox(after=bob.events_head())
    for i in range(a.n):
        t0 = time.perf_counter()
        m = lead.send_message(to, f"sse {i}")
        while next(stream).message.id != m.id:
            pass
        sse.append(time.perf_counter() - t0)
        bob.mark_read(m.id)
    stream.close()

    long_poll = [waited(bob, lambda: bob.inbox(unread=True, wait=30), lead, to, f"poll {i}") for i in range(a.n)]
    work = [waited(bob, lambda: bob.wait_for_work(timeout=30, labels=labels), lead, to, f"work {i}") for i in range(a.n // 4)]

    every = []
    for i in range(a.polled):
        stop = threading.Event()
        seen: dict[str, object] = {}

        def poll() -> None:
            while True:
                p = bob.inbox(unread=True)
                if p.messages or stop.is_set():
                    seen["at"], seen["page"] = time.perf_counter(), p
                    return
                time.sleep(1.0)

        th = threading.Thread(target=poll)
        th.start()
        time.sleep(random.random())
        t0 = time.perf_counter()
        lead.send_message(to, f"polled {i}")
        th.join()
        stop.set()
        every.append(float(seen["at"]) - t0)  # type: ignore[arg-type]
        bob.mark_read(seen["page"].messages[-1].id)  # type: ignore[attr-defined]

    print(json.dumps({"sse": fig(sse), "long_poll": fig(long_poll), "wait_for_work": fig(work), "poll_every_1s": fig(every)}))


if __name__ == "__main__":
    main()
