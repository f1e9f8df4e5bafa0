// @agentspace/client: a TypeScript client of `wsctl serve`, the agentspace
// HTTP API. No runtime dependencies: Node 20's fetch does the requests.

export * from "./errors.js";
export { Agentspace, artifactBytes, artifactText } from "./client.js";
export type { AgentPause, Artifact, ArtifactChange, BatchOp, BatchResult, Content, Event, EventPage, InboxEvent, InboxPage, InboxQuery, Lease, ListArtifacts, Msg, MsgAck, NewArtifact, NewMessage, Note, Ref, Status, Task, TaskResult, Write } from "./client.js";
export { Transport, duration, newKey } from "./transport.js";
export type { ClientOptions, Request } from "./transport.js";
export type { FollowOptions, InboxStreamOptions } from "./follow.js";
export { readyTasks } from "./wait.js";
export type { WaitForWorkOptions, Work } from "./wait.js";
export type { ClaimHandle, ClaimOptions, ClaimResult, LockHandle, LockOptions } from "./agent.js";
export type { components, operations, paths } from "./openapi.js";
