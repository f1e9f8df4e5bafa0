// AgentspaceSaver: a LangGraph.js checkpoint saver whose threads have one
// writer at a time.
//
// Layout, under a prefix (default "langgraph"):
//   PREFIX/heads/THREAD                 the thread's head: the latest checkpoint id per namespace
//   PREFIX/threads/THREAD/NS/ID         one checkpoint, with its pending writes
// Each is an artifact, so every put is a versioned record with events.
//
// Invariant: a saver writes a thread only while it holds the lease on the
// thread's head artifact (lock "artifact:PREFIX/heads/THREAD"), and every
// write of the thread is a batch that also updates the head with the
// lease's token as fence and the head version it last saw as if_version.
// A second writer is refused at acquire (LockedError naming the holder);
// a writer whose lease lapsed and was taken is refused at its next write
// (StaleFenceError or LockedError), and any batch that loses the race on
// the head's version commits nothing: the chain cannot fork. Because the
// lease holder is the thread's only writer, it may serve its own reads
// from what it wrote.

import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { Agentspace, artifactText, type Artifact, type BatchOp } from "../client.js";
import { AlreadyExistsError, AgentspaceError, ConnectionError, NotFoundError } from "../errors.js";
import type { ClientOptions } from "../transport.js";
import { seg, unseg } from "./names.js";

/** SaverOptions configure an AgentspaceSaver. */
export interface SaverOptions {
  /** The client to use; default one built from url/token (or the environment). */
  client?: Agentspace;
  /** Options of the client built when none is given. */
  clientOptions?: ClientOptions;
  /**
   * The actor this saver writes and holds its leases as. Two savers that
   * must exclude each other need different actors (behind a token, the
   * token's actor: give each writer process its own token).
   */
  actor?: string;
  /** Where the saver's records live; default "langgraph". */
  prefix?: string;
  /** The thread lease's length (ms); renewed every third. Default 30000. */
  leaseTtl?: number;
  /** How long to wait for a thread held by another writer (ms); default 0: refuse at once. */
  leaseWait?: number;
  serde?: SerializerProtocol;
}

type Stored = { t: string; s: string; b?: undefined } | { t: string; b: string; s?: undefined };

/** The JSON content of a checkpoint artifact. */
interface CheckpointDoc {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id?: string;
  /** The checkpoint without its channel values. */
  checkpoint: Stored;
  metadata: Stored;
  /** The values of the channels this checkpoint changed (in newVersions). */
  values: Record<string, Stored>;
  /** For every channel with a value: the checkpoint whose values hold it. */
  blobs: Record<string, string>;
  /** "TASK,IDX" -> [task id, channel, value, task path] */
  writes: Record<string, [string, string, Stored, string]>;
}

interface HeadDoc {
  latest: Record<string, string>;
}

interface Entry {
  version: number;
  doc: CheckpointDoc;
}

/** A thread this saver holds the lease of. */
interface Held {
  token: number;
  headVersion: number;
  latest: Record<string, string>;
  cache: Map<string, Entry>;
  /**
   * Writes that came before their checkpoint: LangGraph may call putWrites
   * for a checkpoint whose put it has queued behind the previous put. They
   * are committed with that put.
   */
  early: Map<string, CheckpointDoc["writes"]>;
  lost?: unknown;
  timer?: NodeJS.Timeout;
}

const cacheSize = 16;

function toStored([t, bytes]: [string, Uint8Array]): Stored {
  if (t === "json") return { t, s: Buffer.from(bytes).toString("utf8") };
  return { t, b: Buffer.from(bytes).toString("base64") };
}

function fromStored(x: Stored): Uint8Array | string {
  return x.s !== undefined ? x.s : new Uint8Array(Buffer.from(x.b, "base64"));
}

/**
 * AgentspaceSaver persists LangGraph checkpoints in an agentspace
 * workspace, one writer per thread (see the file comment).
 */
export class AgentspaceSaver extends BaseCheckpointSaver {
  readonly ws: Agentspace;
  readonly prefix: string;
  readonly actor: string | undefined;
  private readonly leaseTtl: number;
  private readonly leaseWait: number;
  private readonly held = new Map<string, Held>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(opts: SaverOptions = {}) {
    super(opts.serde);
    this.ws = opts.client ?? new Agentspace(opts.clientOptions);
    this.prefix = (opts.prefix ?? "langgraph").replace(/\/+$/, "");
    this.actor = opts.actor;
    this.leaseTtl = opts.leaseTtl ?? 30000;
    this.leaseWait = opts.leaseWait ?? 0;
  }

  /** headName is the artifact that holds a thread's head. */
  headName(threadId: string): string {
    return `${this.prefix}/heads/${seg(threadId)}`;
  }

  /** leaseResource is the lock a thread's writer holds. */
  leaseResource(threadId: string): string {
    return `artifact:${this.headName(threadId)}`;
  }

  private checkpointName(threadId: string, ns: string, id: string): string {
    return `${this.prefix}/threads/${seg(threadId)}/${seg(ns)}/${seg(id)}`;
  }

  // serial runs op after every earlier op on the same thread: a writer's
  // read-modify-writes of its own records must not race each other.
  private serial<T>(threadId: string, op: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(threadId) ?? Promise.resolve();
    const next = prev.then(op, op);
    const tail = next.catch(() => undefined);
    this.queues.set(threadId, tail);
    void tail.then(() => {
      if (this.queues.get(threadId) === tail) this.queues.delete(threadId);
    });
    return next;
  }

  /** lease takes (or returns the held) lease of threadId. */
  private async lease(threadId: string): Promise<Held> {
    const h = this.held.get(threadId);
    if (h) {
      if (h.lost === undefined) return h;
      // Refuse once with why, and read the thread afresh next time.
      this.drop(threadId);
      throw h.lost;
    }
    const resource = this.leaseResource(threadId);
    const l = await this.ws.locks.acquire(resource, { ttl: this.leaseTtl, wait: this.leaseWait || undefined, actor: this.actor, message: "langgraph thread writer" });
    const held: Held = { token: l.token, headVersion: 0, latest: {}, cache: new Map(), early: new Map() };
    try {
      const head = await this.ws.artifacts.get(this.headName(threadId));
      held.headVersion = head.version;
      held.latest = (JSON.parse(artifactText(head)) as HeadDoc).latest ?? {};
    } catch (e) {
      if (!(e instanceof NotFoundError)) {
        await this.ws.locks.release(resource, { token: l.token, actor: this.actor }).catch(() => undefined);
        throw e;
      }
    }
    // A renewal that comes too late (a paused process, a slow server) finds
    // the lease expired. If nobody holds it, the saver takes it again: any
    // writer that held it in between and wrote moved the head, which this
    // saver's if_version then refuses, so going on cannot fork the chain.
    // If another owner holds it, the thread is lost to this saver.
    const renew = async () => {
      try {
        await this.ws.locks.renew(resource, { token: held.token, ttl: this.leaseTtl, actor: this.actor });
      } catch (e) {
        if (e instanceof ConnectionError) {
          held.timer = setTimeout(renew, Math.min(1000, this.leaseTtl / 6));
          held.timer.unref();
          return;
        }
        try {
          held.token = (await this.ws.locks.acquire(resource, { ttl: this.leaseTtl, actor: this.actor, message: "langgraph thread writer" })).token;
        } catch {
          held.lost = e;
          return;
        }
      }
      held.timer = setTimeout(renew, this.leaseTtl / 3);
      held.timer.unref();
    };
    held.timer = setTimeout(renew, this.leaseTtl / 3);
    held.timer.unref();
    this.held.set(threadId, held);
    return held;
  }

  private drop(threadId: string): Held | undefined {
    const h = this.held.get(threadId);
    if (h) clearTimeout(h.timer);
    this.held.delete(threadId);
    return h;
  }

  /** release gives up the lease of threadId, if held: another writer may take the thread. */
  async release(threadId: string): Promise<void> {
    await this.serial(threadId, async () => {
      const h = this.drop(threadId);
      if (h && h.lost === undefined) await this.ws.locks.release(this.leaseResource(threadId), { token: h.token, actor: this.actor }).catch(() => undefined);
    });
  }

  /** close releases every lease this saver holds. */
  async close(): Promise<void> {
    await Promise.all([...this.held.keys()].map((t) => this.release(t)));
  }

  // commit runs ops together with the fenced head update, all or nothing.
  private async commit(threadId: string, h: Held, ops: BatchOp[], latest: Record<string, string>): Promise<Artifact[]> {
    const content = JSON.stringify({ latest } satisfies HeadDoc);
    const head: BatchOp =
      h.headVersion === 0
        ? { op: "create_artifact", name: this.headName(threadId), kind: "thread", content_type: "application/json", content, labels: { thread_id: threadId } }
        : { op: "update_artifact", name: this.headName(threadId), if_version: h.headVersion, fence: h.token, content };
    try {
      const res = await this.ws.batch([...ops, head], { actor: this.actor });
      const arts = (res.results ?? []).map((r) => r.artifact as Artifact);
      h.headVersion = arts[arts.length - 1].version;
      h.latest = latest;
      return arts;
    } catch (e) {
      if (e instanceof AgentspaceError && e.batchIndex === ops.length) {
        // The head moved under us or its lease passed on: this writer is done with the thread.
        h.lost = e;
      }
      throw e;
    }
  }

  private remember(h: Held, id: string, e: Entry): void {
    h.cache.delete(id);
    h.cache.set(id, e);
    if (h.cache.size > cacheSize) h.cache.delete(h.cache.keys().next().value as string);
  }

  private async load(threadId: string, ns: string, id: string): Promise<Entry | undefined> {
    const h = this.held.get(threadId);
    const cached = h?.lost === undefined ? h?.cache.get(`${ns}\u0000${id}`) : undefined;
    if (cached) return cached;
    try {
      const a = await this.ws.artifacts.get(this.checkpointName(threadId, ns, id));
      return { version: a.version, doc: JSON.parse(artifactText(a)) as CheckpointDoc };
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  private async latestId(threadId: string, ns: string): Promise<string | undefined> {
    const h = this.held.get(threadId);
    if (h && h.lost === undefined) return h.latest[ns];
    try {
      const head = await this.ws.artifacts.get(this.headName(threadId));
      return (JSON.parse(artifactText(head)) as HeadDoc).latest?.[ns];
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  /** put stores a checkpoint as the thread's newest; refused unless this saver is the thread's writer. */
  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = config.configurable?.thread_id as string | undefined;
    if (typeof threadId !== "string" || threadId === "") throw new Error('AgentspaceSaver.put: the config has no "thread_id" in "configurable"');
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const parent = config.configurable?.checkpoint_id as string | undefined;
    const bare = copyCheckpoint(checkpoint);
    bare.channel_values = {};
    const changed = Object.keys(checkpoint.channel_values ?? {}).filter((ch) => ch in newVersions);
    const [cp, md, ...vals] = await Promise.all([
      this.serde.dumpsTyped(bare),
      this.serde.dumpsTyped(metadata),
      ...changed.map((ch) => this.serde.dumpsTyped(checkpoint.channel_values[ch])),
    ]);
    const values: Record<string, Stored> = {};
    changed.forEach((ch, i) => (values[ch] = toStored(vals[i])));
    return this.serial(threadId, async () => {
      const h = await this.lease(threadId);
      const key = `${ns}\u0000${checkpoint.id}`;
      // A channel's value lives in the checkpoint that last changed it.
      const parentDoc = parent ? (await this.load(threadId, ns, parent))?.doc : undefined;
      const blobs: Record<string, string> = {};
      // A channel in newVersions without a value was emptied at this
      // checkpoint: it must not inherit the parent's value.
      for (const ch of Object.keys(checkpoint.channel_versions ?? {})) {
        if (ch in values) blobs[ch] = checkpoint.id;
        else if (!(ch in newVersions) && parentDoc?.blobs?.[ch] !== undefined) blobs[ch] = parentDoc.blobs[ch];
      }
      const doc: CheckpointDoc = {
        thread_id: threadId,
        checkpoint_ns: ns,
        checkpoint_id: checkpoint.id,
        parent_checkpoint_id: parent,
        checkpoint: toStored(cp),
        metadata: toStored(md),
        values,
        blobs,
        writes: { ...h.early.get(key), ...h.cache.get(key)?.doc.writes },
      };
      const prevLatest = h.latest[ns];
      const latest = { ...h.latest, [ns]: prevLatest !== undefined && prevLatest > checkpoint.id ? prevLatest : checkpoint.id };
      const name = this.checkpointName(threadId, ns, checkpoint.id);
      const content = JSON.stringify(doc);
      const known = h.cache.get(key);
      const op = (v?: number): BatchOp =>
        v === undefined
          ? { op: "create_artifact", name, kind: "checkpoint", content_type: "application/json", content, labels: { thread_id: threadId, checkpoint_ns: ns } }
          : { op: "update_artifact", name, if_version: v, content };
      let arts: Artifact[];
      try {
        arts = await this.commit(threadId, h, [op(known?.version)], latest);
      } catch (e) {
        if (!(e instanceof AlreadyExistsError) || e.batchIndex !== 0) throw e;
        const cur = await this.load(threadId, ns, checkpoint.id);
        if (!cur) throw e;
        doc.writes = cur.doc.writes;
        arts = await this.commit(threadId, h, [op(cur.version)], latest);
      }
      h.early.delete(key);
      this.remember(h, key, { version: arts[0].version, doc });
      return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
    });
  }

  /** putWrites stores a task's pending writes on a checkpoint, fenced as put is. */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = config.configurable?.thread_id as string | undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const id = config.configurable?.checkpoint_id as string | undefined;
    if (typeof threadId !== "string" || threadId === "") throw new Error('AgentspaceSaver.putWrites: the config has no "thread_id" in "configurable"');
    if (!id) throw new Error('AgentspaceSaver.putWrites: the config has no "checkpoint_id" in "configurable"');
    const values = await Promise.all(writes.map(([, v]) => this.serde.dumpsTyped(v)));
    await this.serial(threadId, async () => {
      const h = await this.lease(threadId);
      const key = `${ns}\u0000${id}`;
      const cur = await this.load(threadId, ns, id);
      const merged = { ...(cur ? cur.doc.writes : h.early.get(key)) };
      let changed = false;
      writes.forEach(([channel], i) => {
        const idx = WRITES_IDX_MAP[channel] ?? i;
        const k = `${taskId},${idx}`;
        if (idx >= 0 && k in merged) return;
        merged[k] = [taskId, channel, toStored(values[i]), taskPath ?? ""];
        changed = true;
      });
      if (!changed) return;
      if (!cur) {
        h.early.set(key, merged);
        return;
      }
      const doc = { ...cur.doc, writes: merged };
      const name = this.checkpointName(threadId, ns, id);
      const arts = await this.commit(threadId, h, [{ op: "update_artifact", name, if_version: cur.version, content: JSON.stringify(doc) }], h.latest);
      this.remember(h, key, { version: arts[0].version, doc });
    });
  }

  private async pendingWrites(doc: CheckpointDoc): Promise<CheckpointPendingWrite[]> {
    const entries = Object.entries(doc.writes).map(([k, [taskId, channel, value, path]]) => {
      const idx = Number(k.slice(k.lastIndexOf(",") + 1));
      return { key: writesSortKey(path, taskId, idx), taskId, channel, value };
    });
    entries.sort((a, b) => compareWritesSortKeys(a.key, b.key));
    return Promise.all(entries.map(async (e) => [e.taskId, e.channel, await this.serde.loadsTyped(e.value.t, fromStored(e.value))] as CheckpointPendingWrite));
  }

  private async channelValues(doc: CheckpointDoc): Promise<Record<string, unknown>> {
    const holders = new Map<string, CheckpointDoc | undefined>([[doc.checkpoint_id, doc]]);
    const ids = [...new Set(Object.values(doc.blobs ?? {}))].filter((id) => !holders.has(id));
    const loaded = await Promise.all(ids.map((id) => this.load(doc.thread_id, doc.checkpoint_ns, id)));
    ids.forEach((id, i) => holders.set(id, loaded[i]?.doc));
    const out: Record<string, unknown> = {};
    for (const [ch, id] of Object.entries(doc.blobs ?? {})) {
      const v = holders.get(id)?.values?.[ch];
      if (v !== undefined) out[ch] = await this.serde.loadsTyped(v.t, fromStored(v));
    }
    return out;
  }

  private async tuple(doc: CheckpointDoc, config?: RunnableConfig): Promise<CheckpointTuple> {
    const { thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id } = doc;
    const checkpoint = (await this.serde.loadsTyped(doc.checkpoint.t, fromStored(doc.checkpoint))) as Checkpoint;
    checkpoint.channel_values = await this.channelValues(doc);
    if (checkpoint.v < 4 && parent_checkpoint_id !== undefined) {
      // Checkpoints before v4 kept pending sends as the parent's TASKS writes.
      const parent = await this.load(thread_id, checkpoint_ns, parent_checkpoint_id);
      const sends = parent ? (await this.pendingWrites(parent.doc)).filter(([, c]) => c === TASKS).map(([, , v]) => v) : [];
      checkpoint.channel_values ??= {};
      checkpoint.channel_values[TASKS] = sends;
      checkpoint.channel_versions ??= {};
      checkpoint.channel_versions[TASKS] =
        Object.keys(checkpoint.channel_versions).length > 0 ? maxChannelVersion(...Object.values(checkpoint.channel_versions)) : this.getNextVersion(undefined);
    }
    const t: CheckpointTuple = {
      config: config ?? { configurable: { thread_id, checkpoint_ns, checkpoint_id } },
      checkpoint,
      metadata: (await this.serde.loadsTyped(doc.metadata.t, fromStored(doc.metadata))) as CheckpointMetadata,
      pendingWrites: await this.pendingWrites(doc),
    };
    if (parent_checkpoint_id !== undefined) t.parentConfig = { configurable: { thread_id, checkpoint_ns, checkpoint_id: parent_checkpoint_id } };
    return t;
  }

  /** getTuple returns the checkpoint the config names, or the thread's newest in its namespace. */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id as string | undefined;
    if (typeof threadId !== "string") return undefined;
    const ns = (config.configurable?.checkpoint_ns as string | undefined) ?? "";
    const asked = getCheckpointId(config);
    const id = asked || (await this.latestId(threadId, ns));
    if (!id) return undefined;
    const e = await this.load(threadId, ns, id);
    if (!e) return undefined;
    return this.tuple(e.doc, asked ? config : undefined);
  }

  /** list yields checkpoints newest first, filtered by thread, namespace, before, and metadata. */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let limit = options.limit;
    const threadId = config.configurable?.thread_id as string | undefined;
    const ns = config.configurable?.checkpoint_ns as string | undefined;
    const onlyId = config.configurable?.checkpoint_id as string | undefined;
    const beforeId = before?.configurable?.checkpoint_id as string | undefined;
    let prefix = `${this.prefix}/threads/`;
    if (threadId !== undefined) {
      prefix += `${seg(threadId)}/`;
      if (ns !== undefined) prefix += `${seg(ns)}/`;
    }
    const found: { thread: string; ns: string; id: string }[] = [];
    for await (const a of this.ws.listAllArtifacts({ name_prefix: prefix, limit: 1000 })) {
      const parts = a.name.slice(this.prefix.length + "/threads/".length).split("/");
      if (parts.length !== 3) continue;
      const [thread, cns, id] = parts.map(unseg);
      if ((threadId !== undefined && thread !== threadId) || (ns !== undefined && cns !== ns)) continue;
      if (onlyId && id !== onlyId) continue;
      if (beforeId && id >= beforeId) continue;
      found.push({ thread, ns: cns, id });
    }
    found.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    for (const f of found) {
      if (limit !== undefined && limit <= 0) return;
      const e = await this.load(f.thread, f.ns, f.id);
      if (!e) continue;
      const t = await this.tuple(e.doc);
      if (filter && !Object.entries(filter).every(([k, v]) => (t.metadata as Record<string, unknown> | undefined)?.[k] === v)) continue;
      if (limit !== undefined) limit -= 1;
      yield t;
    }
  }

  /** deleteThread deletes every checkpoint of the thread and its head, as the thread's writer, in one batch. */
  async deleteThread(threadId: string): Promise<void> {
    await this.serial(threadId, async () => {
      const h = await this.lease(threadId);
      const ops: BatchOp[] = [];
      for await (const a of this.ws.listAllArtifacts({ name_prefix: `${this.prefix}/threads/${seg(threadId)}/`, limit: 1000 })) {
        ops.push({ op: "delete_artifact", name: a.name });
      }
      if (h.headVersion !== 0) ops.push({ op: "delete_artifact", name: this.headName(threadId), if_version: h.headVersion, fence: h.token });
      if (ops.length > 0) await this.ws.batch(ops, { actor: this.actor });
      this.drop(threadId);
      await this.ws.locks.release(this.leaseResource(threadId), { token: h.token, actor: this.actor }).catch(() => undefined);
    });
  }
}
