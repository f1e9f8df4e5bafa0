// A runner process for the cross-process race test: appends count turns of
// three items to one AgentspaceSession as fast as it can, then prints "done".
//   node append-worker.mjs PREFIX SESSION TAG COUNT
import { AgentspaceSession } from "../../dist/openai-agents/index.js";

const [prefix, sessionId, tag, count] = process.argv.slice(2);
const session = new AgentspaceSession({ prefix, sessionId, actor: `worker-${tag}`, clientOptions: { url: process.env.AGENTSPACE_URL } });
for (let i = 0; i < Number(count); i++) {
  await session.addItems([
    { role: "user", content: `${tag}:${i}:ask` },
    { role: "assistant", status: "completed", content: [{ type: "output_text", text: `${tag}:${i}:think` }] },
    { role: "assistant", status: "completed", content: [{ type: "output_text", text: `${tag}:${i}:answer` }] },
  ]);
}
console.log("done");
