// Lists the tools of `wsctl mcp` and runs claim -> write -> done through
// them with the official TypeScript SDK, then reads its inbox, acks the
// message waiting there and sends one. Usage: node client.mjs WSCTL DSN.
// Prints one JSON line of what it saw; exits non-zero on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [wsctl, dsn] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: wsctl,
  args: ["--dsn", dsn, "mcp"],
  env: { ...process.env, AGENTSPACE_ACTOR: "ts-agent" },
});
const client = new Client({ name: "ts-client-test", version: "1.0.0" });
await client.connect(transport);

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: ${res.content[0].text}`);
  return res.structuredContent;
}

const { tools } = await client.listTools();
const claim = await client.callTool({ name: "task_claim", arguments: { lease_seconds: 60 } });
if (claim.isError) throw new Error(`task_claim: ${claim.content[0].text}`);
const task = claim.structuredContent;
const notice = claim.content.length > 1 ? claim.content[1].text : "";
const art = await call("artifact_write", { name: "ts/out.md", content: "written by TypeScript\n", task_id: task.id });
const done = await call("task_update", { id: task.id, action: "done", summary: "ts did it", artifacts: [art.name] });
const conflict = await client.callTool({ name: "artifact_write", arguments: { name: "ts/out.md", content: "x", if_version: 7 } });
const inbox = await call("inbox", { mark_read: true });
const asked = inbox.messages.find((m) => m.requires_ack);
const acked = await call("message", { ack: asked.id, body: "done in ts" });
const sent = await call("message", { to: ["boss"], subject: "from ts", body: "the task is done", reply_to: asked.id });
console.log(JSON.stringify({
  notice,
  unread: inbox.unread,
  acked: acked.acks.map((a) => a.by),
  sent: sent.id,
  tools: tools.map((t) => t.name),
  claimed: task.id,
  version: art.version,
  status: done.status,
  conflict: conflict.isError ? conflict.structuredContent.error : "none",
}));
await client.close();
