// The client against a real `wsctl serve` (started by the Go test, on
// SQLite and on PostgreSQL).
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import {
  Agentspace,
  AlreadyExistsError,
  ConflictError,
  ConnectionError,
  InvalidError,
  LockedError,
  NoTaskError,
  NotFoundError,
  ProtocolError,
  StaleFenceError,
  TooLargeError,
  ForbiddenError,
  CompactedError,
  RewoundError,
  artifactBytes,
  artifactText,
  errorFromProblem,
} from "../dist/index.js";
import { client, unique, url } from "./lib/helpers.mjs";

test("conditional writes: the loser gets ConflictError with the current version, rollback makes a new head", async () => {
  const ws = client();
  const name = unique("ts/conflict") + ".md";
  const a = await ws.artifacts.create({ name, kind: "plan", content: "v1" });
  assert.equal(a.version, 1);
  const b = await ws.artifacts.update(name, { content: "v2", if_version: 1 });
  assert.equal(b.version, 2);
  const err = await ws.artifacts.update(name, { content: "late", if_version: 1 }).catch((e) => e);
  assert.ok(err instanceof ConflictError, String(err));
  assert.equal(err.current, 2);
  assert.equal(err.expected, 1);
  assert.equal(err.subject?.name, name);
  const r = await ws.artifacts.rollback(name, 1);
  assert.equal(r.version, 3);
  assert.equal(artifactText(await ws.artifacts.get(name)), "v1");
  assert.equal(artifactText(await ws.artifacts.get(name, { version: 2 })), "v2");
  assert.deepEqual((await ws.artifacts.versions(name)).map((v) => v.version), [1, 2, 3]);
  assert.equal((await ws.artifacts.get({ id: a.id })).name, name);
});

test("bytes go as base64 and come back the same", async () => {
  const ws = client();
  const name = unique("ts/bin") + ".bin";
  const bytes = new Uint8Array([0, 255, 1, 128, 10, 13]);
  await ws.artifacts.create({ name, content: bytes, content_type: "application/octet-stream" });
  assert.deepEqual(artifactBytes(await ws.artifacts.get(name)), bytes);
});

test("every error answer is its typed error", async () => {
  const ws = client();
  await assert.rejects(ws.artifacts.get(unique("ts/missing")), NotFoundError);
  const inv = await ws.artifacts.create({ name: "ts/../escape" }).catch((e) => e);
  assert.ok(inv instanceof InvalidError, String(inv));
  assert.equal(inv.field, "name");
  const name = unique("ts/dup");
  await ws.artifacts.create({ name, content: "x" });
  await assert.rejects(ws.artifacts.create({ name, content: "y" }), AlreadyExistsError);
  await assert.rejects(ws.notes.get("token", "anything"), ForbiddenError);
  // Codes no live call here reaches are decoded by the same table.
  const tl = errorFromProblem(413, JSON.stringify({ code: "too_large", status: 413, title: "x", type: "t", field: "content", reason: "over 32 MiB" }));
  assert.ok(tl instanceof TooLargeError && tl instanceof InvalidError);
  assert.equal(tl.field, "content");
  const cp = errorFromProblem(410, JSON.stringify({ code: "compacted", status: 410, title: "x", type: "t", requested: 3, floor: 9 }));
  assert.ok(cp instanceof CompactedError);
  assert.equal(cp.floor, 9);
  const rw = errorFromProblem(410, JSON.stringify({ code: "rewound", status: 410, title: "x", type: "t", detail: "the log's head is 7, below seq 9" }));
  assert.ok(rw instanceof RewoundError);
  assert.equal(rw.code, "rewound");
  assert.ok(errorFromProblem(502, "<html>bad gateway</html>") instanceof ProtocolError);
});

test("locks: LockedError names the holder and expiry; a fenced write after losing the lease is refused", async () => {
  const ann = client("ann-" + Date.now());
  const bob = client("bob-" + Date.now());
  const name = unique("ts/fenced") + ".md";
  await ann.artifacts.create({ name, content: "0" });
  const resource = `artifact:${name}`;
  const held = await ann.withLock(
    resource,
    async ({ lease, ws }) => {
      const err = await bob.locks.acquire(resource, { ttl: 5000 }).catch((e) => e);
      assert.ok(err instanceof LockedError, String(err));
      assert.equal(err.holder, ann.transport.actor);
      assert.ok(err.expiresAt instanceof Date && err.expiresAt.getTime() > Date.now() - 60000);
      const a = await ws.artifacts.update(name, { content: "1" });
      assert.equal(a.version, 2);
      return lease;
    },
    { ttl: 5000 },
  );
  // The lease was released; bob takes it, so ann's old token is stale.
  const bobs = await bob.locks.acquire(resource, { ttl: 5000 });
  assert.ok(bobs.token > held.token);
  await bob.locks.release(resource, { token: bobs.token });
  const stale = await ann.fenced(held.token).artifacts.update(name, { content: "late" }).catch((e) => e);
  assert.ok(stale instanceof StaleFenceError, String(stale));
  assert.equal(stale.newest, bobs.token);
});

test("withLock renews the lease while its callback runs past the ttl", async () => {
  const ws = client();
  const other = client();
  const resource = unique("ts/renewed");
  await ws.withLock(
    resource,
    async ({ signal }) => {
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(signal.aborted, false);
      await assert.rejects(other.locks.acquire(resource, { ttl: 1000 }), LockedError);
    },
    { ttl: 1500 },
  );
  await other.locks.acquire(resource, { ttl: 1000 });
});

test("claims: dependencies order the work, heartbeats keep a claim past its lease, no task is NoTaskError", async () => {
  const boss = client();
  const label = { run: unique("claims") };
  const first = await boss.tasks.create({ title: "first", labels: label });
  const second = await boss.tasks.create({ title: "second", labels: label, depends_on: [first.id] });
  const worker = client();
  const got = await worker.withClaim(
    async ({ task }) => {
      assert.equal(task.id, first.id);
      await new Promise((r) => setTimeout(r, 2500));
      const now = await boss.tasks.get(task.id);
      assert.equal(now.status, "in_progress");
      assert.equal(now.assignee, worker.transport.actor);
      return { summary: "did it" };
    },
    { lease: 1500, labels: label },
  );
  assert.equal(got.summary, "did it");
  assert.equal((await boss.tasks.get(first.id)).status, "done");
  const next = await worker.tasks.claim({ labels: label, lease: 10000 });
  assert.equal(next.id, second.id);
  await worker.tasks.complete(next.id, { summary: "ok" });
  await assert.rejects(worker.tasks.claim({ labels: label }), NoTaskError);
});

test("a batch fails whole and names its op; an idempotent retry returns the first result and writes once", async () => {
  const ws = client();
  const name = unique("ts/batch");
  await ws.artifacts.create({ name, content: "a" });
  const err = await ws
    .batch([
      { op: "create_artifact", name: name + "-new", content: "x" },
      { op: "update_artifact", name, if_version: 7, content: "z" },
    ])
    .catch((e) => e);
  assert.ok(err instanceof ConflictError);
  assert.equal(err.batchIndex, 1);
  await assert.rejects(ws.artifacts.get(name + "-new"), NotFoundError);

  const key = unique("key").replace("/", "-");
  const one = await ws.artifacts.update(name, { content: "b", idempotency_key: key });
  const two = await ws.artifacts.update(name, { content: "b", idempotency_key: key });
  assert.equal(one.version, 2);
  assert.equal(two.version, 2);
  assert.equal((await ws.artifacts.get(name)).version, 2);
});

test("a server that is down is ConnectionError; a malformed body is ProtocolError", async () => {
  const down = new Agentspace({ url: "http://127.0.0.1:9", retryFor: 200 });
  const e = await down.status().catch((x) => x);
  assert.ok(e instanceof ConnectionError, String(e));
  const junk = http.createServer((_, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{not json");
  });
  await new Promise((r) => junk.listen(0, "127.0.0.1", r));
  try {
    const ws = new Agentspace({ url: `http://127.0.0.1:${junk.address().port}` });
    await assert.rejects(ws.status(), ProtocolError);
  } finally {
    junk.close();
  }
});

test("URL and actor come from AGENTSPACE_DSN (or its alias AGENTSPACE_URL) / AGENTSPACE_ACTOR when not given", async () => {
  const saved = { ...process.env };
  delete process.env.AGENTSPACE_DSN;
  process.env.AGENTSPACE_URL = url;
  process.env.AGENTSPACE_ACTOR = "from-env";
  try {
    assert.equal((await new Agentspace().whoami()).actor, "from-env");
    process.env.AGENTSPACE_URL = "http://127.0.0.1:1";
    process.env.AGENTSPACE_DSN = url;
    assert.equal((await new Agentspace().whoami()).actor, "from-env", "AGENTSPACE_DSN wins");
    process.env.AGENTSPACE_DSN = "sqlite:ws.db";
    assert.throws(() => new Agentspace(), (e) => e instanceof InvalidError && /^AGENTSPACE_DSN: want http/.test(e.message));
  } finally {
    if (saved.AGENTSPACE_DSN === undefined) delete process.env.AGENTSPACE_DSN;
    else process.env.AGENTSPACE_DSN = saved.AGENTSPACE_DSN;
    process.env.AGENTSPACE_URL = saved.AGENTSPACE_URL;
    if (saved.AGENTSPACE_ACTOR === undefined) delete process.env.AGENTSPACE_ACTOR;
    else process.env.AGENTSPACE_ACTOR = saved.AGENTSPACE_ACTOR;
  }
});

test("notes and status", async () => {
  const ws = client();
  const key = unique("k").replace("/", "-");
  const n = await ws.notes.put("decision", key, { title: "Use SSE", body: "because" });
  assert.equal(n.version, 1);
  await assert.rejects(ws.notes.put("decision", key, { title: "x", body: "y", if_version: 5 }), ConflictError);
  assert.equal((await ws.notes.get("decision", key)).body, "because");
  await ws.notes.delete("decision", key);
  await assert.rejects(ws.notes.get("decision", key), NotFoundError);
  const st = await ws.status();
  assert.ok(st.head > 0);
});
