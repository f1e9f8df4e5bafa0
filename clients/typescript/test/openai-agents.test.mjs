// The OpenAI Agents SDK on agentspace: a real Runner loop (a stub model,
// no network) keeps its session in the workspace; two runners racing on
// one session lose nothing and keep each turn whole (the SDK examples' file
// session loses a turn); under a lease a superseded runner is refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, MemorySession, Runner, Usage, setTracingDisabled } from "@openai/agents";
import { Agentspace, LockedError, StaleFenceError } from "../dist/index.js";
import { AgentspaceSession, HistoryTransactionError } from "../dist/openai-agents/index.js";
import { FileSession } from "./lib/filesession.mjs";
import { barrier, holdFirstBatch } from "./lib/race.mjs";
import { client, unique, url } from "./lib/helpers.mjs";

setTracingDisabled(true);

// StubModel answers "WHO saw N" (N: the items the runner sent it), after
// gate() if given.
class StubModel {
  constructor(who, gate) {
    this.who = who;
    this.gate = gate;
    this.calls = 0;
  }
  async getResponse(request) {
    this.calls++;
    await this.gate?.();
    const n = Array.isArray(request.input) ? request.input.length : 1;
    return {
      usage: new Usage(),
      output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: `${this.who} saw ${n}` }] }],
    };
  }
  async *getStreamedResponse() {
    throw new Error("the stub model does not stream");
  }
}

function text(item) {
  return typeof item.content === "string" ? item.content : item.content.map((c) => c.text).join("");
}

function agent(model) {
  return new Agent({ name: "assistant", instructions: "Answer briefly.", model });
}

test("a real Runner loop keeps its history in the workspace, where another runner reads it", async () => {
  const prefix = unique("oa");
  const ws = client("oa-loop");
  const session = new AgentspaceSession({ client: ws, prefix, sessionId: "loop", actor: "runner-1" });
  const head = await ws.events.head();
  const runner = new Runner();
  const a = agent(new StubModel("m"));
  assert.equal((await runner.run(a, "What is a lease?", { session })).finalOutput, "m saw 1");
  assert.equal((await runner.run(a, "And a fence?", { session })).finalOutput, "m saw 3", "the second turn's model saw the first turn");

  const other = new AgentspaceSession({ client: client("oa-reader"), prefix, sessionId: "loop" });
  assert.deepEqual((await other.getItems()).map(text), ["What is a lease?", "m saw 1", "And a fence?", "m saw 3"]);
  assert.deepEqual((await other.getItems(1)).map(text), ["m saw 3"]);
  assert.deepEqual(await other.getItems(0), []);

  const h = await ws.artifacts.get(session.headName);
  assert.equal(h.kind, "session");
  assert.equal(h.version, 2, "one head write per turn");
  const parts = await ws.artifacts.list({ name_prefix: `${session.itemsFolder}/` });
  assert.deepEqual(parts.artifacts.map((p) => p.kind), ["session-items", "session-items"]);
  const page = await ws.events.history({ after: head, actor: "runner-1", limit: 100 });
  assert.deepEqual(page.events.map((e) => e.type), ["artifact.created", "artifact.created", "artifact.updated", "artifact.created"]);
});

test("two runners append one turn each at once: the examples' file session loses one, ours keeps both whole", async () => {
  // The file session: both runners read the file before either writes it.
  const file = join(await mkdtemp(join(tmpdir(), "oa-file-")), "session.json");
  const runner = new Runner();
  await runner.run(agent(new StubModel("seed")), "first question", { session: new FileSession(file, "s") });
  const fb = barrier(2);
  await Promise.all([
    runner.run(agent(new StubModel("a")), "from A", { session: new FileSession(file, "s", () => fb.arrive()) }),
    runner.run(agent(new StubModel("b")), "from B", { session: new FileSession(file, "s", () => fb.arrive()) }),
  ]);
  const onFile = JSON.parse(await readFile(file, "utf8")).map(text);
  assert.equal(onFile.length, 4, `a turn is lost: ${onFile}`);
  assert.equal(onFile.filter((t) => t === "from A" || t === "from B").length, 1, String(onFile));

  // Ours, the same race: both runners' appends are sent only after both
  // have read the session, so both are based on the same head.
  const prefix = unique("oa");
  const sessionId = "race";
  await runner.run(agent(new StubModel("seed")), "first question", { session: new AgentspaceSession({ client: client("seed"), prefix, sessionId }) });
  const head = await client().events.head();
  const b = barrier(2);
  const racer = (who) =>
    new AgentspaceSession({ client: new Agentspace({ url, actor: `runner-${who}`, fetch: holdFirstBatch(b) }), prefix, sessionId, actor: `runner-${who}` });
  const [ra, rb] = await Promise.all([
    runner.run(agent(new StubModel("a")), "from A", { session: racer("a") }),
    runner.run(agent(new StubModel("b")), "from B", { session: racer("b") }),
  ]);
  assert.equal(ra.finalOutput, "a saw 3");
  assert.equal(rb.finalOutput, "b saw 3", "both runners read the session before either wrote");
  const items = (await new AgentspaceSession({ client: client(), prefix, sessionId }).getItems()).map(text);
  assert.equal(items.length, 6, String(items));
  assert.deepEqual(items.slice(0, 2), ["first question", "seed saw 1"]);
  const turns = [items.slice(2, 4).join(" / "), items.slice(4, 6).join(" / ")].sort();
  assert.deepEqual(turns, ["from A / a saw 3", "from B / b saw 3"], "each turn whole, none lost");
  // The server refused one of the two appends (a conflict event), and that runner's client retried it.
  const conflicts = await client().events.history({ after: head, type: ["conflict"], limit: 100 });
  assert.ok(conflicts.events.some((e) => e.subject.name.startsWith(`${prefix}/`)), "the appends did race at the server");
});

function runWorker(prefix, sessionId, tag, count) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(import.meta.dirname, "lib", "append-worker.mjs"), prefix, sessionId, tag, String(count)], {
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`worker ${tag} exited ${code}: ${out}`))));
  });
}

test("two processes appending to one session at once: every turn is there once, whole, in each process's order", async () => {
  const prefix = unique("oa");
  const n = 12;
  await Promise.all([runWorker(prefix, "procs", "p", n), runWorker(prefix, "procs", "q", n)]);
  const items = (await new AgentspaceSession({ client: client(), prefix, sessionId: "procs" }).getItems()).map(text);
  assert.equal(items.length, 2 * n * 3);
  const seen = { p: -1, q: -1 };
  for (let i = 0; i < items.length; i += 3) {
    const [tag, turn] = items[i].split(":");
    assert.deepEqual(items.slice(i, i + 3), [`${tag}:${turn}:ask`, `${tag}:${turn}:think`, `${tag}:${turn}:answer`], "a turn is whole");
    assert.equal(Number(turn), seen[tag] + 1, "in order, none lost or repeated");
    seen[tag] = Number(turn);
  }
  assert.deepEqual(seen, { p: n - 1, q: n - 1 });
});

test("under a lease one runner holds the session; a superseded runner is refused and writes nothing", async () => {
  const prefix = unique("oa");
  const ws = client("oa-admin");
  const sessionId = "leased";
  const runner = new Runner();
  const a = new AgentspaceSession({ client: client("runner-a"), prefix, sessionId, actor: "runner-a", lease: true });
  const b = new AgentspaceSession({ client: client("runner-b"), prefix, sessionId, actor: "runner-b", lease: true });
  const ma = new StubModel("a");
  const mb = new StubModel("b");
  await runner.run(agent(ma), "a1", { session: a });

  // B is refused at the start of its turn, before its model is called.
  const refused = await runner.run(agent(mb), "b1", { session: b }).catch((e) => e);
  assert.ok(refused instanceof LockedError, String(refused));
  assert.equal(refused.holder, "runner-a");
  assert.equal(mb.calls, 0);
  // A runner without the lease option is refused at its write.
  const plain = new AgentspaceSession({ client: client("runner-c"), prefix, sessionId, actor: "runner-c" });
  await assert.rejects(plain.addItems([{ role: "user", content: "c1" }]), LockedError);

  // A's lease is taken from it (as after an expiry); B takes the session.
  await ws.locks.forceRelease(a.leaseResource, { message: "runner-a is gone" });
  await runner.run(agent(mb), "b1", { session: b });

  // A goes on as if it still held the session: its write is refused.
  const late = await runner.run(agent(ma), "a2", { session: a }).catch((e) => e);
  assert.ok(late instanceof StaleFenceError || late instanceof LockedError, String(late));
  await assert.rejects(a.addItems([{ role: "user", content: "again" }]), (e) => e === late, "refused until it takes the lease anew");
  assert.deepEqual((await b.getItems()).map(text), ["a1", "a saw 1", "b1", "b saw 3"]);

  await b.release();
  await a.acquire();
  await a.addItems([{ role: "user", content: "a3" }]);
  assert.equal((await a.getItems(1)).map(text)[0], "a3");
  await a.close();
});

// A small deterministic generator, for the model check below.
function rand(seed) {
  let s = seed >>> 0;
  return (n) => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s % n;
  };
}

test("every operation agrees with the SDK's MemorySession (a model check, with parts merged)", async () => {
  const r = rand(55);
  const ours = new AgentspaceSession({ client: client("oa-model"), prefix: unique("oa"), sessionId: "model", fanout: 3 });
  const model = new MemorySession();
  let k = 0;
  const item = () => ({ role: "user", content: `i${k++}` });
  for (let step = 0; step < 60; step++) {
    const what = r(20);
    if (what < 9) {
      const items = Array.from({ length: 1 + r(3) }, item);
      await ours.addItems(items);
      await model.addItems(items);
    } else if (what < 13) {
      assert.deepEqual(await ours.popItem(), await model.popItem(), `step ${step}: popItem`);
    } else if (what < 14) {
      await ours.clearSession();
      await model.clearSession();
    } else if (what < 17) {
      const tx = { operationId: `op-${r(4)}`, transaction: { type: "append_items", items: [item()] } };
      const [x, y] = await Promise.all([ours.applyHistoryTransaction(tx).then(() => "ok", (e) => e.name), model.applyHistoryTransaction(tx).then(() => "ok", () => "refused")]);
      assert.equal(x === "ok" ? "ok" : "refused", y, `step ${step}: ${JSON.stringify(tx)} gave ${x}`);
    } else {
      const all = await model.getItems();
      const cut = r(Math.min(3, all.length) + 1);
      const tx = { operationId: `rep-${step}`, transaction: { type: "replace_suffix", expectedSuffix: all.slice(all.length - cut), replacement: [item(), item()] } };
      if (cut === 0 || r(4) === 0) tx.transaction.expectedSuffix = [{ role: "user", content: "not there" }];
      const [x, y] = await Promise.all([ours.applyHistoryTransaction(tx).then(() => "ok", (e) => e.name), model.applyHistoryTransaction(tx).then(() => "ok", () => "refused")]);
      assert.equal(x === "ok" ? "ok" : "refused", y, `step ${step}: replace_suffix gave ${x}`);
    }
    const limit = r(5) === 0 ? undefined : r(6);
    assert.deepEqual(await ours.getItems(limit), await model.getItems(limit), `step ${step}: getItems(${limit})`);
  }
});

test("a long session stays a few records: parts are merged, and none is left behind", async () => {
  const ws = client("oa-long");
  const s = new AgentspaceSession({ client: ws, prefix: unique("oa"), sessionId: "long", fanout: 3 });
  for (let i = 0; i < 40; i++) await s.addItems([{ role: "user", content: `q${i}` }, { role: "user", content: `a${i}` }]);
  const head = JSON.parse((await ws.artifacts.get(s.headName)).content);
  assert.ok(head.log.parts.length <= 2 * 4 + 1, `${head.log.parts.length} parts for 40 appends`);
  const stored = await ws.artifacts.list({ name_prefix: `${s.itemsFolder}/` });
  assert.equal(stored.artifacts.length, head.log.parts.length, "every part is listed by the head");
  const items = await new AgentspaceSession({ client: client(), prefix: s.prefix, sessionId: "long" }).getItems();
  assert.deepEqual(items.map(text), Array.from({ length: 40 }, (_, i) => [`q${i}`, `a${i}`]).flat());
});

test("items keep their bytes; bad input gets a typed refusal", async () => {
  const s = new AgentspaceSession({ client: client("oa-bytes"), prefix: unique("oa") });
  const data = new Uint8Array([0, 1, 2, 250, 255]);
  await s.addItems([{ role: "user", content: [{ type: "input_file", file: data, filename: "x.bin" }] }]);
  const [got] = await s.getItems();
  assert.ok(got.content[0].file instanceof Uint8Array);
  assert.deepEqual([...got.content[0].file], [...data]);
  assert.throws(() => new AgentspaceSession({ sessionId: "" }), TypeError);
  await assert.rejects(s.applyHistoryTransaction({ operationId: " ", transaction: { type: "append_items", items: [] } }), HistoryTransactionError);
  await assert.rejects(s.applyHistoryTransaction({ operationId: "x", transaction: { type: "drop_all" } }), HistoryTransactionError);
  await assert.rejects(s.acquire(), TypeError, "acquire needs the lease option");
  const popped = await s.popItem();
  assert.deepEqual([...popped.content[0].file], [...data]);
  assert.deepEqual(await s.getItems(), []);
});
