// A message's hand-over: from the sender's send() call to the moment the
// recipient's wait returns with it, through the inbox stream (SSE),
// through the inbox's long poll, and through reading the inbox every
// second as agents without a wake-up do. Sender and recipient are two
// clients in this process (one clock); p50 and p99 in ms, as JSON.
//
//   AGENTSPACE_URL=http://127.0.0.1:7465 node bench/messages.mjs [samples] [polled samples]
import { performance } from "node:perf_hooks";
import { randomUUID } from "node:crypto";
import { Agentspace } from "../dist/index.js";

const url = process.env.AGENTSPACE_URL ?? "http://127.0.0.1:7465";
const n = Number(process.argv[2] ?? 200);
const polled = Number(process.argv[3] ?? 30);
const tag = randomUUID().slice(0, 8);
const lead = new Agentspace({ url, actor: `bench-lead-${tag}` });
const bob = new Agentspace({ url, actor: `bench-bob-${tag}` });
await bob.notes.put("bench", `bob-${tag}`, { body: "ready" });
await lead.notes.put("bench", `lead-${tag}`, { body: "ready" });
const to = [`bench-bob-${tag}`];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const fig = (xs) => ({ p50_ms: +pct(xs, 50).toFixed(2), p99_ms: +pct(xs, 99).toFixed(2), n: xs.length });

// SSE: the stream is open and idle when each message is sent.
const sse = [];
{
  const ctl = new AbortController();
  const it = bob.inbox.stream({ after: await bob.events.head(), signal: ctl.signal });
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const m = await lead.messages.send({ to, body: `sse ${i}` });
    for (;;) {
      const r = (await it.next()).value;
      if (r.message.id === m.id) break;
    }
    sse.push(performance.now() - t0);
    await bob.inbox.markRead(m.id);
  }
  ctl.abort();
  await it.next();
}

// Long poll: the recipient's wait is in place when each message is sent.
const longPoll = [];
for (let i = 0; i < n; i++) {
  let done;
  const waiting = bob.inbox.read({ unread: true, wait: 30000 }).then((p) => (done = performance.now(), p));
  await sleep(5); // the poll reaches the server and waits
  const t0 = performance.now();
  await lead.messages.send({ to, body: `poll ${i}` });
  const page = await waiting;
  longPoll.push(done - t0);
  await bob.inbox.markRead(page.messages.at(-1).id);
}

// Polling every second: the send lands at a random moment of the period.
const everySecond = [];
for (let i = 0; i < polled; i++) {
  let stop = false;
  const seen = (async () => {
    for (;;) {
      const p = await bob.inbox.read({ unread: true });
      if (p.messages.length > 0) return [performance.now(), p];
      if (stop) return [NaN, p];
      await sleep(1000);
    }
  })();
  await sleep(Math.random() * 1000);
  const t0 = performance.now();
  await lead.messages.send({ to, body: `polled ${i}` });
  const [at, page] = await seen;
  stop = true;
  everySecond.push(at - t0);
  await bob.inbox.markRead(page.messages.at(-1).id);
}

console.log(JSON.stringify({ sse: fig(sse), long_poll: fig(longPoll), poll_every_1s: fig(everySecond) }));
