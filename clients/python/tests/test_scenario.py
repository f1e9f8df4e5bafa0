"""The shared scenario (clients/scenario/scenario.json), run through the
Python client against a real `wsctl serve`: the Go remote backend and the
TypeScript client run the same file, so the three cannot drift apart."""

from __future__ import annotations

import itertools
import json
import re
import time
import unittest
from pathlib import Path
from typing import Any

import support

from agentspace import AgentspaceError, Workspace, error_from_problem

SCENARIO = Path(__file__).resolve().parents[2] / "scenario" / "scenario.json"


def substitute(v: Any, saved: dict[str, Any]) -> Any:
    """Replace every string "$NAME" by the saved value NAME."""
    if isinstance(v, str) and v.startswith("$"):
        if v[1:] not in saved:
            raise KeyError(f"no saved value {v[1:]!r}")
        return saved[v[1:]]
    if isinstance(v, dict):
        return {k: substitute(x, saved) for k, x in v.items()}
    if isinstance(v, list):
        return [substitute(x, saved) for x in v]
    return v


def match(path: str, want: Any, got: Any) -> None:
    """Check got against want as the scenario's README defines it."""
    if isinstance(want, dict) and set(want) == {"$gt"}:
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not got > want["$gt"]:
            raise AssertionError(f"{path}: want a number above {want['$gt']!r}, got {got!r}")
        return
    if isinstance(want, dict):
        if not isinstance(got, dict):
            raise AssertionError(f"{path}: want an object, got {got!r}")
        for k in sorted(want):
            if k not in got:
                raise AssertionError(f"{path}.{k}: missing in {got!r}")
            match(f"{path}.{k}", want[k], got[k])
        return
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            raise AssertionError(f"{path}: want {len(want)} items, got {got!r}")
        for i, (w, g) in enumerate(zip(want, got)):
            match(f"{path}.{i}", w, g)
        return
    if isinstance(want, bool) != isinstance(got, bool) or want != got:
        raise AssertionError(f"{path}: want {want!r}, got {got!r}")


def mismatch(path: str, want: Any, got: Any) -> str:
    """Return why got does not match want, or "" when it does."""
    try:
        match(path, want, got)
    except AssertionError as e:
        return str(e)
    return ""


def lookup(v: Any, path: str) -> Any:
    for part in path.split("."):
        v = v[int(part)] if isinstance(v, list) else v[part]
    return v


def wire(v: Any) -> Any:
    """The wire shape of a result: records by their to_dict."""
    if v is None:
        return {}
    if hasattr(v, "to_dict"):
        return v.to_dict()
    if isinstance(v, list):
        return [wire(x) for x in v]
    return v


def run_step(ws: Workspace, op: str, args: dict[str, Any]) -> Any:
    """Make the step's call; return its result in the wire's shape."""
    if op == "sleep":
        time.sleep(args["seconds"])
        return {}
    if op == "artifact_versions":
        return {"versions": wire(ws.artifact_versions(**args))}
    if op == "list_locks":
        return {"locks": wire(ws.list_locks(**args))}
    if op == "events_head":
        return {"head": ws.events_head(**args)}
    if op == "follow":
        count = args.pop("count")
        stream = ws.follow(**args)
        try:
            return {"events": wire(list(itertools.islice(stream, count)))}
        finally:
            stream.close()
    return wire(getattr(ws, op)(**args))


def error_fields(e: AgentspaceError, names: dict[str, Any]) -> dict[str, Any]:
    """The typed error's attributes the step names, in the wire's shape."""
    return {k: wire(getattr(e, k)) for k in names if hasattr(e, k)}


class ScenarioTest(unittest.TestCase):
    """One test per scenario of the file, all on one server, in order."""

    clients: dict[str, Workspace] = {}

    @classmethod
    def setUpClass(cls) -> None:
        cls.url = support.shared_url()
        cls.clients = {}

    @classmethod
    def tearDownClass(cls) -> None:
        for c in cls.clients.values():
            c.close()

    def client(self, actor: str) -> Workspace:
        if actor not in self.clients:
            self.clients[actor] = Workspace(self.url, actor=actor, retry_for=5)
        return self.clients[actor]

    def run_scenario(self, sc: dict[str, Any]) -> None:
        saved: dict[str, Any] = {}
        for i, st in enumerate(sc["steps"], 1):
            where = f"{sc['name']}: step {i} ({st['op']} as {st.get('as')})"
            args = substitute(st.get("args") or {}, saved)
            expect = st.get("expect") or {}
            err: AgentspaceError | None = None
            got: Any = None
            try:
                got = run_step(self.client(st.get("as", "scenario")), st["op"], args)
            except AgentspaceError as e:
                err = e
            if err is not None:
                if "error" not in expect:
                    self.fail(f"{where}: {type(err).__name__}: {err}")
                self.assertEqual(expect["error"], err.code, f"{where}: {err}")
                self.assertIsInstance(err, type(error_from_problem(0, {"code": expect["error"]})), where)
                want = substitute(expect.get("fields") or {}, saved)
                problem = mismatch("fields", want, error_fields(err, want))
                if problem:
                    self.fail(f"{where}: {problem} ({err})")
                continue
            if "error" in expect:
                self.fail(f"{where}: want error {expect['error']}, got {got!r}")
            if "ok" in expect:
                problem = mismatch("ok", substitute(expect["ok"], saved), got)
                if problem:
                    self.fail(f"{where}: {problem}")
            for name, path in (st.get("save") or {}).items():
                saved[name] = lookup(got, path)


def _load() -> None:
    doc = json.loads(SCENARIO.read_text())
    assert doc["format"] == 1, "this runner reads format 1"
    for n, sc in enumerate(doc["scenarios"], 1):
        slug = re.sub(r"[^a-z0-9]+", "_", sc["name"].lower()).strip("_")

        def test(self: ScenarioTest, sc: dict[str, Any] = sc) -> None:
            self.run_scenario(sc)

        test.__doc__ = sc["name"]
        setattr(ScenarioTest, f"test_{n:02d}_{slug}", test)


_load()

if __name__ == "__main__":
    unittest.main()
