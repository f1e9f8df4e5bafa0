// @agentspace/client: a TypeScript client of `wsctl serve`, the agentspace
// HTTP API. No runtime dependencies: Node 20's fetch does the requests.

export * from "./errors.js";
export { Agentspace, artifactBytes, artifactText } from "./client.js";
export type { Artifact, ArtifactChange, BatchOp, BatchResult, Content, Event, EventPage, Lease, ListArtifacts, NewArtifact, Note, Ref, Status, Task, TaskResult, Write } from "./client.js";
export { Transport, duration, newKey } from "./transport.js";
export type { ClientOptions, Request } from "./transport.js";
export type { FollowOptions } from "./follow.js";
export type { ClaimHandle, ClaimOptions, ClaimResult, LockHandle, LockOptions } from "./agent.js";
export type { components, operations, paths } from "./openapi.js";
