// The language-neutral client scenario (clients/scenario/scenario.json,
// format in its README), run through this client. The Go test runs this
// file alone against a fresh workspace: the scenario reads the event head.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Agentspace, AgentspaceError } from "../../dist/index.js";

const file = process.env.AGENTSPACE_TEST_SCENARIO ?? fileURLToPath(new URL("../../../scenario/scenario.json", import.meta.url));
const url = process.env.AGENTSPACE_URL;
if (!url) throw new Error("AGENTSPACE_URL is not set: run through go test ./clients/");
if (!existsSync(file)) throw new Error(`the scenario file ${file} is missing`);
const spec = JSON.parse(readFileSync(file, "utf8"));

const clients = new Map();
function as(actor) {
  if (!clients.has(actor)) clients.set(actor, new Agentspace({ url, actor }));
  return clients.get(actor);
}

const secs = (s) => (s === undefined ? undefined : `${s}s`);

function resolve(v, saved) {
  if (typeof v === "string" && v.startsWith("$")) {
    assert.ok(v.slice(1) in saved, `nothing saved as ${v}`);
    return saved[v.slice(1)];
  }
  if (Array.isArray(v)) return v.map((x) => resolve(x, saved));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolve(x, saved)]));
  return v;
}

function match(got, want, where) {
  if (want && typeof want === "object" && !Array.isArray(want) && "$gt" in want) {
    assert.ok(typeof got === "number" && got > want.$gt, `${where}: ${got} is not > ${want.$gt}`);
    return;
  }
  if (Array.isArray(want)) {
    assert.ok(Array.isArray(got), `${where}: ${JSON.stringify(got)} is not a list`);
    assert.equal(got.length, want.length, `${where}: length of ${JSON.stringify(got)}`);
    want.forEach((w, i) => match(got[i], w, `${where}.${i}`));
    return;
  }
  if (want && typeof want === "object") {
    assert.ok(got && typeof got === "object", `${where}: ${JSON.stringify(got)} is not an object`);
    for (const [k, w] of Object.entries(want)) {
      assert.ok(k in got, `${where}: no ${k} in ${JSON.stringify(got)}`);
      match(got[k], w, `${where}.${k}`);
    }
    return;
  }
  assert.deepEqual(got, want, where);
}

function pick(v, path) {
  return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), v);
}

const empty = (p) => p.then(() => ({}));

// call runs one step's op through the client and returns its wire result.
async function call(op, actor, a) {
  const ws = as(actor);
  const w = { if_version: a.if_version, fence: a.fence, message: a.message, idempotency_key: a.idempotency_key };
  const ref = a.by === "id" ? { id: a.ref } : a.ref;
  switch (op) {
    case "create_artifact":
      return ws.artifacts.create({ ...w, name: a.name, content: a.content, kind: a.kind, content_type: a.content_type, labels: a.labels, task_id: a.task_id });
    case "get_artifact":
      return ws.artifacts.get(ref, { version: a.version });
    case "update_artifact":
      return ws.artifacts.update(ref, { ...w, content: a.content, kind: a.kind, content_type: a.content_type, labels: a.labels, task_id: a.task_id });
    case "delete_artifact":
      return empty(ws.artifacts.delete(ref, w));
    case "rollback_artifact":
      return ws.artifacts.rollback(ref, a.to, w);
    case "artifact_versions":
      return { versions: await ws.artifacts.versions(ref) };
    case "list_artifacts":
      return ws.artifacts.list({ kind: a.kind, owner: a.owner, name_prefix: a.name_prefix, task_id: a.task_id, labels: a.labels, limit: a.limit });
    case "create_task":
      return ws.tasks.create({ ...w, title: a.title, description: a.description, parent_id: a.parent_id, depends_on: a.depends_on, priority: a.priority, labels: a.labels, assignee: a.assignee });
    case "get_task":
      return ws.tasks.get(a.id);
    case "update_task":
      return ws.tasks.update(a.id, { ...w, status: a.status, title: a.title, description: a.description, assignee: a.assignee, priority: a.priority, labels: a.labels });
    case "list_tasks":
      return ws.tasks.list({ status: a.status, assignee: a.assignee, parent_id: a.parent_id, labels: a.labels, limit: a.limit });
    case "claim_task":
      return ws.tasks.claim({ lease: secs(a.lease), wait: secs(a.wait), labels: a.labels, parent_id: a.parent_id });
    case "heartbeat_task":
      return ws.tasks.heartbeat(a.id, { ...w, lease: secs(a.lease) });
    case "complete_task":
      return ws.tasks.complete(a.id, { ...w, summary: a.summary, artifacts: a.artifacts });
    case "fail_task":
      return ws.tasks.fail(a.id, { ...w, summary: a.summary, artifacts: a.artifacts });
    case "release_task":
      return ws.tasks.release(a.id, w);
    case "put_note":
      return ws.notes.put(a.kind, a.key, { ...w, title: a.title, body: a.body });
    case "get_note":
      return ws.notes.get(a.kind, a.key);
    case "delete_note":
      return empty(ws.notes.delete(a.kind, a.key, w));
    case "list_notes":
      return ws.notes.list({ kind: a.kind, limit: a.limit });
    case "acquire_lock":
      return ws.locks.acquire(a.resource, { ttl: secs(a.ttl), wait: secs(a.wait), message: a.message });
    case "renew_lock":
      return ws.locks.renew(a.resource, { token: a.token, ttl: secs(a.ttl) });
    case "release_lock":
      return empty(ws.locks.release(a.resource, { token: a.token }));
    case "force_release_lock":
      return empty(ws.locks.forceRelease(a.resource, { message: a.message }));
    case "get_lock":
      return ws.locks.get(a.resource);
    case "list_locks":
      return { locks: await ws.locks.list() };
    case "commit":
      return ws.batch(a.ops, { idempotency_key: a.idempotency_key });
    case "events_head":
      return { head: await ws.events.head() };
    case "read_events":
      return ws.events.history({ after: a.after, type: a.types, actor: a.actor, subject_kind: a.subject_kind, subject_id: a.subject_id, subject_name: a.subject_name, limit: a.limit });
    case "follow": {
      const events = [];
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), 30000);
      try {
        for await (const ev of ws.follow({ after: a.after, type: a.types, actor: a.actor, subject_kind: a.subject_kind, subject_id: a.subject_id, subject_name: a.subject_name, signal: ctl.signal })) {
          events.push(ev);
          if (events.length === a.count) break;
        }
      } finally {
        clearTimeout(timer);
      }
      return { events };
    }
    case "sleep":
      await new Promise((r) => setTimeout(r, a.seconds * 1000));
      return {};
    default:
      throw new Error(`the scenario names an op this runner does not know: ${op}`);
  }
}

for (const sc of spec.scenarios) {
  test(`scenario: ${sc.name}`, async () => {
    const saved = {};
    for (const [i, step] of sc.steps.entries()) {
      const where = `${sc.name} step ${i} (${step.op} as ${step.as})`;
      const args = resolve(step.args ?? {}, saved);
      const expect = resolve(step.expect ?? {}, saved);
      let result;
      try {
        result = await call(step.op, step.as ?? "scenario", args);
      } catch (e) {
        if (!(e instanceof AgentspaceError) || expect.error === undefined) throw new Error(`${where}: ${e}`, { cause: e });
        assert.equal(e.code, expect.error, `${where}: ${e.message}`);
        match(e.problem ?? {}, expect.fields ?? {}, `${where} error`);
        continue;
      }
      assert.equal(expect.error, undefined, `${where}: succeeded, expected ${expect.error}`);
      if (expect.ok !== undefined) match(result, expect.ok, where);
      for (const [name, path] of Object.entries(step.save ?? {})) saved[name] = pick(result, path);
    }
  });
}
