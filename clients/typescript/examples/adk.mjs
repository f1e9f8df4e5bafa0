import { BaseLlm, LlmAgent, Runner } from "@google/adk";
import { AgentspaceSessionService } from "@agentspace/client/adk";

// A model that answers without a network call; leave it out to use Gemini.
class Model extends BaseLlm {
  constructor() {
    super({ model: "local" });
  }
  async *generateContentAsync(request) {
    const asked = request.contents.filter((c) => c.role === "user").length;
    yield { content: { role: "model", parts: [{ text: `question ${asked} of this session` }] } };
  }
  async connect() {
    throw new Error("no live mode");
  }
}

const sessionService = new AgentspaceSessionService({ actor: `worker-${process.pid}`, lease: true });
const agent = new LlmAgent({ name: "support", model: new Model(), instruction: "Answer briefly.", outputKey: "last_answer" });
const runner = new Runner({ appName: "support", agent, sessionService });
const session = await sessionService.createSession({ appName: "support", userId: "ann", state: { "user:name": "Ann" } });
for (const text of ["Where is my order?", "Can I change the address?"]) {
  for await (const event of runner.runAsync({ userId: "ann", sessionId: session.id, newMessage: { role: "user", parts: [{ text }] } })) {
    console.log(`${event.author}: ${event.content.parts[0].text}`);
  }
}
const stored = await sessionService.getSession({ appName: "support", userId: "ann", sessionId: session.id });
console.log(stored.events.length, "events; state:", JSON.stringify(stored.state));
await sessionService.close(); // gives up the session's lease
