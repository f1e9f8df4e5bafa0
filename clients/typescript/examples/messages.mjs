import { Agentspace } from "@agentspace/client";

const lead = new Agentspace({ actor: "lead" });
const worker = new Agentspace({ actor: "worker-1" });
await worker.notes.put("status", "worker-1", { body: "ready" }); // an agent that has written may be messaged

await lead.messages.send({ to: ["worker-1"], subject: "rebase", body: "Rebase on main before you push.", requires_ack: true });

// An agent loop's wait: an unread message (here, at once), else it blocks
// until one comes or a task is ready to claim.
const work = await worker.waitForWork({ timeout: 60_000 });
for (const m of work.inbox.messages) {
  console.log(`${m.from} asks: ${m.subject}: ${m.body}`);
  await worker.inbox.markRead(m.id);
  if (m.pending?.includes("worker-1")) {
    const acked = await worker.messages.ack(m.id, { reply: "rebased" });
    console.log(`acked: ${acked.acks?.[0]?.reply}`);
  }
}
