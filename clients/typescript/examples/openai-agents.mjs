import { Agent, Runner, Usage, setTracingDisabled } from "@openai/agents";
import { AgentspaceSession } from "@agentspace/client/openai-agents";

// A model that answers without a network call; leave it out to use OpenAI's.
const model = {
  async getResponse({ input }) {
    const asked = [].concat(input).filter((item) => item.role === "user").length;
    const text = `question ${asked} of this conversation`;
    return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }] };
  },
  async *getStreamedResponse() {},
};
setTracingDisabled(true);

const agent = new Agent({ name: "support", instructions: "Answer briefly.", model });
// Every worker that serves this conversation opens the same session id.
const session = new AgentspaceSession({ sessionId: `ticket-${Date.now()}`, actor: `worker-${process.pid}`, lease: true });
const runner = new Runner();
console.log((await runner.run(agent, "Where is my order?", { session })).finalOutput);
console.log((await runner.run(agent, "Can I change the address?", { session })).finalOutput);
console.log((await session.getItems()).length, "items, listed by", session.headName);
await session.close(); // gives up the session's lease
