// Helpers for the agent loop: a claim kept alive by heartbeats, a lock
// held for the length of a callback. Each keeps a timer that renews the
// lease at a third of its length, and stops it before returning.

import type { Agentspace, Lease, Task } from "./client.js";
import { duration } from "./transport.js";

/** ClaimOptions tune withClaim. */
export interface ClaimOptions {
  /** The claim's lease (ms or "5m"); default 60000. Heartbeats renew it every third. */
  lease?: number;
  /** Wait this long for a ready task (ms); default: don't wait. */
  wait?: number;
  labels?: Record<string, string>;
  parent_id?: string;
}

/** ClaimHandle is what withClaim's callback gets. */
export interface ClaimHandle {
  task: Task;
  /** Aborts when a heartbeat finds the claim lost. */
  signal: AbortSignal;
}

/** The result a claim callback may return to complete its task with. */
export interface ClaimResult {
  summary?: string;
  artifacts?: string[];
}

function keepAlive(every: number, beat: () => Promise<unknown>, lost: (e: unknown) => void): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout;
  const tick = async () => {
    try {
      await beat();
    } catch (e) {
      lost(e);
      return;
    }
    if (!stopped) timer = setTimeout(tick, every);
  };
  timer = setTimeout(tick, every);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** withClaim: see Agentspace.withClaim. */
export async function withClaim<T>(ws: Agentspace, fn: (c: ClaimHandle) => Promise<T>, opts: ClaimOptions = {}): Promise<T> {
  const lease = opts.lease ?? 60000;
  const task = await ws.tasks.claim({ lease, wait: opts.wait, labels: opts.labels, parent_id: opts.parent_id });
  const ctl = new AbortController();
  const stop = keepAlive(
    Math.max(10, lease / 3),
    () => ws.tasks.heartbeat(task.id, { lease: duration(lease) }),
    (e) => ctl.abort(e),
  );
  let out: T;
  try {
    out = await fn({ task, signal: ctl.signal });
  } catch (e) {
    stop();
    if (!ctl.signal.aborted) await ws.tasks.fail(task.id, { summary: String((e as Error)?.message ?? e) });
    throw e;
  }
  stop();
  if (ctl.signal.aborted) throw ctl.signal.reason;
  const r = (out ?? {}) as ClaimResult;
  await ws.tasks.complete(task.id, { summary: typeof r.summary === "string" ? r.summary : undefined, artifacts: Array.isArray(r.artifacts) ? r.artifacts : undefined });
  return out;
}

/** LockOptions tune withLock. */
export interface LockOptions {
  /** The lease's length (ms); it is renewed every third while the callback runs. */
  ttl: number;
  /** Wait this long for the lease (ms); default: don't wait (LockedError when held). */
  wait?: number;
  message?: string;
}

/** LockHandle is what withLock's callback gets. */
export interface LockHandle {
  lease: Lease;
  /** A view of the client whose writes carry the lease's fence. */
  ws: Agentspace;
  /** Aborts when a renewal finds the lease lost. */
  signal: AbortSignal;
}

/** withLock: see Agentspace.withLock. */
export async function withLock<T>(ws: Agentspace, resource: string, fn: (l: LockHandle) => Promise<T>, opts: LockOptions): Promise<T> {
  const lease = await ws.locks.acquire(resource, { ttl: opts.ttl, wait: opts.wait, message: opts.message });
  const ctl = new AbortController();
  const stop = keepAlive(
    Math.max(10, opts.ttl / 3),
    () => ws.locks.renew(resource, { token: lease.token, ttl: opts.ttl }),
    (e) => ctl.abort(e),
  );
  try {
    return await fn({ lease, ws: ws.fenced(lease.token), signal: ctl.signal });
  } finally {
    stop();
    if (!ctl.signal.aborted) {
      await ws.locks.release(resource, { token: lease.token }).catch(() => undefined);
    }
  }
}
