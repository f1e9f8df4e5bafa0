// PartLog: an append-only list of entries (a session's items or events)
// kept in a workspace as immutable part artifacts listed, in order, by a
// head record that the caller owns and writes in the same batch.
//
// Invariant: the head is the only truth. A part is written once, under a
// name never used before (the head's random epoch and a sequence number that
// only grows), and deleted only in a batch that also removes it from the
// head; so a part named by a head a reader has read holds exactly what it
// held when that head was written, and may be cached by name for ever. A
// part the reader cannot find was removed by a newer head: read the head
// again.
//
// Parts are merged as a binary counter carries: after an append, the
// writer merges the newest parts of one level into one part a level up when
// there are `fanout` of them (unless it would be larger than maxPartBytes),
// in a batch of its own that, if another writer moved the head meanwhile,
// is dropped (the next append merges). A session of n appends so has about
// (fanout-1)·log_fanout(n) parts, each entry is rewritten about
// log_fanout(n) times, and a reader loads a few parts, not n.

import { randomBytes } from "node:crypto";
import { Agentspace, artifactText, type BatchOp } from "../client.js";
import { AgentspaceError, AlreadyExistsError, ConflictError, NotFoundError } from "../errors.js";
import { sleep } from "../transport.js";

/** PartRef is one part as the head lists it. */
export interface PartRef {
  /** The part's sequence number (its name's suffix). */
  seq: number;
  /** How many entries it holds. */
  n: number;
  /** Its merge level: 0 for one append. */
  lvl: number;
  /** Its content's size in bytes. */
  b: number;
  /** The smallest and largest stamp (a timestamp) of its entries, when entries have one. */
  t0?: number;
  t1?: number;
}

/** LogState is the part of a head that lists the parts. */
export interface LogState {
  /** Random, per head: part names of a deleted and re-created head never meet the old ones. */
  epoch: string;
  /** The next part's sequence number. */
  next: number;
  parts: PartRef[];
}

/** Plan is what a change does: the new list, the ops that make it, and the parts it creates. */
export interface Plan<E> {
  log: LogState;
  ops: BatchOp[];
  created: Map<string, E[]>;
}

/** PartLogOptions tune a PartLog. */
export interface PartLogOptions<E> {
  /** The kind of the part artifacts. */
  kind: string;
  /** How many parts of one level become one; default 8. */
  fanout?: number;
  /** A merge that would make a part larger than this (bytes) is not made; default 4 MiB. */
  maxPartBytes?: number;
  /** How much part content (bytes of JSON) to keep in memory; default 32 MiB. */
  cacheBytes?: number;
  /** An entry's stamp (a timestamp), if entries have one. */
  stamp?: (e: E) => number | undefined;
}

const bytesTag = "$agentspace_bytes";

/** encode is JSON that keeps Uint8Array values (as base64, tagged). */
export function encode(x: unknown): string {
  return JSON.stringify(x, (_k, v: unknown) => (v instanceof Uint8Array ? { [bytesTag]: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") } : v));
}

/** decode reverses encode. */
export function decode<T>(s: string): T {
  return JSON.parse(s, (_k, v: unknown) => {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0] === bytesTag && typeof (v as Record<string, unknown>)[bytesTag] === "string") {
        return new Uint8Array(Buffer.from((v as Record<string, string>)[bytesTag], "base64"));
      }
    }
    return v;
  }) as T;
}

/** canonical is encode with object keys sorted: equal values give equal strings. */
export function canonical(x: unknown): string {
  const sort = (v: unknown): unknown => {
    if (v instanceof Uint8Array) return { [bytesTag]: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
    if (Array.isArray(v)) return v.map(sort);
    if (v !== null && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) {
        const x = (v as Record<string, unknown>)[k];
        if (x !== undefined) out[k] = sort(x);
      }
      return out;
    }
    return v;
  };
  return JSON.stringify(sort(x));
}

/** newEpoch returns a fresh epoch. */
export function newEpoch(): string {
  return randomBytes(4).toString("hex");
}

/** freshLog is the list of a new head. */
export function freshLog(): LogState {
  return { epoch: newEpoch(), next: 1, parts: [] };
}

/** total is the number of entries a list holds. */
export function total(log: LogState): number {
  return log.parts.reduce((s, p) => s + p.n, 0);
}

/**
 * PartLog plans changes of part lists and loads parts, through a cache of
 * part contents by name (see the file comment for why that is safe).
 */
export class PartLog<E> {
  readonly ws: Agentspace;
  readonly kind: string;
  readonly fanout: number;
  readonly maxPartBytes: number;
  private readonly cacheBytes: number;
  private readonly stamp?: (e: E) => number | undefined;
  private readonly cache = new Map<string, { entries: E[]; bytes: number }>();
  private cached = 0;

  constructor(ws: Agentspace, opts: PartLogOptions<E>) {
    this.ws = ws;
    this.kind = opts.kind;
    this.fanout = Math.max(2, opts.fanout ?? 8);
    this.maxPartBytes = opts.maxPartBytes ?? 4 << 20;
    this.cacheBytes = opts.cacheBytes ?? 32 << 20;
    this.stamp = opts.stamp;
  }

  /** partName is the artifact of part seq under base (the session's folder of parts). */
  partName(base: string, log: LogState, seq: number): string {
    return `${base}/${log.epoch}-${String(seq).padStart(8, "0")}`;
  }

  private remember(name: string, entries: E[], bytes: number): void {
    const old = this.cache.get(name);
    if (old) {
      this.cached -= old.bytes;
      this.cache.delete(name);
    }
    if (bytes > this.cacheBytes) return;
    this.cache.set(name, { entries, bytes });
    this.cached += bytes;
    for (const [k, v] of this.cache) {
      if (this.cached <= this.cacheBytes) break;
      this.cache.delete(k);
      this.cached -= v.bytes;
    }
  }

  /** keep caches the parts a committed plan created. */
  keep(created: Map<string, E[]>): void {
    for (const [name, entries] of created) this.remember(name, entries, Buffer.byteLength(encode(entries)));
  }

  /**
   * load returns the entries of refs, in order: from the cache, else from
   * the server, eight at a time. NotFoundError: a newer head removed a
   * part; read the head again.
   */
  async load(base: string, log: LogState, refs: PartRef[]): Promise<E[][]> {
    const out: E[][] = new Array(refs.length);
    const todo: number[] = [];
    refs.forEach((r, i) => {
      const hit = this.cache.get(this.partName(base, log, r.seq));
      if (hit) {
        // Touch: most recently used last.
        this.cache.delete(this.partName(base, log, r.seq));
        this.cache.set(this.partName(base, log, r.seq), hit);
        out[i] = hit.entries;
      } else todo.push(i);
    });
    let next = 0;
    const worker = async () => {
      while (next < todo.length) {
        const i = todo[next++];
        const name = this.partName(base, log, refs[i].seq);
        const a = await this.ws.artifacts.get(name);
        const text = artifactText(a);
        const entries = decode<E[]>(text);
        this.remember(name, entries, Buffer.byteLength(text));
        out[i] = entries;
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, todo.length) }, worker));
    return out.map((es) => es.map((e) => structuredClone(e)));
  }

  /** tail returns the last count entries (all of them when count is undefined), oldest first. */
  async tail(base: string, log: LogState, count?: number): Promise<E[]> {
    if (count !== undefined && count <= 0) return [];
    let from = log.parts.length;
    let have = 0;
    while (from > 0 && (count === undefined || have < count)) {
      from--;
      have += log.parts[from].n;
    }
    const all = (await this.load(base, log, log.parts.slice(from))).flat();
    return count === undefined ? all : all.slice(Math.max(0, all.length - count));
  }

  private ref(seq: number, entries: E[], lvl: number, bytes: number): PartRef {
    const r: PartRef = { seq, n: entries.length, lvl, b: bytes };
    if (this.stamp) {
      for (const e of entries) {
        const t = this.stamp(e);
        if (typeof t !== "number" || !Number.isFinite(t)) continue;
        if (r.t0 === undefined || t < r.t0) r.t0 = t;
        if (r.t1 === undefined || t > r.t1) r.t1 = t;
      }
    }
    return r;
  }

  private createOp(name: string, content: string): BatchOp {
    return { op: "create_artifact", name, kind: this.kind, content_type: "application/json", content };
  }

  /** planAppend appends entries as one new part (level 0). */
  planAppend(base: string, log: LogState, entries: E[]): Plan<E> {
    const content = encode(entries);
    const ref = this.ref(log.next, entries, 0, Buffer.byteLength(content));
    const name = this.partName(base, log, ref.seq);
    return { log: { epoch: log.epoch, next: log.next + 1, parts: [...log.parts, ref] }, ops: [this.createOp(name, content)], created: new Map([[name, entries]]) };
  }

  /**
   * planMerge merges the newest parts, as the file comment says (the
   * newest parts of one level, when there are fanout or more of them,
   * become one part a level up, and again), or returns undefined when
   * nothing is to be merged. It loads the parts it merges.
   */
  async planMerge(base: string, log: LogState): Promise<Plan<E> | undefined> {
    const parts = [...log.parts];
    let next = log.next;
    const deleted: PartRef[] = [];
    let made: { entries: E[]; content: string; ref: PartRef } | undefined;
    for (;;) {
      const lvl = parts[parts.length - 1]?.lvl;
      let from = parts.length;
      let bytes = 0;
      while (from > 0 && parts[from - 1].lvl === lvl && bytes + parts[from - 1].b <= this.maxPartBytes) bytes += parts[--from].b;
      const run = parts.slice(from);
      if (run.length < this.fanout) break;
      // The newest part may be the one made in the last round, not yet stored.
      const stored = made && run[run.length - 1] === made.ref ? run.slice(0, -1) : run;
      const loaded = (await this.load(base, log, stored)).flat();
      const entries = stored === run ? loaded : [...loaded, ...made!.entries];
      const content = encode(entries);
      deleted.push(...stored);
      made = { entries, content, ref: this.ref(next++, entries, (lvl ?? 0) + 1, Buffer.byteLength(content)) };
      parts.splice(from, run.length, made.ref);
    }
    if (!made) return undefined;
    const name = this.partName(base, log, made.ref.seq);
    return {
      log: { epoch: log.epoch, next, parts },
      ops: [this.createOp(name, made.content), ...deleted.map((p): BatchOp => ({ op: "delete_artifact", name: this.partName(base, log, p.seq) }))],
      created: new Map([[name, made.entries]]),
    };
  }

  /**
   * planTruncate keeps the first keep entries, drops the rest (returned as
   * removed) and appends then: whole parts are deleted, and the part the
   * cut falls in is replaced by one holding its kept entries and then.
   */
  async planTruncate(base: string, log: LogState, keep: number, then: E[] = []): Promise<Plan<E> & { removed: E[] }> {
    let at = 0;
    let i = 0;
    while (i < log.parts.length && at + log.parts[i].n <= keep) {
      at += log.parts[i].n;
      i++;
    }
    const dropped = log.parts.slice(i);
    const loaded = (await this.load(base, log, dropped)).flat();
    const kept = [...loaded.slice(0, keep - at), ...then];
    const removed = loaded.slice(keep - at);
    const parts = log.parts.slice(0, i);
    let next = log.next;
    const ops: BatchOp[] = dropped.map((p) => ({ op: "delete_artifact", name: this.partName(base, log, p.seq) }));
    const created = new Map<string, E[]>();
    if (kept.length > 0) {
      const content = encode(kept);
      const ref = this.ref(next++, kept, 0, Buffer.byteLength(content));
      const name = this.partName(base, log, ref.seq);
      ops.unshift(this.createOp(name, content));
      created.set(name, kept);
      parts.push(ref);
    }
    return { log: { epoch: log.epoch, next, parts }, ops, created, removed };
  }

  /** planRewrite replaces part i's entries with entries, in place (a new part at the same position). */
  planRewrite(base: string, log: LogState, i: number, entries: E[]): Plan<E> {
    const content = encode(entries);
    const ref = this.ref(log.next, entries, log.parts[i].lvl, Buffer.byteLength(content));
    const name = this.partName(base, log, ref.seq);
    const parts = [...log.parts];
    parts[i] = ref;
    return {
      log: { epoch: log.epoch, next: log.next + 1, parts },
      ops: [this.createOp(name, content), { op: "delete_artifact", name: this.partName(base, log, log.parts[i].seq) }],
      created: new Map([[name, entries]]),
    };
  }

  /**
   * deleteEpoch deletes every part of epoch under base, a thousand per
   * batch: the parts of a head that is gone (a head made again later has
   * another epoch, so its parts are not touched).
   */
  async deleteEpoch(base: string, epoch: string, actor?: string): Promise<void> {
    for (;;) {
      const page = await this.ws.artifacts.list({ name_prefix: `${base}/${epoch}-`, limit: 1000 });
      if (page.artifacts.length === 0) return;
      await this.ws.batch(page.artifacts.map((a) => ({ op: "delete_artifact", name: a.name })), { actor }).catch((e) => {
        if (!(e instanceof NotFoundError)) throw e;
      });
    }
  }
}

/**
 * failedOp is the index of the op a batch of n ops failed on, if the error
 * says (a batch of one op fails as that op's write, with no index).
 */
export function failedOp(e: unknown, n: number): number | undefined {
  if (!(e instanceof AgentspaceError)) return undefined;
  return e.batchIndex ?? (n === 1 ? 0 : undefined);
}

/**
 * moved tells the errors that mean "what this writer read has changed"
 * (another writer's head, a part another writer removed or made): read
 * the head again and retry.
 */
export function moved(e: unknown): boolean {
  return e instanceof ConflictError || e instanceof AlreadyExistsError || e instanceof NotFoundError;
}

/**
 * retrying runs attempt until it succeeds, or fails with an error retry
 * refuses, or the client's retryFor has passed since the first attempt:
 * then the last error is thrown. The first retry is at once (an attempt
 * starts by reading the head again, which is wait enough when one other
 * writer won); later ones wait a random time up to 8 ms, doubling to 100.
 */
export async function retrying<T>(ws: Agentspace, attempt: (n: number) => Promise<T>, retry: (e: unknown) => boolean): Promise<T> {
  const deadline = Date.now() + ws.transport.retryFor;
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      if (!retry(e) || Date.now() >= deadline) throw e;
    }
    if (n > 0) await sleep(Math.random() * Math.min(100, 4 * 2 ** n));
  }
}
