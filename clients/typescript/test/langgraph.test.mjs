// LangGraph on agentspace: a thread has one writer (langgraph #8796: two
// writers on one thread forked its checkpoint chain), and the store's put
// takes an expected version.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Annotation, END, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import { AlreadyExistsError, ConflictError, LockedError, StaleFenceError } from "../dist/index.js";
import { AgentspaceSaver, AgentspaceStore } from "../dist/langgraph/index.js";
import { client } from "./lib/helpers.mjs";

const State = Annotation.Root({
  steps: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

function graph(saver, who, work = () => ({ steps: [`${who}:work`] })) {
  return new StateGraph(State)
    .addNode("plan", () => ({ steps: [`${who}:plan`] }))
    .addNode("work", work)
    .addNode("review", () => ({ steps: [`${who}:review`] }))
    .addEdge(START, "plan")
    .addEdge("plan", "work")
    .addEdge("work", "review")
    .addEdge("review", END)
    .compile({ checkpointer: saver });
}

// chainOf checks the thread's checkpoints form one line (no checkpoint has
// two children) and returns its length.
async function chainOf(saver, thread_id) {
  const children = new Map();
  let n = 0;
  for await (const t of saver.list({ configurable: { thread_id, checkpoint_ns: "" } })) {
    n++;
    const parent = t.parentConfig?.configurable?.checkpoint_id ?? "root";
    assert.ok(!children.has(parent), `checkpoint ${parent} has two children: the chain forked`);
    children.set(parent, t.checkpoint.id);
  }
  return n;
}

test("two writers on one thread (langgraph #8796): the second is refused and the chain never forks", async () => {
  const prefix = `lg/${randomUUID()}`;
  const ws = client("lg-test");
  const a = new AgentspaceSaver({ client: ws, prefix, actor: "writer-a" });
  const b = new AgentspaceSaver({ client: ws, prefix, actor: "writer-b" });
  const thread = { configurable: { thread_id: "t-8796" } };

  const out = await graph(a, "a").invoke({ steps: [] }, thread);
  assert.deepEqual(out.steps, ["a:plan", "a:work", "a:review"]);
  const before = await chainOf(a, "t-8796");

  // B runs the same thread while A holds it: refused at its first write.
  const refused = await graph(b, "b").invoke({ steps: [] }, thread).catch((e) => e);
  assert.ok(refused instanceof LockedError, String(refused));
  assert.equal(refused.holder, "writer-a");
  assert.equal(await chainOf(a, "t-8796"), before, "the refused writer added nothing");

  // A is declared dead (its lease taken from it); B takes over and goes on from A's last checkpoint.
  await ws.locks.forceRelease(a.leaseResource("t-8796"), { message: "writer-a is gone" });
  const more = await graph(b, "b").invoke({ steps: [] }, thread);
  assert.deepEqual(more.steps.slice(0, 3), ["a:plan", "a:work", "a:review"]);
  assert.deepEqual(more.steps.slice(3), ["b:plan", "b:work", "b:review"]);

  // A wakes up and writes with its old lease and its old view of the head:
  // refused (whichever check the batch meets first), nothing committed.
  const late = await graph(a, "a").invoke({ steps: [] }, thread).catch((e) => e);
  assert.ok(late instanceof LockedError || late instanceof StaleFenceError || late instanceof ConflictError, String(late));
  const after = await chainOf(b, "t-8796");
  assert.ok(after > before);
  const last = await b.getTuple(thread);
  assert.deepEqual(last.checkpoint.channel_values.steps.slice(3), ["b:plan", "b:work", "b:review"]);
  await Promise.all([a.close(), b.close()]);
});

// paused builds the graph of writer who whose "work" node, the first
// time, says it got there and waits to be let go (a slow model call, a GC
// pause: the writer is alive but not writing).
function paused(saver, who) {
  let arrived, letGo;
  const there = new Promise((r) => (arrived = r));
  const go = new Promise((r) => (letGo = r));
  let first = true;
  const g = graph(saver, who, async () => {
    if (first) {
      first = false;
      arrived();
      await go;
    }
    return { steps: [`${who}:work`] };
  });
  return { g, there, letGo };
}

// forks returns the checkpoints of a thread that have more than one child.
async function forks(saver, thread_id) {
  const children = new Map();
  for await (const t of saver.list({ configurable: { thread_id, checkpoint_ns: "" } })) {
    const parent = t.parentConfig?.configurable?.checkpoint_id ?? "root";
    children.set(parent, (children.get(parent) ?? 0) + 1);
  }
  return [...children].filter(([, n]) => n > 1).map(([id]) => id);
}

test("langgraph #8796 on the stock MemorySaver: two writers from one parent checkpoint fork the thread and a finished run is lost", async () => {
  const saver = new MemorySaver();
  const config = { configurable: { thread_id: "t" }, durability: "sync" };
  const a = paused(saver, "a");
  const running = a.g.invoke({ steps: [] }, config);
  await a.there;
  // A second worker runs the thread meanwhile, from A's last checkpoint, to the end.
  const b = await graph(saver, "b").invoke({ steps: [] }, config);
  assert.deepEqual(b.steps, ["a:plan", "b:plan", "b:work", "b:review"]);
  // A goes on from the parent it read: a second child of that checkpoint.
  a.letGo();
  await running;
  assert.ok((await forks(saver, "t")).length > 0, "the chain forked");
  const head = await graph(saver, "x").getState(config);
  assert.ok(!head.values.steps.includes("b:work"), `B's finished run is unreachable from the thread's head: ${head.values.steps}`);
});

test("langgraph #8796 on AgentspaceSaver: the second writer is refused, and once it took over the superseded first writer is refused", async () => {
  const prefix = `lg/${randomUUID()}`;
  const ws = client("lg-8796");
  const sa = new AgentspaceSaver({ client: ws, prefix, actor: "writer-a" });
  const sb = new AgentspaceSaver({ client: ws, prefix, actor: "writer-b" });
  const config = { configurable: { thread_id: "t" }, durability: "sync" };
  const a = paused(sa, "a");
  const running = a.g.invoke({ steps: [] }, config).catch((e) => e);
  await a.there;
  // While A holds the thread, B is refused at its first write.
  const refused = await graph(sb, "b").invoke({ steps: [] }, config).catch((e) => e);
  assert.ok(refused instanceof LockedError, String(refused));
  assert.equal(refused.holder, "writer-a");
  // A's lease is taken from it (as after an expiry); B runs the thread from A's last checkpoint.
  await ws.locks.forceRelease(sa.leaseResource("t"), { message: "writer-a stopped renewing" });
  const b = await graph(sb, "b").invoke({ steps: [] }, config);
  assert.deepEqual(b.steps, ["a:plan", "b:plan", "b:work", "b:review"]);
  // A goes on from the parent it read: refused, nothing committed.
  a.letGo();
  const late = await running;
  assert.ok(late instanceof StaleFenceError || late instanceof LockedError || late instanceof ConflictError, String(late));
  assert.deepEqual(await forks(sb, "t"), [], "the chain did not fork");
  const head = await graph(sb, "x").getState(config);
  assert.deepEqual(head.values.steps, ["a:plan", "b:plan", "b:work", "b:review"], "B's run is the thread's head");
  await Promise.all([sa.close(), sb.close()]);
});

test("a writer whose lease lapsed and was taken is refused at its next write", async () => {
  const prefix = `lg/${randomUUID()}`;
  const ws = client("lg-lapse");
  const a = new AgentspaceSaver({ client: ws, prefix, actor: "slow-a", leaseTtl: 60000 });
  const config = { configurable: { thread_id: "lapse", checkpoint_ns: "" } };
  const g = graph(a, "a");
  await g.invoke({ steps: [] }, config);
  // The lease lapses (taken by force here, as after an expiry) and B acquires and writes.
  await ws.locks.forceRelease(a.leaseResource("lapse"));
  const b = new AgentspaceSaver({ client: ws, prefix, actor: "fast-b" });
  await graph(b, "b").invoke({ steps: [] }, config);
  await b.release("lapse");
  // Even with the thread free again, A's old token is older than B's: stale.
  const tuple = await a.getTuple(config);
  const err = await a.put(tuple.config, { ...tuple.checkpoint, id: randomUUID() }, tuple.metadata, {}).catch((e) => e);
  assert.ok(err instanceof StaleFenceError || err instanceof LockedError || err instanceof ConflictError, String(err));
  assert.equal(await chainOf(b, "lapse"), 10);
});

test("checkpoints are workspace records with events", async () => {
  const prefix = `lg/${randomUUID()}`;
  const ws = client("lg-events");
  const head = await ws.events.head();
  const saver = new AgentspaceSaver({ client: ws, prefix, actor: "eventful" });
  await graph(saver, "e").invoke({ steps: [] }, { configurable: { thread_id: "ev" } });
  const page = await ws.events.history({ after: head, actor: "eventful", limit: 1000 });
  const names = page.events.filter((e) => e.type === "artifact.created").map((e) => e.subject.name);
  assert.ok(names.some((n) => n.startsWith(`${prefix}/threads/ev/`)), names.join(","));
  assert.ok(page.events.some((e) => e.type === "lock.acquired"));
  await saver.close();
});

test("the store's put takes an expected version and fails on a conflict", async () => {
  const store = new AgentspaceStore({ client: client("lg-store"), prefix: `lg/${randomUUID()}` });
  const ns = ["users", "ann"];
  const first = await store.putItem(ns, "prefs", { theme: "dark" }, { ifVersion: 0 });
  assert.equal(first.version, 1);
  await assert.rejects(store.putItem(ns, "prefs", { theme: "x" }, { ifVersion: 0 }), AlreadyExistsError);
  await store.put(ns, "prefs", { theme: "light" }, undefined, { ifVersion: 1 });
  const lost = await store.put(ns, "prefs", { theme: "late" }, undefined, { ifVersion: 1 }).catch((e) => e);
  assert.ok(lost instanceof ConflictError, String(lost));
  assert.equal(lost.current, 2);
  const got = await store.get(ns, "prefs");
  assert.deepEqual(got.value, { theme: "light" });
  await store.put(["users", "bob"], "prefs", { theme: "dark" });
  const found = await store.search(["users"], { filter: { theme: "dark" } });
  assert.deepEqual(found.map((i) => i.namespace), [["users", "bob"]]);
  assert.deepEqual(await store.listNamespaces({ prefix: ["users"] }), [["users", "ann"], ["users", "bob"]]);
  await store.delete(ns, "prefs");
  assert.equal(await store.get(ns, "prefs"), null);
});

test("a thread resumed by another saver sees exactly the pending nodes (emptied channels stay empty)", async () => {
  const prefix = `lg/${randomUUID()}`;
  const ws = client("lg-resume");
  const first = new AgentspaceSaver({ client: ws, prefix, actor: "first" });
  const config = { configurable: { thread_id: "resume" } };
  const build = (saver) =>
    new StateGraph(State)
      .addNode("plan", () => ({ steps: ["plan"] }))
      .addNode("work", () => ({ steps: ["work"] }))
      .addEdge(START, "plan")
      .addEdge("plan", "work")
      .addEdge("work", END)
      .compile({ checkpointer: saver, interruptBefore: ["work"] });
  await build(first).invoke({ steps: [] }, config);
  await first.close();
  const second = new AgentspaceSaver({ client: ws, prefix, actor: "second" });
  const g = build(second);
  const state = await g.getState(config);
  assert.deepEqual(state.next, ["work"]);
  assert.deepEqual(state.values.steps, ["plan"]);
  const out = await g.invoke(null, config);
  assert.deepEqual(out.steps, ["plan", "work"]);
  await second.close();
});
