// The initializer the official @langchain/langgraph-checkpoint-validation
// suite runs our saver with (validation/saver.spec.mjs): each checkpointer gets
// its own prefix, so the suite's instances share nothing.
import { randomUUID } from "node:crypto";
import { AgentspaceSaver } from "../dist/langgraph/index.js";

export default {
  checkpointerName: "@agentspace/client/langgraph",
  createCheckpointer() {
    return new AgentspaceSaver({ prefix: `validate/${randomUUID()}`, actor: `validator-${randomUUID()}` });
  },
  async destroyCheckpointer(saver) {
    await saver.close();
  },
};
