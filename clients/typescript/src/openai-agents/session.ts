// AgentspaceSession: an OpenAI Agents SDK Session whose items live in an
// agentspace workspace.
//
// Layout, under a prefix (default "openai-agents"):
//   PREFIX/sessions/SESSION               the head: which parts hold the items, in order
//   PREFIX/items/SESSION/EPOCH-SEQ        one part: a JSON array of items
//
// Invariant: every change of a session is one batch that writes the head
// with the version this writer read as its if_version (and, under a lease,
// the lease's token as its fence), together with the parts it creates and
// deletes. So two writers can never both commit against one head: the
// loser's batch commits nothing and it reads the head again and retries. An
// addItems call is one part, whole, after every part committed before it:
// no append is lost, and no append's items are split by another's.

import { createHash, randomUUID } from "node:crypto";
import type { AgentInputItem, SessionHistoryTransactionArgs, SessionHistoryTransactionAwareSession } from "@openai/agents";
import { Agentspace, artifactText, type BatchOp, type Lease } from "../client.js";
import { AgentspaceError, LockedError, NotFoundError, StaleFenceError } from "../errors.js";
import { seg } from "../langgraph/names.js";
import { PartLog, canonical, decode, encode, failedOp, freshLog, moved, retrying, total, type LogState } from "../sessions/log.js";
import { SessionLease, type LeaseOptions } from "../sessions/lease.js";
import type { StoreOptions } from "../sessions/options.js";

/**
 * AgentspaceSessionOptions configure an AgentspaceSession: StoreOptions,
 * with the records under "openai-agents" by default, and the session's id.
 */
export interface AgentspaceSessionOptions extends StoreOptions {
  /** The session's id; default a new random one. Runners that share a conversation share it. */
  sessionId?: string;
}

/**
 * HistoryTransactionError: a history transaction that must not apply: its
 * operation id was used for another transaction, or the suffix it replaces
 * is not the session's. Nothing was written.
 */
export class HistoryTransactionError extends AgentspaceError {
  constructor(detail: string) {
    super("history_transaction", 409, detail);
  }
}

/** The head's content. */
interface HeadDoc {
  session_id: string;
  log: LogState;
  /** The last history transactions applied: operation id, digest of the transaction. */
  ops?: [string, string][];
}

interface Head {
  /** 0: there is no head yet. */
  version: number;
  doc: HeadDoc;
}

/**
 * What a change of the head does: none, or the new head with the ops and
 * parts of its batch, and whether to merge parts after it (an append).
 */
type Change<T> = { result: T; none: true } | { result: T; doc: HeadDoc; ops: BatchOp[]; created: Map<string, AgentInputItem[]>; merge?: boolean };

/** How many applied transactions a head remembers. */
const keptOps = 64;

/**
 * AgentspaceSession is a Session (and a SessionHistoryTransactionAwareSession)
 * of the OpenAI Agents SDK whose items are workspace records; see the file
 * comment for its guarantees.
 */
export class AgentspaceSession implements SessionHistoryTransactionAwareSession {
  readonly ws: Agentspace;
  readonly prefix: string;
  readonly actor: string | undefined;
  readonly sessionId: string;
  private readonly log: PartLog<AgentInputItem>;
  private readonly leaseOpts: LeaseOptions | undefined;
  private held?: SessionLease;
  private head?: Head;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(opts: AgentspaceSessionOptions = {}) {
    this.ws = opts.client ?? new Agentspace(opts.clientOptions);
    this.prefix = (opts.prefix ?? "openai-agents").replace(/\/+$/, "");
    this.actor = opts.actor;
    this.sessionId = opts.sessionId ?? randomUUID();
    if (this.sessionId === "") throw new TypeError("AgentspaceSession: the session id is empty");
    this.leaseOpts = opts.lease === true ? {} : opts.lease || undefined;
    this.log = new PartLog<AgentInputItem>(this.ws, { kind: "session-items", fanout: opts.fanout, cacheBytes: opts.cacheBytes });
  }

  /** headName is the session's head artifact. */
  get headName(): string {
    return `${this.prefix}/sessions/${seg(this.sessionId)}`;
  }

  /** itemsFolder is where the session's parts live. */
  get itemsFolder(): string {
    return `${this.prefix}/items/${seg(this.sessionId)}`;
  }

  /** leaseResource is the lock a leased session's runner holds. */
  get leaseResource(): string {
    return `artifact:${this.headName}`;
  }

  /** getSessionId returns the session's id. */
  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /**
   * acquire takes the session's lease now (LockedError naming the holder
   * when another runner holds it), or returns the one held. After a loss it
   * takes the lease anew.
   */
  async acquire(): Promise<Lease> {
    return this.serial(async () => (await this.lease(true))!.lease);
  }

  /** release gives the lease up, if held: another runner may take the session. */
  async release(): Promise<void> {
    await this.serial(async () => {
      const h = this.held;
      this.held = undefined;
      await h?.release();
    });
  }

  /** close releases the lease, if held. */
  close(): Promise<void> {
    return this.release();
  }

  // lease returns the held lease (taking it if need be) under a lease, or
  // undefined; a lost lease is refused until acquire takes it anew.
  private async lease(retake = false): Promise<SessionLease | undefined> {
    if (!this.leaseOpts) {
      if (retake) throw new TypeError("AgentspaceSession: acquire needs the lease option");
      return undefined;
    }
    if (this.held && this.held.lost !== undefined && retake) this.held = undefined;
    if (!this.held) {
      this.held = await SessionLease.take(this.ws, this.leaseResource, this.actor, this.leaseOpts, `openai-agents session ${this.sessionId}`);
      this.head = undefined;
    }
    this.held.check();
    return this.held;
  }

  private serial<T>(op: () => Promise<T>): Promise<T> {
    const next = this.queue.then(op, op);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async readHead(): Promise<Head> {
    try {
      const a = await this.ws.artifacts.get(this.headName);
      return { version: a.version, doc: decode<HeadDoc>(artifactText(a)) };
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      return { version: 0, doc: { session_id: this.sessionId, log: freshLog() } };
    }
  }

  /** getItems returns the last limit items (all without limit), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (this.leaseOpts) await this.serial(() => this.lease());
    return retrying(
      this.ws,
      async () => {
        const h = await this.readHead();
        return this.log.tail(this.itemsFolder, h.doc.log, limit);
      },
      (e) => e instanceof NotFoundError,
    );
  }

  // commit writes doc over cur in one batch with ops: the head's write is
  // conditional on cur's version and fenced by the lease, if any.
  private async commit(cur: Head, doc: HeadDoc, ops: BatchOp[], created: Map<string, AgentInputItem[]>, lease: SessionLease | undefined): Promise<void> {
    const content = encode(doc);
    const head: BatchOp =
      cur.version === 0
        ? { op: "create_artifact", name: this.headName, kind: "session", content_type: "application/json", content, fence: lease?.token }
        : { op: "update_artifact", name: this.headName, content, if_version: cur.version, fence: lease?.token };
    const all = [head, ...ops];
    try {
      const res = await this.ws.batch(all, { actor: this.actor });
      this.head = { version: res.results![0].artifact!.version, doc };
      this.log.keep(created);
    } catch (e) {
      this.head = undefined;
      if (lease && failedOp(e, all.length) === 0 && (e instanceof StaleFenceError || e instanceof LockedError)) lease.lose(e);
      throw e;
    }
  }

  // write commits change's batch, reading the head again and retrying when
  // another writer moved it; after an append it merges parts, once, if the
  // head has not moved again (else the next append will).
  private write<T>(change: (h: Head) => Promise<Change<T>>): Promise<T> {
    return this.serial(async () => {
      const lease = await this.lease();
      const c = await retrying(
        this.ws,
        async (n) => {
          const cur = n === 0 && this.head ? this.head : await this.readHead();
          const c = await change(cur);
          if (!("none" in c)) await this.commit(cur, c.doc, c.ops, c.created, lease);
          return c;
        },
        moved,
      );
      const h = this.head;
      if (!("none" in c) && c.merge && h) {
        try {
          const m = await this.log.planMerge(this.itemsFolder, h.doc.log);
          if (m) await this.commit(h, { ...h.doc, log: m.log }, m.ops, m.created, lease);
        } catch {
          // The append stands; merging is the next append's to do (a lost lease is marked in commit).
        }
      }
      return c.result;
    });
  }

  /** addItems appends items, as one part after everything committed before: never lost, never split. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const copy = decode<AgentInputItem[]>(encode(items));
    await this.write(async (h) => {
      const p = this.log.planAppend(this.itemsFolder, h.doc.log, copy);
      return { result: undefined, doc: { ...h.doc, log: p.log }, ops: p.ops, created: p.created, merge: true };
    });
  }

  /** popItem removes and returns the newest item, or undefined when there is none. */
  async popItem(): Promise<AgentInputItem | undefined> {
    return this.write(async (h) => {
      const n = total(h.doc.log);
      if (h.version === 0 || n === 0) return { result: undefined, none: true };
      const p = await this.log.planTruncate(this.itemsFolder, h.doc.log, n - 1);
      return { result: p.removed[0], doc: { ...h.doc, log: p.log }, ops: p.ops, created: p.created };
    });
  }

  /** clearSession removes every item (and the applied transactions) in one batch; the session id stays. */
  async clearSession(): Promise<void> {
    await this.write(async (h) => {
      if (h.version === 0) return { result: undefined, none: true };
      const p = await this.log.planTruncate(this.itemsFolder, h.doc.log, 0);
      return { result: undefined, doc: { session_id: this.sessionId, log: freshLog() }, ops: p.ops, created: p.created };
    });
  }

  /**
   * applyHistoryTransaction appends items, or replaces the history's
   * suffix if it is expectedSuffix, once per operation id: the id is
   * recorded in the same batch, and the same id with the same transaction
   * again changes nothing. HistoryTransactionError for an id used with
   * another transaction or a suffix that does not match.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction: tx } = args ?? ({} as SessionHistoryTransactionArgs);
    if (typeof operationId !== "string" || operationId.trim() === "") throw new HistoryTransactionError("the operation id must be a non-empty string");
    if (!tx || (tx.type !== "append_items" && tx.type !== "replace_suffix")) throw new HistoryTransactionError("the transaction's type must be append_items or replace_suffix");
    const arrays = tx.type === "append_items" ? [tx.items] : [tx.expectedSuffix, tx.replacement];
    if (!arrays.every(Array.isArray)) throw new HistoryTransactionError(`the ${tx.type} transaction's items must be arrays`);
    const digest = createHash("sha256").update(canonical(tx)).digest("hex");
    const copy = decode<typeof tx>(encode(tx));
    await this.write(async (h) => {
      const done = h.doc.ops ?? [];
      const seen = done.find(([id]) => id === operationId);
      if (seen) {
        if (seen[1] === digest) return { result: undefined, none: true };
        throw new HistoryTransactionError(`operation ${JSON.stringify(operationId)} was applied with another transaction`);
      }
      const ops: [string, string][] = [...done, [operationId, digest] as [string, string]].slice(-keptOps);
      if (copy.type === "append_items") {
        if (copy.items.length === 0) return { result: undefined, doc: { ...h.doc, ops }, ops: [], created: new Map() };
        const p = this.log.planAppend(this.itemsFolder, h.doc.log, copy.items);
        return { result: undefined, doc: { ...h.doc, log: p.log, ops }, ops: p.ops, created: p.created, merge: true };
      }
      const n = total(h.doc.log);
      const k = copy.expectedSuffix.length;
      const suffix = k > n ? undefined : await this.log.tail(this.itemsFolder, h.doc.log, k);
      if (!suffix || canonical(suffix) !== canonical(copy.expectedSuffix)) {
        throw new HistoryTransactionError("the session's history does not end with the transaction's expected suffix");
      }
      const p = await this.log.planTruncate(this.itemsFolder, h.doc.log, n - k, copy.replacement);
      return { result: undefined, doc: { ...h.doc, log: p.log, ops }, ops: p.ops, created: p.created };
    });
  }
}
