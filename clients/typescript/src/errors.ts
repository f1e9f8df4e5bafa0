// Typed errors: one class per problem code of the server (docs/http.md),
// mirroring the Go errors of package workspace. A client branches with
// instanceof, or on `code`, never on the status or the text.

import type { components } from "./openapi.js";

/** Problem is the RFC 9457 body of every error answer. */
export type Problem = components["schemas"]["Problem"];

/** Subject names the record an event or a conflict is about. */
export type Subject = components["schemas"]["Subject"];

/**
 * AgentspaceError is the base of every error this client throws for an
 * answer of the server: `code` is the stable problem code, `status` the
 * HTTP status, `batchIndex` the failing op of a batch.
 */
export class AgentspaceError extends Error {
  readonly code: string;
  readonly status: number;
  readonly detail: string;
  readonly batchIndex: number | undefined;
  readonly problem: Problem | undefined;

  constructor(code: string, status: number, detail: string, problem?: Problem) {
    super(detail || `${code} (HTTP ${status})`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.detail = detail;
    this.problem = problem;
    this.batchIndex = problem?.batch_index;
  }
}

/** ConflictError: a write's if_version was not the stored version. */
export class ConflictError extends AgentspaceError {
  /** The record the write was about. */
  readonly subject: Subject | undefined;
  /** The version the write expected. */
  readonly expected: number;
  /** The version stored now. */
  readonly current: number;
  constructor(code: string, status: number, detail: string, p?: Problem) {
    super(code, status, detail, p);
    this.subject = p?.subject;
    this.expected = p?.expected ?? 0;
    this.current = p?.current ?? 0;
  }
}

/** LockedError: the resource (or the record it guards) is leased by another owner. */
export class LockedError extends AgentspaceError {
  readonly resource: string;
  /** Who holds the lease. */
  readonly holder: string;
  readonly token: number;
  /** When the holder's lease ends unless renewed. */
  readonly expiresAt: Date | undefined;
  constructor(code: string, status: number, detail: string, p?: Problem) {
    super(code, status, detail, p);
    this.resource = p?.resource ?? "";
    this.holder = p?.holder ?? "";
    this.token = p?.token ?? 0;
    this.expiresAt = p?.expires_at ? new Date(p.expires_at) : undefined;
  }
}

/**
 * PausedError: the actor is paused by an operator (423 `paused`). Its
 * writes are refused until it is resumed, but acks, lock renewals, task
 * heartbeats and releases pass: ack the pause message (type `pause`, in
 * `inbox.read({ unacked: true })`) and wait for the resume.
 */
export class PausedError extends AgentspaceError {
  /** The paused actor. */
  readonly actor: string;
  /** The operator who paused it. */
  readonly by: string;
  /** When it was paused. */
  readonly since: Date | undefined;
  constructor(code: string, status: number, detail: string, p?: Problem) {
    super(code, status, detail, p);
    this.actor = p?.actor ?? "";
    this.by = p?.by ?? "";
    this.since = p?.since ? new Date(p.since) : undefined;
  }
}

/** StaleFenceError: the write's fence is older than the newest token of the record's lock. */
export class StaleFenceError extends AgentspaceError {
  readonly resource: string;
  readonly fence: number;
  readonly newest: number;
  constructor(code: string, status: number, detail: string, p?: Problem) {
    super(code, status, detail, p);
    this.resource = p?.resource ?? "";
    this.fence = p?.fence ?? 0;
    this.newest = p?.newest ?? 0;
  }
}

/** CompactedError: the log was compacted past the seq asked for; re-read current state. */
export class CompactedError extends AgentspaceError {
  readonly requested: number;
  readonly floor: number;
  constructor(code: string, status: number, detail: string, p?: Problem) {
    super(code, status, detail, p);
    this.requested = p?.requested ?? 0;
    this.floor = p?.floor ?? 0;
  }
}

/**
 * RewoundError: the event log went back (410 `rewound`): the database failed
 * over to a standby that had not replayed events this client saw or wrote, so
 * a seq it holds may now name another event. Nothing was written; re-read the
 * state and follow again from the log's head.
 */
export class RewoundError extends AgentspaceError {}

/** InvalidError: bad input; `field` names which and `reason` says why. Nothing was written. */
export class InvalidError extends AgentspaceError {
  readonly field: string;
  readonly reason: string;
  constructor(code: string, status: number, detail: string, p?: Problem) {
    super(code, status, detail, p);
    this.field = p?.field ?? "";
    this.reason = p?.reason ?? "";
  }
}

/** TooLargeError: content or a body over the workspace's size limit (an InvalidError). */
export class TooLargeError extends InvalidError {}
/** NotFoundError: no such record. */
export class NotFoundError extends AgentspaceError {}
/** AlreadyExistsError: a live record already has that name. */
export class AlreadyExistsError extends AgentspaceError {}
/** NoTaskError: no task is ready to claim. */
export class NoTaskError extends AgentspaceError {}
/** NotHolderError: a release or renew by someone who does not hold the lease. */
export class NotHolderError extends AgentspaceError {}
/** LockLostError: the lease expired and was taken by another owner. */
export class LockLostError extends AgentspaceError {}
/** ForbiddenError: the token's actor may not do this. */
export class ForbiddenError extends AgentspaceError {}
/** UnauthorizedError: no token where one is required, or a bad one. */
export class UnauthorizedError extends AgentspaceError {}
/** TooManyError: the token holds as many streams as the server allows it (429 `too_many`); end one first. */
export class TooManyError extends AgentspaceError {}
/** UnavailableError: the server or its store cannot answer now (closed, schema, draining, timeout). */
export class UnavailableError extends AgentspaceError {}

/**
 * ConnectionError: no answer at all (server down, connection dropped),
 * after the retries the call allowed. A write that carried an idempotency
 * key may be repeated safely with the same key.
 */
export class ConnectionError extends AgentspaceError {
  constructor(detail: string, options?: { cause?: unknown }) {
    super("connection", 0, detail);
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

/** ProtocolError: an answer that is not what the API promises (a malformed body, a truncated stream). */
export class ProtocolError extends AgentspaceError {
  constructor(status: number, detail: string) {
    super("protocol", status, detail);
  }
}

type ErrorClass = new (code: string, status: number, detail: string, p?: Problem) => AgentspaceError;

const classOf: Record<string, ErrorClass> = {
  conflict: ConflictError,
  locked: LockedError,
  paused: PausedError,
  too_many: TooManyError,
  stale_fence: StaleFenceError,
  compacted: CompactedError,
  rewound: RewoundError,
  invalid: InvalidError,
  too_large: TooLargeError,
  not_found: NotFoundError,
  no_route: NotFoundError,
  already_exists: AlreadyExistsError,
  no_task: NoTaskError,
  not_holder: NotHolderError,
  lock_lost: LockLostError,
  forbidden: ForbiddenError,
  unauthorized: UnauthorizedError,
  closed: UnavailableError,
  schema: UnavailableError,
  no_workspace: UnavailableError,
  unavailable: UnavailableError,
  timeout: UnavailableError,
};

/**
 * errorFromProblem builds the typed error of an error answer. A body that
 * is not a problem gives a ProtocolError naming the status, never a bare
 * status code.
 */
export function errorFromProblem(status: number, body: string): AgentspaceError {
  let p: Problem | undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === "object" && typeof (parsed as Problem).code === "string") p = parsed as Problem;
  } catch {
    p = undefined;
  }
  if (!p) {
    return new ProtocolError(status, `HTTP ${status} with a body that is not a problem: ${body.slice(0, 200)}`);
  }
  const cls = classOf[p.code] ?? AgentspaceError;
  return new cls(p.code, status, p.detail ?? p.title, p);
}
