// The official LangGraph checkpoint saver validation suite, unchanged, run
// by vitest (its runner) against AgentspaceSaver on AGENTSPACE_URL. The
// suite's own CLI cannot load an initializer in this release, so it is run
// as its README's "existing test suite" form: validate(initializer).
import { validate, deltaChannelHistoryTests } from "@langchain/langgraph-checkpoint-validation";
import initializer from "./initializer.mjs";

validate(initializer);
deltaChannelHistoryTests(initializer);
