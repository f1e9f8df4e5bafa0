// SessionLease: a lease on a session's head held for as long as a writer
// works on the session, renewed every third of its TTL.
//
// Invariant: every write of a leased session carries the lease's token as
// its fence, so once another writer has taken the lease (after this one's
// expired, or by a forced release) the server refuses this writer's writes
// (StaleFenceError, or LockedError while the other holds it): a superseded
// writer cannot pass, whatever it believes. A renewal that finds the lease
// taken marks it lost, and the writer refuses its own writes from then on
// without asking the server. A lease that expired with nobody taking it is
// renewed with its token: no one was let in, so nothing was superseded.

import type { Agentspace, Lease } from "../client.js";
import { ConnectionError } from "../errors.js";

/** LeaseOptions configure the leases of an adapter that holds them. */
export interface LeaseOptions {
  /** The lease's length (ms); renewed every third. Default 30000. */
  ttl?: number;
  /** How long to wait for a session another writer holds (ms); default 0: refuse at once (LockedError naming the holder). */
  wait?: number;
}

/** SessionLease is one held lease (see the file comment). */
export class SessionLease {
  readonly resource: string;
  /** The lease as the server issued it. */
  lease: Lease;
  /** Why the lease is lost, once it is. */
  lost: unknown;
  private timer?: NodeJS.Timeout;

  private constructor(
    private readonly ws: Agentspace,
    resource: string,
    lease: Lease,
    private readonly ttl: number,
    private readonly actor: string | undefined,
  ) {
    this.resource = resource;
    this.lease = lease;
    this.schedule(ttl / 3);
  }

  /** take acquires the lease on resource (LockedError when another holds it after wait). */
  static async take(ws: Agentspace, resource: string, actor: string | undefined, opts: LeaseOptions, message: string): Promise<SessionLease> {
    const ttl = opts.ttl ?? 30000;
    const lease = await ws.locks.acquire(resource, { ttl, wait: opts.wait || undefined, actor, message });
    return new SessionLease(ws, resource, lease, ttl, actor);
  }

  /** token is the fence every write of the session carries. */
  get token(): number {
    return this.lease.token;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => void this.renew(), ms);
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    if (this.lost !== undefined) return;
    try {
      this.lease = await this.ws.locks.renew(this.resource, { token: this.lease.token, ttl: this.ttl, actor: this.actor });
    } catch (e) {
      if (e instanceof ConnectionError) {
        this.schedule(Math.min(1000, this.ttl / 6));
        return;
      }
      this.lost = e;
      return;
    }
    this.schedule(this.ttl / 3);
  }

  /** check throws why the lease is lost, if it is. */
  check(): void {
    if (this.lost !== undefined) throw this.lost;
  }

  /** lose marks the lease lost with why (a write the server refused for its fence). */
  lose(why: unknown): void {
    this.lost ??= why;
    clearTimeout(this.timer);
  }

  /** release stops renewing and gives the lease up, if it is still this writer's. */
  async release(): Promise<void> {
    clearTimeout(this.timer);
    if (this.lost !== undefined) return;
    this.lost = new Error(`the lease on ${this.resource} was released`);
    await this.ws.locks.release(this.resource, { token: this.lease.token, actor: this.actor }).catch(() => undefined);
  }
}
