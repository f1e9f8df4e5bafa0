// @agentspace/client/openai-agents: an OpenAI Agents SDK Session whose
// items are workspace records, appended with compare-and-set on the
// session's head, optionally under a lease whose fence a superseded runner
// cannot pass.

export { AgentspaceSession, HistoryTransactionError } from "./session.js";
export type { AgentspaceSessionOptions } from "./session.js";
export type { LeaseOptions } from "../sessions/lease.js";
