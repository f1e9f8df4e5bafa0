// @agentspace/client/adk: a Google ADK session service whose sessions,
// events and app-, user- and session-scoped state are workspace records;
// appendEvent is conditional on the session's version, optionally under a
// lease whose fence a superseded worker cannot pass.

export { AgentspaceSessionService, StaleSessionError } from "./service.js";
export type { AgentspaceSessionServiceOptions } from "./service.js";
export type { LeaseOptions } from "../sessions/lease.js";
