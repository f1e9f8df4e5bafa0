// Append latency (p50/p99) of the agent SDKs' session stores: the OpenAI
// Agents SDK's MemorySession and the file session of its examples against
// AgentspaceSession, and ADK's InMemorySessionService against
// AgentspaceSessionService, each through `wsctl serve`; then a fresh
// reader's full read of the session, and four writers on one session.
//
// The SDKs are the client's own dev dependencies: `npm ci` here is enough
// (not bench/'s package.json, which is the LangGraph savers').
//
//   AGENTSPACE_URL=... [AGENTSPACE_URL_2=...] node bench/sessions.mjs [n]
import { performance } from "node:perf_hooks";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { MemorySession } from "@openai/agents";
import { InMemorySessionService, createEvent } from "@google/adk";
import { AgentspaceSession } from "../dist/openai-agents/index.js";
import { AgentspaceSessionService } from "../dist/adk/index.js";
import { FileSession } from "../test/lib/filesession.mjs";

const n = Number(process.argv[2] ?? 300);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const ms = (x) => (x < 1 ? x.toFixed(3) : x.toFixed(2));
const rows = [];
function row(label, xs) {
  rows.push(`${label}: p50 ${ms(pct(xs, 0.5))} ms, p99 ${ms(pct(xs, 0.99))} ms (n=${xs.length})`);
}
async function timed(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

// A turn as a runner stores it: the user's message and the model's answer.
const turn = (i) => [
  { role: "user", content: `question ${i}: where is my order, and can the address still change?` },
  { role: "assistant", status: "completed", content: [{ type: "output_text", text: `answer ${i}: it ships tomorrow; the address can change until then.` }] },
];

async function appends(session) {
  const xs = [];
  for (let i = 0; i < n; i++) xs.push(await timed(() => session.addItems(turn(i))));
  return xs;
}

row("openai-agents MemorySession (in process) addItems", await appends(new MemorySession()));
row("openai-agents examples' FileSession addItems", await appends(new FileSession(join(mkdtempSync(join(tmpdir(), "fs-")), "s.json"), "s")));

const event = (i) =>
  createEvent({ invocationId: `inv-${i >> 1}`, author: i % 2 ? "support" : "user", content: { role: i % 2 ? "model" : "user", parts: [{ text: `message ${i} of the conversation, about an order and its address` }] }, actions: { stateDelta: { turn: i } } });
async function events(svc) {
  const s = await svc.createSession({ appName: "bench", userId: "u", sessionId: randomUUID() });
  const xs = [];
  for (let i = 0; i < n; i++) xs.push(await timed(() => svc.appendEvent({ session: s, event: event(i) })));
  return xs;
}
row("adk InMemorySessionService (in process) appendEvent", await events(new InMemorySessionService()));

for (const url of [process.env.AGENTSPACE_URL, process.env.AGENTSPACE_URL_2].filter(Boolean)) {
  const prefix = `bench/${randomUUID()}`;
  const clientOptions = { url };
  const s = new AgentspaceSession({ prefix, sessionId: "one", actor: `bench-${process.pid}`, clientOptions });
  row(`AgentspaceSession via ${url} addItems`, await appends(s));
  const leased = new AgentspaceSession({ prefix, sessionId: "leased", actor: `bench-${process.pid}`, clientOptions, lease: true });
  row(`AgentspaceSession via ${url} addItems, under a lease (fenced)`, await appends(leased));
  await leased.close();
  const reads = [];
  for (let i = 0; i < 20; i++) reads.push(await timed(() => new AgentspaceSession({ prefix, sessionId: "one", clientOptions }).getItems()));
  row(`AgentspaceSession via ${url} getItems of ${2 * n} items by a fresh reader`, reads);
  const warm = [];
  for (let i = 0; i < 20; i++) warm.push(await timed(() => s.getItems()));
  row(`AgentspaceSession via ${url} getItems of ${2 * n} items by the writer (parts cached)`, warm);
  // Four writers on one session at once, each its own client: every append retried until it lands.
  const shared = [];
  await Promise.all(
    Array.from({ length: 4 }, async (_, w) => {
      const mine = new AgentspaceSession({ prefix, sessionId: "shared", actor: `bench-${w}`, clientOptions });
      for (let i = 0; i < n / 4; i++) shared.push(await timed(() => mine.addItems(turn(i))));
    }),
  );
  row(`AgentspaceSession via ${url} addItems, 4 writers on one session`, shared);
  // The same four, each taking the session's lease (waiting for it) around each append.
  const queued = [];
  await Promise.all(
    Array.from({ length: 4 }, async (_, w) => {
      const mine = new AgentspaceSession({ prefix, sessionId: "queued", actor: `bench-${w}`, clientOptions, lease: { ttl: 10000, wait: 60000 } });
      for (let i = 0; i < n / 4; i++) {
        queued.push(
          await timed(async () => {
            await mine.acquire();
            await mine.addItems(turn(i));
            await mine.release();
          }),
        );
      }
    }),
  );
  row(`AgentspaceSession via ${url} acquire + addItems + release, 4 writers on one session`, queued);

  const svc = new AgentspaceSessionService({ prefix, actor: `bench-${process.pid}`, clientOptions });
  row(`AgentspaceSessionService via ${url} appendEvent`, await events(svc));
  const fenced = new AgentspaceSessionService({ prefix, actor: `bench-${process.pid}`, clientOptions, lease: true });
  row(`AgentspaceSessionService via ${url} appendEvent, under a lease (fenced)`, await events(fenced));
  await fenced.close();
}
for (const r of rows) console.log(r);
