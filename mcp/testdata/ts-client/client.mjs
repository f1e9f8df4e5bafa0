// Lists the tools of `wsctl mcp` and runs claim -> write -> done through
// them with the official TypeScript SDK. Usage: node client.mjs WSCTL DSN.
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
const task = await call("task_claim", { lease_seconds: 60 });
const art = await call("artifact_write", { name: "ts/out.md", content: "written by TypeScript\n", task_id: task.id });
const done = await call("task_update", { id: task.id, action: "done", summary: "ts did it", artifacts: [art.name] });
const conflict = await client.callTool({ name: "artifact_write", arguments: { name: "ts/out.md", content: "x", if_version: 7 } });
console.log(JSON.stringify({
  tools: tools.map((t) => t.name),
  claimed: task.id,
  version: art.version,
  status: done.status,
  conflict: conflict.isError ? conflict.structuredContent.error : "none",
}));
await client.close();
