// Per-call overhead of the client against a bare fetch doing the same
// request, for a read and a conditional write, interleaved in one run;
// then follow() throughput while a writer commits as fast as it can.
//
//   AGENTSPACE_URL=http://127.0.0.1:7465 node bench/client.mjs [iterations]
import { performance } from "node:perf_hooks";
import { Agentspace } from "../dist/index.js";

const url = process.env.AGENTSPACE_URL ?? "http://127.0.0.1:7465";
const n = Number(process.argv[2] ?? 300);
const ws = new Agentspace({ url, actor: "bench" });
const name = `bench/${Date.now()}.md`;
let a = await ws.artifacts.create({ name, content: "x" });
const path = `${url}/v1/artifacts/${encodeURIComponent(name)}`;
const headers = { "x-agentspace-actor": "bench", accept: "application/json" };

const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];
async function time(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

const rows = { read: { client: [], fetch: [] }, write: { client: [], fetch: [] } };
let version = a.version;
for (let i = 0; i < n; i++) {
  rows.read.client.push(await time(() => ws.artifacts.get(name)));
  rows.read.fetch.push(await time(async () => (await fetch(path, { headers })).json()));
  rows.write.client.push(await time(async () => (version = (await ws.artifacts.update(name, { content: `c${i}`, if_version: version })).version)));
  rows.write.fetch.push(
    await time(async () => {
      const r = await fetch(path, {
        method: "PATCH",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ content: `f${i}`, if_version: version }),
      });
      version = (await r.json()).version;
    }),
  );
}
for (const [op, r] of Object.entries(rows)) {
  const c = median(r.client), f = median(r.fetch);
  console.log(`${op}: client ${(c * 1000).toFixed(0)} µs, bare fetch ${(f * 1000).toFixed(0)} µs, ratio ${(c / f).toFixed(2)}`);
}

// follow throughput: 8 writers in flight for 5 s; the follower counts.
const after = await ws.events.head();
const ctl = new AbortController();
let seen = 0;
const reading = (async () => {
  for await (const _ of ws.follow({ after, signal: ctl.signal })) seen++;
})();
let written = 0;
const stopAt = performance.now() + 5000;
await Promise.all(
  Array.from({ length: 8 }, async (_, w) => {
    for (let i = 0; performance.now() < stopAt; i++) {
      await ws.notes.put("bench", `w${w}-${i}-${Date.now()}`, { title: "t", body: "b" });
      written++;
    }
  }),
);
const head = await ws.events.head();
const t0 = performance.now();
while (seen < head - after && performance.now() - t0 < 10000) await new Promise((r) => setTimeout(r, 5));
const secs = (performance.now() - stopAt + 5000) / 1000;
ctl.abort();
await reading.catch(() => undefined);
console.log(`follow: ${seen} events in ${secs.toFixed(1)} s = ${(seen / secs).toFixed(0)} events/s; the writer committed ${(written / 5).toFixed(0)}/s; behind at the end: ${head - after - seen}`);
