// Messages, the inbox, pause and resume, the agent loop's wait, and the
// actor a token binds, against a real `wsctl serve`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  Agentspace,
  ForbiddenError,
  InvalidError,
  NotFoundError,
  PausedError,
  TooManyError,
  errorFromProblem,
} from "../dist/index.js";
import { client, unique, url } from "./lib/helpers.mjs";

/** agent returns a fresh actor's name and client, after one write: a message may name it. */
async function agent(prefix) {
  const name = `${prefix}-${randomUUID().slice(0, 8)}`;
  const ws = client(name);
  await ws.notes.put("decision", unique("hello").replaceAll("/", "-"), { body: name });
  return [name, ws];
}

function after(ms, fn) {
  return new Promise((resolve, reject) => setTimeout(() => fn().then(resolve, reject), ms));
}

test("send, read, mark read, ack once, and reply in the thread", async () => {
  const [leadName, lead] = await agent("lead");
  const [bobName, bob] = await agent("bob");
  const deadline = new Date(Date.now() + 3600_000);
  const m = await lead.messages.send({ to: [bobName], subject: "rebase", body: "rebase on main", type: "question", severity: "warning", data: { branch: "feat/x" }, requires_ack: true, deadline });
  assert.equal(m.from, leadName);
  assert.deepEqual([m.to, m.type, m.severity, m.data, m.thread, m.pending], [[bobName], "question", "warning", { branch: "feat/x" }, m.id, [bobName]]);
  const page = await bob.inbox.read({ unread: true });
  assert.deepEqual([page.messages.map((x) => x.id), page.unread, page.unacked], [[m.id], 1, 1]);
  assert.equal((await bob.messages.get(m.id)).subject, "rebase");
  await bob.inbox.markRead(m.id);
  const read = await bob.inbox.read({ unread: true });
  assert.deepEqual([read.messages, read.unread, read.cursor], [[], 0, m.id]);
  const acked = await bob.messages.ack(m.id, { reply: "rebased" });
  assert.deepEqual(acked.pending ?? [], []);
  assert.deepEqual(acked.acks?.map((a) => [a.by, a.for, a.reply]), [[bobName, bobName, "rebased"]]);
  const again = await bob.messages.ack(m.id, { reply: "twice" });
  assert.deepEqual(again.acks?.map((a) => a.reply), ["rebased"], "an ack is recorded once");
  const reply = await bob.messages.send({ to: [leadName], body: "done", reply_to: m.id });
  assert.equal(reply.thread, m.id);
  assert.deepEqual((await lead.inbox.read({ thread: m.id })).messages.map((x) => x.id), [reply.id]);
});

test("bad messages are refused with typed errors and nothing is sent", async () => {
  const [leadName, lead] = await agent("lead");
  const [bobName, bob] = await agent("bob");
  const head = await lead.events.head();
  const unknown = await lead.messages.send({ to: ["nobody-" + randomUUID()], body: "hi" }).catch((e) => e);
  assert.ok(unknown instanceof InvalidError, String(unknown));
  assert.equal(unknown.field, "to");
  const empty = await lead.messages.send({ to: [bobName], body: "" }).catch((e) => e);
  assert.ok(empty instanceof InvalidError, String(empty));
  const fyi = await lead.messages.send({ to: [bobName], body: "fyi" });
  await assert.rejects(bob.messages.ack(fyi.id), InvalidError); // needs no ack
  await assert.rejects(client().messages.get(fyi.id), NotFoundError);
  await assert.rejects(bob.inbox.read({ actor: leadName }), ForbiddenError);
  const sent = await lead.events.history({ after: head, type: ["message.sent"] });
  assert.equal(sent.events.length, 1);
});

test("a message rides in the batch of the write it is about", async () => {
  const [leadName, lead] = await agent("lead");
  const [bobName] = await agent("bob");
  const name = unique("ts/msgbatch") + ".md";
  const res = await lead.batch([
    { op: "create_artifact", name, content: "plan" },
    { op: "send_message", msg: { to: [bobName], subject: "plan ready", body: `read ${name}` } },
  ]);
  assert.equal(res.results[1].message?.from, leadName);
  assert.deepEqual(res.events.map((e) => e.type), ["artifact.created", "message.sent"]);
});

test("the long poll returns when a message arrives; without one, the empty page at the wait", async () => {
  const [, lead] = await agent("lead");
  const [bobName, bob] = await agent("bob");
  const empty = await bob.inbox.read({ unread: true, wait: 200 });
  assert.deepEqual([empty.messages, empty.unread], [[], 0]);
  const sent = after(300, () => lead.messages.send({ to: [bobName], body: "wake up" }));
  const page = await bob.inbox.read({ unread: true, wait: 30000 });
  await sent;
  assert.deepEqual(page.messages.map((m) => m.body), ["wake up"]);
});

test("the inbox stream yields sends and acks, only the actor's, and resumes after a seq", async () => {
  const [leadName, lead] = await agent("lead");
  const [bobName, bob] = await agent("bob");
  const head = await bob.events.head();
  const ctl = new AbortController();
  const it = bob.inbox.stream({ after: head, heartbeat: 200, signal: ctl.signal });
  const sent = after(200, () => lead.messages.send({ to: [bobName], body: "first", requires_ack: true }));
  const first = (await it.next()).value;
  await sent;
  assert.deepEqual([first.type, first.message.body, first.message.from], ["message.sent", "first", leadName]);
  await bob.messages.ack(first.message.id, { reply: "seen" });
  await lead.messages.send({ to: [leadName], body: "not bob's" });
  await lead.messages.send({ to: [bobName], body: "second" });
  const acked = (await it.next()).value;
  assert.deepEqual([acked.type, acked.message.id, acked.message.acks?.[0]?.reply], ["message.acked", first.message.id, "seen"]);
  const second = (await it.next()).value;
  assert.deepEqual([second.type, second.message.body], ["message.sent", "second"]);
  ctl.abort();
  assert.equal((await it.next()).done, true);
  const again = bob.inbox.stream({ after: first.seq, heartbeat: 200 });
  assert.deepEqual([(await again.next()).value.seq, (await again.next()).value.seq], [acked.seq, second.seq]);
  await again.return();
  const other = bob.inbox.stream({ actor: leadName });
  await assert.rejects(other.next(), ForbiddenError);
});

test("a paused agent's writes are PausedError; its acks and renewals pass; resume ends it", async () => {
  const [leadName, lead] = await agent("lead");
  const [wName, worker] = await agent("worker");
  const resource = unique("ts/paused");
  const held = await worker.locks.acquire(resource, { ttl: 30000 });
  const p = await lead.agents.pause(wName, { message: "checkpoint: stop writing", ackTimeout: "5m" });
  assert.deepEqual([p.actor, p.message?.type, p.message?.to, p.message?.requires_ack], [wName, "pause", [wName], true]);
  assert.equal((await lead.agents.pause(wName)).message?.id, p.message?.id, "pausing a paused agent answers the first pause");
  const err = await worker.notes.put("decision", unique("blocked").replaceAll("/", "-"), { body: "x" }).catch((e) => e);
  assert.ok(err instanceof PausedError, String(err));
  assert.deepEqual([err.code, err.status, err.actor, err.by], ["paused", 423, wName, leadName]);
  assert.ok(err.since instanceof Date);
  const page = await worker.inbox.read({ unacked: true });
  assert.equal(page.paused, true);
  assert.deepEqual(page.messages.map((m) => m.id), [p.message?.id]);
  await worker.messages.ack(p.message.id, { reply: "paused" });
  assert.equal((await worker.locks.renew(resource, { token: held.token, ttl: 30000 })).token, held.token);
  const r = await lead.agents.resume(wName, { message: "carry on" });
  assert.equal(r.actor, wName);
  await worker.notes.put("decision", unique("free").replaceAll("/", "-"), { body: "x" });
  await assert.rejects(lead.agents.resume(wName), NotFoundError);
});

test("waitForWork returns on a message", async () => {
  const [, lead] = await agent("lead");
  const [bobName, bob] = await agent("bob");
  const labels = { suite: randomUUID() };
  const sent = after(300, () => lead.messages.send({ to: [bobName], body: "review my branch" }));
  const work = await bob.waitForWork({ timeout: 60000, labels });
  await sent;
  assert.deepEqual([work.inbox.messages.map((m) => m.body), work.ready], [["review my branch"], []]);
});

test("waitForWork returns on a task made ready, and at its timeout with nothing", async () => {
  const [, lead] = await agent("lead");
  const [, bob] = await agent("bob");
  const labels = { suite: randomUUID() };
  const nothing = await bob.waitForWork({ timeout: 200, labels });
  assert.deepEqual([nothing.inbox.messages, nothing.ready], [[], []]);
  const first = await lead.tasks.create({ title: "first", labels });
  const second = await lead.tasks.create({ title: "second", labels, depends_on: [first.id] });
  assert.equal((await lead.tasks.claim({ labels })).id, first.id);
  const done = after(300, () => lead.tasks.complete(first.id, { summary: "done" }));
  const work = await bob.waitForWork({ timeout: 60000, labels });
  await done;
  assert.deepEqual(work.ready.map((t) => t.id), [second.id]);
  assert.deepEqual(work.inbox.messages, []);
  assert.equal((await bob.tasks.claim({ labels })).id, second.id);
});

/** token creates a token for actor with the test's wsctl. */
function token(actor) {
  const bin = process.env.AGENTSPACE_TEST_WSCTL;
  const dsn = process.env.AGENTSPACE_TEST_DSN;
  return execFileSync(bin, ["--dsn", dsn, "token", "create", "--actor", actor, "--ttl", "1h"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
}

test("a token acts as its own actor: the client sends no actor header beside it, and refuses an actor that is another's", async () => {
  const actor = `ts-tok-${randomUUID().slice(0, 8)}`;
  const tok = token(actor);
  const seen = [];
  const spy = (input, init) => {
    seen.push(init?.headers ?? {});
    return fetch(input, init);
  };
  // The same name as the token's: accepted, and only the token is sent.
  const same = new Agentspace({ url, token: tok, actor, fetch: spy });
  assert.equal((await same.notes.put("decision", `tok-${randomUUID()}`, { body: "x" })).author, actor);
  assert.ok(seen.length >= 1);
  for (const h of seen) assert.equal(h["x-agentspace-actor"], undefined, "no actor header beside a token");

  // Another name, given: a clear InvalidError naming both, before any write.
  const other = new Agentspace({ url, token: tok, actor: "someone-else" });
  const err = await other.notes.put("decision", `tok-${randomUUID()}`, { body: "x" }).catch((e) => e);
  assert.ok(err instanceof InvalidError, String(err));
  assert.equal(err.field, "actor");
  assert.match(err.message, new RegExp(`the actor given names "someone-else" but the token acts as "${actor}"`));
  await assert.rejects(other.whoami(), InvalidError);

  // AGENTSPACE_ACTOR (ts-tests in this suite's environment) is another name: the error says which variable.
  assert.ok(process.env.AGENTSPACE_ACTOR && process.env.AGENTSPACE_ACTOR !== actor);
  const env = new Agentspace({ url, token: tok });
  const envErr = await env.whoami().catch((e) => e);
  assert.ok(envErr instanceof InvalidError, String(envErr));
  assert.match(envErr.message, /^AGENTSPACE_ACTOR names "ts-tests" but the token acts as/);

  // Without a token the actor header names who acts.
  const plain = new Agentspace({ url, actor: "ts-no-token" });
  assert.equal((await plain.whoami()).actor, "ts-no-token");
});

test("paused and too_many answers are their typed errors", () => {
  const p = errorFromProblem(423, JSON.stringify({ code: "paused", status: 423, title: "Locked", detail: "d", actor: "w", by: "lead", since: "2026-01-02T03:04:05Z" }));
  assert.ok(p instanceof PausedError);
  assert.deepEqual([p.actor, p.by, p.since?.toISOString()], ["w", "lead", "2026-01-02T03:04:05.000Z"]);
  assert.ok(errorFromProblem(429, JSON.stringify({ code: "too_many", status: 429, title: "Too Many Requests" })) instanceof TooManyError);
});
