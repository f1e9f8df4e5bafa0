// Google ADK on agentspace: a real Runner (an LlmAgent with a stub model,
// no network, and a tool that counts in the session's state) keeps its
// sessions, events and app-, user- and session-scoped state in the
// workspace; two runners racing on one session lose no update (ADK's
// InMemorySessionService loses one); under a lease a superseded worker is
// refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BaseLlm, FunctionTool, InMemorySessionService, LlmAgent, Runner, createEvent } from "@google/adk";
import { Agentspace, AlreadyExistsError, LockedError, StaleFenceError } from "../dist/index.js";
import { AgentspaceSessionService, StaleSessionError } from "../dist/adk/index.js";
import { barrier, holdFirstBatch } from "./lib/race.mjs";
import { client, unique, url } from "./lib/helpers.mjs";

// StubLlm calls the increment tool, then says the count the tool returned.
// Its first call waits at gate(), if given.
class StubLlm extends BaseLlm {
  constructor(gate) {
    super({ model: "stub" });
    this.gate = gate;
    this.calls = 0;
  }
  async *generateContentAsync(req) {
    if (this.calls++ === 0) await this.gate?.();
    const last = req.contents[req.contents.length - 1];
    const answer = last?.parts?.find((p) => p.functionResponse);
    if (answer) yield { content: { role: "model", parts: [{ text: `count is ${answer.functionResponse.response.count}` }] } };
    else yield { content: { role: "model", parts: [{ functionCall: { id: `call-${Math.random().toString(36).slice(2)}`, name: "increment", args: {} } }] } };
  }
  async connect() {
    throw new Error("the stub model has no live connection");
  }
}

// increment adds one to the session's count, and to the user's and the app's turns.
const increment = new FunctionTool({
  name: "increment",
  description: "Adds one to the counter.",
  execute: (_args, ctx) => {
    const count = (ctx.state.get("count") ?? 0) + 1;
    ctx.state.set("count", count);
    ctx.state.set("user:turns", (ctx.state.get("user:turns") ?? 0) + 1);
    ctx.state.set("app:turns", (ctx.state.get("app:turns") ?? 0) + 1);
    ctx.state.set("temp:scratch", "not kept");
    return { count };
  },
});

function runner(appName, sessionService, gate) {
  const model = new StubLlm(gate);
  const agent = new LlmAgent({ name: "counter", model, instruction: "Count.", tools: [increment] });
  return Object.assign(new Runner({ appName, agent, sessionService }), { model });
}

async function turn(r, userId, sessionId, text) {
  const out = [];
  for await (const ev of r.runAsync({ userId, sessionId, newMessage: { role: "user", parts: [{ text }] } })) out.push(ev);
  return out;
}

// grouped says whether each invocation's events are one contiguous run.
function grouped(events) {
  const done = new Set();
  for (let i = 0; i < events.length; i++) {
    const id = events[i].invocationId;
    if (i > 0 && events[i - 1].invocationId !== id) {
      if (done.has(id)) return false;
      done.add(events[i - 1].invocationId);
    }
  }
  return true;
}

const increments = (events) => events.filter((e) => e.content?.parts?.some((p) => p.functionResponse)).length;

test("a real Runner keeps sessions, events and scoped state in the workspace", async () => {
  const prefix = unique("adk");
  const ws = client("adk-worker");
  const svc = new AgentspaceSessionService({ client: ws, prefix, actor: "adk-worker" });
  const app = "support";
  const s = await svc.createSession({ appName: app, userId: "ann", sessionId: "s1", state: { "app:motto": "be brief", "user:name": "Ann", topic: "leases", "temp:x": 1 } });
  assert.deepEqual(s.state, { topic: "leases", "app:motto": "be brief", "user:name": "Ann" });
  await assert.rejects(svc.createSession({ appName: app, userId: "ann", sessionId: "s1" }), AlreadyExistsError);
  const r = runner(app, svc);
  const first = await turn(r, "ann", "s1", "one");
  assert.equal(first.at(-1).content.parts[0].text, "count is 1");
  assert.equal((await turn(r, "ann", "s1", "two")).at(-1).content.parts[0].text, "count is 2");

  // Another worker (its own client) reads what this one wrote.
  const other = new AgentspaceSessionService({ client: client("adk-reader"), prefix });
  const got = await other.getSession({ appName: app, userId: "ann", sessionId: "s1" });
  assert.deepEqual(got.state, { topic: "leases", count: 2, "app:motto": "be brief", "app:turns": 2, "user:name": "Ann", "user:turns": 2 });
  assert.deepEqual(got.events.map((e) => e.author), ["user", "counter", "counter", "counter", "user", "counter", "counter", "counter"]);
  assert.ok(grouped(got.events));
  assert.ok(got.events.every((e) => !("temp:scratch" in (e.actions?.stateDelta ?? {}))), "temp: keys are not stored");
  const recent = await other.getSession({ appName: app, userId: "ann", sessionId: "s1", config: { numRecentEvents: 3 } });
  assert.deepEqual(recent.events.map((e) => e.id), got.events.slice(-3).map((e) => e.id));
  const after = await other.getSession({ appName: app, userId: "ann", sessionId: "s1", config: { afterTimestamp: got.events[4].timestamp } });
  assert.ok(after.events.length >= 4 && after.events.every((e) => e.timestamp >= got.events[4].timestamp));

  // app: state is the app's, user: state the user's, across their sessions.
  const s2 = await svc.createSession({ appName: app, userId: "ann", sessionId: "s2" });
  assert.deepEqual(s2.state, { "app:motto": "be brief", "app:turns": 2, "user:name": "Ann", "user:turns": 2 });
  const bob = await svc.createSession({ appName: app, userId: "bob" });
  assert.deepEqual(bob.state, { "app:motto": "be brief", "app:turns": 2 });

  const mine = await svc.listSessions({ appName: app, userId: "ann", order: "asc" });
  assert.deepEqual(mine.sessions.map((x) => x.id), ["s1", "s2"]);
  assert.equal(mine.totalItems, 2);
  const paged = await svc.listSessions({ appName: app, limit: 2, page: 2 });
  assert.equal(paged.totalItems, 3);
  assert.equal(paged.totalPages, 2);
  assert.equal(paged.sessions.length, 1);

  // The records, as wsctl and the dashboard show them.
  assert.equal((await ws.artifacts.get(svc.headName({ appName: app, userId: "ann", sessionId: "s1" }))).kind, "adk-session");
  assert.deepEqual(JSON.parse((await ws.artifacts.get(svc.appStateName(app))).content), { motto: "be brief", turns: 2 });
  assert.deepEqual(JSON.parse((await ws.artifacts.get(svc.userStateName(app, "ann"))).content), { name: "Ann", turns: 2 });
  const parts = await ws.artifacts.list({ name_prefix: `${svc.eventsFolder({ appName: app, userId: "ann", sessionId: "s1" })}/` });
  assert.ok(parts.artifacts.length > 0 && parts.artifacts.every((a) => a.kind === "adk-events"));

  await svc.deleteSession({ appName: app, userId: "ann", sessionId: "s1" });
  assert.equal(await svc.getSession({ appName: app, userId: "ann", sessionId: "s1" }), undefined);
  assert.equal((await ws.artifacts.list({ name_prefix: `${svc.eventsFolder({ appName: app, userId: "ann", sessionId: "s1" })}/` })).artifacts.length, 0);
  await svc.deleteSession({ appName: app, userId: "ann", sessionId: "s1" });
});

test("two runners on one session at once: InMemorySessionService loses an update, ours refuses the stale one and loses none", async () => {
  // ADK's in-memory service: both runners read the session (count 0)
  // before either's tool runs; both write count 1.
  const mem = new InMemorySessionService();
  await mem.createSession({ appName: "race", userId: "u", sessionId: "s" });
  const mb = barrier(2);
  await Promise.all([turn(runner("race", mem, () => mb.arrive()), "u", "s", "from A"), turn(runner("race", mem, () => mb.arrive()), "u", "s", "from B")]);
  const lost = await mem.getSession({ appName: "race", userId: "u", sessionId: "s" });
  assert.equal(increments(lost.events), 2, "both tools ran");
  assert.equal(lost.state.count, 1, "one increment is lost");
  assert.ok(!grouped(lost.events), "and the two invocations' events interleave");

  // Ours, the same race: both runners' first appends are sent only after
  // both have read the session. One is refused; its worker runs the turn
  // again on the session as it is now.
  const prefix = unique("adk");
  await new AgentspaceSessionService({ client: client(), prefix }).createSession({ appName: "race", userId: "u", sessionId: "s" });
  const b = barrier(2);
  let refused = 0;
  const worker = async (who) => {
    const svc = new AgentspaceSessionService({ client: new Agentspace({ url, actor: `worker-${who}`, fetch: holdFirstBatch(b) }), prefix, actor: `worker-${who}` });
    const r = runner("race", svc);
    for (;;) {
      try {
        return await turn(r, "u", "s", `from ${who}`);
      } catch (e) {
        if (!(e instanceof StaleSessionError)) throw e;
        refused++;
      }
    }
  };
  const [a, bb] = await Promise.all([worker("A"), worker("B")]);
  assert.equal(a.at(-1).content.parts[0].text.startsWith("count is"), true);
  assert.equal(bb.at(-1).content.parts[0].text.startsWith("count is"), true);
  assert.ok(refused >= 1, "one append was refused as stale");
  const s = await new AgentspaceSessionService({ client: client(), prefix }).getSession({ appName: "race", userId: "u", sessionId: "s" });
  assert.equal(s.state.count, increments(s.events), "every committed increment counted: none lost");
  assert.ok(s.state.count >= 2);
  assert.ok(grouped(s.events), "no invocation's events are split by another's");
  assert.deepEqual([...new Set(s.events.filter((e) => e.author === "user").map((e) => e.content.parts[0].text))].sort(), ["from A", "from B"]);
});

test("workers that take the session's lease run their turns one after the other", async () => {
  const prefix = unique("adk");
  await new AgentspaceSessionService({ client: client(), prefix }).createSession({ appName: "queue", userId: "u", sessionId: "s" });
  const key = { appName: "queue", userId: "u", sessionId: "s" };
  const worker = async (who) => {
    const svc = new AgentspaceSessionService({ client: client(`lw-${who}`), prefix, actor: `lw-${who}`, lease: { ttl: 10000, wait: 30000 } });
    try {
      return await turn(runner("queue", svc), "u", "s", `from ${who}`);
    } finally {
      await svc.release(key);
    }
  };
  const outs = await Promise.all([worker("A"), worker("B")]);
  assert.deepEqual(outs.map((o) => o.at(-1).content.parts[0].text).sort(), ["count is 1", "count is 2"]);
  const s = await new AgentspaceSessionService({ client: client(), prefix }).getSession(key);
  assert.equal(s.state.count, 2);
  assert.ok(grouped(s.events));
});

test("under a lease a superseded worker is refused and writes nothing", async () => {
  const prefix = unique("adk");
  const ws = client("adk-admin");
  const key = { appName: "lease", userId: "u", sessionId: "s" };
  const a = new AgentspaceSessionService({ client: client("wa"), prefix, actor: "wa", lease: true });
  const b = new AgentspaceSessionService({ client: client("wb"), prefix, actor: "wb", lease: true });
  await a.createSession({ ...key, state: {} });
  await turn(runner("lease", a), "u", "s", "a1");
  const refused = await turn(runner("lease", b), "u", "s", "b1").catch((e) => e);
  assert.ok(refused instanceof LockedError, String(refused));
  assert.equal(refused.holder, "wa");
  // A service without the lease option is refused at its append.
  const plain = new AgentspaceSessionService({ client: client("wc"), prefix, actor: "wc" });
  const s = await plain.getSession(key);
  await assert.rejects(plain.appendEvent({ session: s, event: createEvent({ invocationId: "x", author: "user" }) }), LockedError);

  await ws.locks.forceRelease(a.leaseResource(key), { message: "wa is gone" });
  await turn(runner("lease", b), "u", "s", "b1");
  const late = await turn(runner("lease", a), "u", "s", "a2").catch((e) => e);
  assert.ok(late instanceof StaleFenceError || late instanceof LockedError, String(late));
  const after = await plain.getSession(key);
  assert.deepEqual(after.events.filter((e) => e.author === "user").map((e) => e.content.parts[0].text), ["a1", "b1"]);
  assert.equal(after.state.count, 2);
  await Promise.all([a.close(), b.close()]);
});

test("a session object this service did not make is checked as ADK does, by its last update time", async () => {
  const prefix = unique("adk");
  const svc = new AgentspaceSessionService({ client: client("adk-copy"), prefix, actor: "adk-copy" });
  const s = await svc.createSession({ appName: "copy", userId: "u", sessionId: "s" });
  const copy = JSON.parse(JSON.stringify(s));
  await svc.appendEvent({ session: copy, event: createEvent({ invocationId: "i1", author: "user", actions: { stateDelta: { k: 1 } } }) });
  assert.equal(copy.events.length, 1);
  const stale = JSON.parse(JSON.stringify(s));
  const err = await svc.appendEvent({ session: stale, event: createEvent({ invocationId: "i2", author: "user" }) }).catch((e) => e);
  assert.ok(err instanceof StaleSessionError, String(err));
  // The original object was read before the copy's append: stale too, by version.
  await assert.rejects(svc.appendEvent({ session: s, event: createEvent({ invocationId: "i3", author: "user" }) }), StaleSessionError);
  const got = await svc.getSession({ appName: "copy", userId: "u", sessionId: "s" });
  assert.deepEqual(got.events.map((e) => e.invocationId), ["i1"]);
  assert.equal(got.state.k, 1);
});
