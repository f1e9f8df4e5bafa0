// Checkpoint put and getTuple latency: AgentspaceSaver (over wsctl serve)
// against @langchain/langgraph-checkpoint-sqlite and -postgres, in one run.
//
//   npm ci --prefix bench   # once: the two reference savers (better-sqlite3 compiles)
//   AGENTSPACE_URL=... PG_URL=postgres://... node bench/checkpoint.mjs [n]
import { performance } from "node:perf_hooks";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { AgentspaceSaver } from "../dist/langgraph/index.js";

const n = Number(process.argv[2] ?? 200);
const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];

// measure puts n checkpoints on a fresh thread with saver, each followed
// by a getTuple of the thread's latest by reader (default: the writer).
async function measure(label, saver, reader = saver) {
  const thread_id = randomUUID();
  let config = { configurable: { thread_id, checkpoint_ns: "" } };
  const puts = [], gets = [];
  for (let i = 0; i < n; i++) {
    const cp = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: [`m${i}`], step: i }, channel_versions: { messages: i + 1, step: i + 1 } };
    let t = performance.now();
    config = await saver.put(config, cp, { source: "loop", step: i, parents: {} }, { messages: i + 1, step: i + 1 });
    puts.push(performance.now() - t);
    t = performance.now();
    await reader.getTuple({ configurable: { thread_id, checkpoint_ns: "" } });
    gets.push(performance.now() - t);
  }
  return { label, put: median(puts), get: median(gets) };
}

const results = [];
const sqlite = SqliteSaver.fromConnString(join(mkdtempSync(join(tmpdir(), "cp-")), "cp.db"));
results.push(await measure("checkpoint-sqlite (in process)", sqlite));
let pg;
if (process.env.PG_URL) {
  pg = PostgresSaver.fromConnString(process.env.PG_URL, { schema: `bench_${Date.now()}` });
  await pg.setup();
  results.push(await measure("checkpoint-postgres (in process)", pg));
}
for (const url of [process.env.AGENTSPACE_URL, process.env.AGENTSPACE_URL_2].filter(Boolean)) {
  const prefix = `bench/${randomUUID()}`;
  const ours = new AgentspaceSaver({ prefix, actor: `bench-${process.pid}`, clientOptions: { url } });
  results.push(await measure(`AgentspaceSaver via ${url} (the writer reads its own thread from memory)`, ours));
  // A saver that does not hold the thread reads through the server: head, then checkpoint.
  const reader = new AgentspaceSaver({ prefix, actor: `reader-${process.pid}`, clientOptions: { url } });
  results.push(await measure(`AgentspaceSaver via ${url}, getTuple by another saver`, ours, reader));
  await ours.close();
}
await pg?.end();
const base = results[0];
for (const r of results) {
  console.log(`${r.label}: put ${(r.put * 1000).toFixed(0)} µs (x${(r.put / base.put).toFixed(2)}), getTuple ${(r.get * 1000).toFixed(0)} µs (x${(r.get / base.get).toFixed(2)})`);
}
