"""Measure the client against bare HTTP calls doing the same requests, and
follow throughput while a writer commits as fast as it can.

    python3 bench_client.py --url http://127.0.0.1:7465 [--n 300] [--seconds 3]

Prints one JSON object. BenchmarkPythonClient (clients/python/python_test.go)
runs it against a fresh `wsctl serve` and reports the figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from agentspace import Workspace  # noqa: E402


def per_call(n: int, calls: dict[str, object]) -> dict[str, float]:
    """Run each call n times, interleaved so that load on the machine hits
    them alike; return each one's median in microseconds."""
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(n):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()  # type: ignore[operator]
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


def measure_calls(url: str, n: int) -> dict[str, float]:
    actor = "bench-" + uuid.uuid4().hex[:8]
    ws = Workspace(url, actor=actor)
    base = url.rstrip("/")
    headers = {"Accept": "application/json", "X-Agentspace-Actor": actor}
    names = {k: f"bench/{actor}/{k}" for k in ("client", "urllib", "httpclient")}
    for name in names.values():
        ws.create_artifact(name, "x" * 200)
    versions = {k: 1 for k in names}
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port)

    def path(k: str) -> str:
        return "/v1/artifacts/" + urllib.parse.quote(names[k], safe="")

    def read_urllib() -> None:
        req = urllib.request.Request(base + path("urllib"), headers=headers)
        with urllib.request.urlopen(req) as r:
            json.loads(r.read())

    def read_httpclient() -> None:
        conn.request("GET", path("httpclient"), headers=headers)
        json.loads(conn.getresponse().read())

    def body(k: str) -> bytes:
        return json.dumps({"content": "y" * 200, "if_version": versions[k], "idempotency_key": uuid.uuid4().hex}).encode()

    def write_client() -> None:
        versions["client"] = ws.update_artifact(names["client"], "y" * 200, if_version=versions["client"]).version

    def write_urllib() -> None:
        req = urllib.request.Request(base + path("urllib"), data=body("urllib"), method="PATCH",
                                     headers=dict(headers, **{"Content-Type": "application/json"}))
        with urllib.request.urlopen(req) as r:
            versions["urllib"] = json.loads(r.read())["version"]

    def write_httpclient() -> None:
        conn.request("PATCH", path("httpclient"), body=body("httpclient"), headers=dict(headers, **{"Content-Type": "application/json"}))
        versions["httpclient"] = json.loads(conn.getresponse().read())["version"]

    reads = per_call(n, {
        "read_client_us": lambda: ws.get_artifact(names["client"]),
        "read_urllib_us": read_urllib,
        "read_httpclient_us": read_httpclient,
    })
    writes = per_call(n, {
        "write_client_us": write_client,
        "write_urllib_us": write_urllib,
        "write_httpclient_us": write_httpclient,
    })
    conn.close()
    ws.close()
    return {**reads, **writes}


def writer(url: str, seconds: float, actor: str) -> None:
    """Write notes one after another for `seconds`; print how many."""
    ws = Workspace(url, actor=actor)
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        ws.put_note("bench", f"{actor}-{i}", body="x")
        i += 1
    ws.put_note("bench", f"{actor}-end", body=str(i))
    print(i)


def measure_follow(url: str, seconds: float) -> dict[str, float]:
    actor = "writer-" + uuid.uuid4().hex[:8]
    ws = Workspace(url, actor="follower")
    head = ws.events_head()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--url", url, "--writer", str(seconds), "--actor", actor],
                            stdout=subprocess.PIPE, text=True)
    stream = ws.follow(after=head, actor=actor)
    seen = 0
    first = last = 0.0
    for ev in stream:
        if ev.subject.name == f"{actor}-end":
            break
        now = time.perf_counter()
        if seen == 0:
            first = now
        seen += 1
        last = now
    stream.close()
    out, _ = proc.communicate()
    written = int(out.strip())
    if seen != written:
        raise SystemExit(f"the follower saw {seen} events of {written} written")
    elapsed = max(last - first, 1e-9)
    # The same events again, as a backlog: how fast the client reads a
    # stream that does not wait for a writer.
    t0 = time.perf_counter()
    backlog = ws.follow(after=head, actor=actor)
    n = 0
    for ev in backlog:
        if ev.subject.name == f"{actor}-end":
            break
        n += 1
    backlog.close()
    backlog_s = time.perf_counter() - t0
    ws.close()
    return {"follow_events_per_s": (seen - 1) / elapsed, "writer_commits_per_s": written / seconds, "follow_events": seen,
            "follow_backlog_events_per_s": n / backlog_s}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--writer", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--actor", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.writer is not None:
        writer(args.url, args.writer, args.actor)
        return 0
    out = measure_calls(args.url, args.n)
    out.update(measure_follow(args.url, args.seconds))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
