// follow() over a dropped connection and a restarted server: every event
// once, in order, none missing.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { Agentspace } from "../dist/index.js";
import { client, startServer, unique } from "./lib/helpers.mjs";

// collect gathers events until n of them are about names under prefix.
async function collect(it, prefix, n, out) {
  let mine = 0;
  for await (const ev of it) {
    out.push(ev);
    if (ev.subject.name.startsWith(prefix) && ++mine === n) return;
  }
}

function assertGapless(events, subject) {
  const mine = events.filter((e) => e.subject.name.startsWith(subject));
  const seqs = events.map((e) => e.seq);
  assert.deepEqual([...seqs].sort((a, b) => a - b), seqs, "in order");
  assert.equal(new Set(seqs).size, seqs.length, "no duplicate");
  return mine;
}

test("follow survives dropped connections: no gap, no duplicate", async () => {
  const writer = client();
  // A proxy whose connections the test cuts.
  const target = new URL(writer.transport.url);
  const sockets = new Set();
  const proxy = net.createServer((c) => {
    const up = net.connect(Number(target.port), target.hostname);
    sockets.add(c);
    sockets.add(up);
    c.pipe(up).pipe(c);
    const done = () => {
      c.destroy();
      up.destroy();
    };
    c.on("error", done).on("close", done);
    up.on("error", done).on("close", done);
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
  const reader = new Agentspace({ url: `http://127.0.0.1:${proxy.address().port}` });
  const prefix = unique("ts/follow");
  const after = await writer.events.head();
  const n = 30;
  const got = [];
  const ctl = new AbortController();
  const reading = collect(reader.follow({ after, subject_kind: "artifact", signal: ctl.signal, heartbeat: 200 }), prefix, n, got);
  for (let i = 0; i < n; i++) {
    await writer.artifacts.create({ name: `${prefix}/${i}`, content: String(i) });
    if (i % 7 === 3) for (const s of sockets) s.destroy();
  }
  await reading;
  ctl.abort();
  proxy.close();
  const mine = assertGapless(got, prefix);
  assert.deepEqual(mine.map((e) => e.subject.name), Array.from({ length: n }, (_, i) => `${prefix}/${i}`));
});

test("follow survives a server restart and resumes after its last seq", async () => {
  const first = await startServer(0);
  const port = Number(new URL(first.url).port);
  const ws = new Agentspace({ url: first.url, actor: "restarter" });
  const prefix = unique("ts/restart");
  const after = await ws.events.head();
  const got = [];
  const ctl = new AbortController();
  const reading = collect(ws.follow({ after, subject_kind: "artifact", signal: ctl.signal, heartbeat: 200 }), prefix, 10, got);
  for (let i = 0; i < 5; i++) await ws.artifacts.create({ name: `${prefix}/${i}`, content: "x" });
  await first.stop();
  // Written while no server runs: the follower must still get these.
  const other = client();
  for (let i = 5; i < 8; i++) await other.artifacts.create({ name: `${prefix}/${i}`, content: "x" });
  const second = await startServer(port);
  for (let i = 8; i < 10; i++) await ws.artifacts.create({ name: `${prefix}/${i}`, content: "x" });
  await reading;
  ctl.abort();
  await second.stop();
  const mine = assertGapless(got, prefix);
  assert.deepEqual(mine.map((e) => e.subject.name), Array.from({ length: 10 }, (_, i) => `${prefix}/${i}`));
});
