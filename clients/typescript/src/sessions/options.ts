/**
 * The options the session stores share (AgentspaceSession for the OpenAI
 * Agents SDK, AgentspaceSessionService for Google ADK).
 */
import type { Agentspace } from "../client.js";
import type { ClientOptions } from "../transport.js";
import type { LeaseOptions } from "./lease.js";

/** StoreOptions are what both session stores take. */
export interface StoreOptions {
  /** The client to use; default one built from clientOptions (or the environment). */
  client?: Agentspace;
  clientOptions?: ClientOptions;
  /**
   * Who writes. Under a lease, workers that must exclude each other need
   * different actors (behind a token, give each worker its own token).
   */
  actor?: string;
  /** Where the records live; each store names its default. */
  prefix?: string;
  /**
   * Hold a session's lease while using it: one worker at a time per
   * session, and a worker whose lease was taken from it is refused
   * (StaleFenceError or LockedError) at its next write. true for the
   * defaults (30 s TTL, no wait).
   */
  lease?: boolean | LeaseOptions;
  /** How many parts of one level are merged into one; default 8. */
  fanout?: number;
  /** How much item or event content to cache (bytes); default 32 MiB. */
  cacheBytes?: number;
}
