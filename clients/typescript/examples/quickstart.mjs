import { Agentspace, ConflictError } from "@agentspace/client";

const ws = new Agentspace(); // AGENTSPACE_DSN (or AGENTSPACE_URL), AGENTSPACE_TOKEN (or AGENTSPACE_ACTOR on loopback)
const plan = await ws.artifacts.create({ name: `plans/${Date.now()}.md`, content: "# Plan\n" });
try {
  await ws.artifacts.update(plan.name, { content: "# Plan v2\n", if_version: plan.version + 1 });
} catch (e) {
  if (!(e instanceof ConflictError)) throw e;
  console.log(`conflict: current version is ${e.current}`);
}
await ws.withLock(`artifact:${plan.name}`, async ({ ws: fenced }) => {
  await fenced.artifacts.update(plan.name, { content: "# Plan v2\n" }); // carries the lease's fence
}, { ttl: 30_000 });
for await (const ev of ws.follow({ after: 0, subject_name: plan.name })) {
  console.log(ev.seq, ev.type);
  if (ev.type === "artifact.updated") break;
}
