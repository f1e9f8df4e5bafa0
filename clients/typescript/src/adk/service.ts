// AgentspaceSessionService: a Google ADK session service whose sessions,
// events and state live in an agentspace workspace.
//
// Layout, under a prefix (default "adk"), APP, USER and SESSION each one
// name segment:
//   PREFIX/APP/sessions/USER/SESSION            the session's head: its state and which parts hold its events
//   PREFIX/APP/events/USER/SESSION/EPOCH-SEQ    one part: a JSON array of events
//   PREFIX/APP/state                            the app's state (the "app:" keys, without the prefix)
//   PREFIX/APP/users/USER                       the user's state (the "user:" keys, without the prefix)
//
// Invariant: a session object this service returned carries (in a WeakMap)
// the version of the head it was read at, and appendEvent commits the
// event, the session's state delta, the app's and the user's, in one batch
// whose head write has that version as its if_version (and, under a lease,
// the lease's token as its fence). So an append to a session that another
// writer changed since it was read commits nothing and fails with
// StaleSessionError: ADK's own stale-session check, made atomic across
// processes. The app's and user's states are shared by every session of
// the app or user: their writes are conditional too, and a batch that
// loses only on them reads them again and retries (each delta sets keys,
// so applying it to the newer state is what ADK does).

import { randomUUID } from "node:crypto";
import {
  BaseSessionService,
  State,
  createEvent,
  createSession,
  mergeStates,
  trimTempDeltaState,
  trimTempState,
  type AppendEventRequest,
  type CreateSessionRequest,
  type DeleteSessionRequest,
  type Event,
  type GetSessionRequest,
  type ListSessionsRequest,
  type ListSessionsResponse,
  type Session,
} from "@google/adk";
import { Agentspace, artifactText, type Artifact, type BatchOp, type Lease } from "../client.js";
import { AgentspaceError, ConflictError, LockedError, NotFoundError, StaleFenceError, type Problem } from "../errors.js";
import { seg, unseg } from "../langgraph/names.js";
import { PartLog, decode, encode, failedOp, freshLog, moved, retrying, type LogState } from "../sessions/log.js";
import { SessionLease, type LeaseOptions } from "../sessions/lease.js";
import type { StoreOptions } from "../sessions/options.js";

/**
 * AgentspaceSessionServiceOptions configure an AgentspaceSessionService:
 * StoreOptions, with the records under "adk" by default and the lease held
 * from a session's first use (getSession, createSession, appendEvent)
 * until release.
 */
export type AgentspaceSessionServiceOptions = StoreOptions;

/**
 * StaleSessionError: appendEvent was given a session another writer has
 * changed since it was read (a ConflictError: `expected` is the version it
 * was read at, `current` the head's now). Nothing was written: read the
 * session again and run the turn on it.
 */
export class StaleSessionError extends ConflictError {
  constructor(detail: string, p: { expected: number; current: number; name: string }) {
    super("conflict", 409, detail, { code: "conflict", status: 409, title: "Conflict", type: "about:blank", detail, expected: p.expected, current: p.current, subject: { kind: "artifact", id: "", name: p.name } } as Problem);
  }
}

/** The head's content. */
interface HeadDoc {
  app: string;
  user: string;
  id: string;
  /** The session-scoped state (no app:, user: or temp: keys). */
  state: Record<string, unknown>;
  log: LogState;
}

interface Head {
  version: number;
  doc: HeadDoc;
  /** The head's last write (ms since the epoch, the server's clock). */
  updated: number;
}

interface Scoped {
  version: number;
  value: Record<string, unknown>;
}

type Key = { appName: string; userId: string; sessionId: string };

function updatedAt(a: Artifact): number {
  return a.updated_at ? Date.parse(a.updated_at) : 0;
}

/** split sorts a state or delta into the app's, the user's and the session's keys; temp: keys go nowhere. */
function split(delta: Record<string, unknown> | undefined): { app: Record<string, unknown>; user: Record<string, unknown>; session: Record<string, unknown> } {
  const out = { app: {} as Record<string, unknown>, user: {} as Record<string, unknown>, session: {} as Record<string, unknown> };
  for (const [k, v] of Object.entries(delta ?? {})) {
    if (k.startsWith(State.APP_PREFIX)) out.app[k.slice(State.APP_PREFIX.length)] = v;
    else if (k.startsWith(State.USER_PREFIX)) out.user[k.slice(State.USER_PREFIX.length)] = v;
    else if (!k.startsWith(State.TEMP_PREFIX)) out.session[k] = v;
  }
  return out;
}

const empty = (o: Record<string, unknown>) => Object.keys(o).length === 0;

/** Final carries an error that retrying must not retry: the head's own write failed. */
class Final {
  constructor(readonly error: unknown) {}
}

function unwrap(e: unknown): never {
  throw e instanceof Final ? e.error : e;
}

/**
 * AgentspaceSessionService is a BaseSessionService whose records are
 * workspace artifacts; see the file comment for its guarantees.
 */
export class AgentspaceSessionService extends BaseSessionService {
  readonly ws: Agentspace;
  readonly prefix: string;
  readonly actor: string | undefined;
  private readonly log: PartLog<Event>;
  private readonly leaseOpts: LeaseOptions | undefined;
  private readonly leases = new Map<string, SessionLease>();
  private readonly queues = new Map<string, Promise<unknown>>();
  /** The head each session object was read or last written at. */
  private readonly known = new WeakMap<Session, Head>();

  constructor(opts: AgentspaceSessionServiceOptions = {}) {
    super();
    this.ws = opts.client ?? new Agentspace(opts.clientOptions);
    this.prefix = (opts.prefix ?? "adk").replace(/\/+$/, "");
    this.actor = opts.actor;
    this.leaseOpts = opts.lease === true ? {} : opts.lease || undefined;
    this.log = new PartLog<Event>(this.ws, { kind: "adk-events", fanout: opts.fanout, cacheBytes: opts.cacheBytes, stamp: (e) => e.timestamp });
  }

  /** headName is the artifact of a session's head. */
  headName(k: Key): string {
    return `${this.prefix}/${seg(k.appName)}/sessions/${seg(k.userId)}/${seg(k.sessionId)}`;
  }

  /** eventsFolder is where a session's parts live. */
  eventsFolder(k: Key): string {
    return `${this.prefix}/${seg(k.appName)}/events/${seg(k.userId)}/${seg(k.sessionId)}`;
  }

  /** appStateName is the artifact of an app's state. */
  appStateName(appName: string): string {
    return `${this.prefix}/${seg(appName)}/state`;
  }

  /** userStateName is the artifact of a user's state in an app. */
  userStateName(appName: string, userId: string): string {
    return `${this.prefix}/${seg(appName)}/users/${seg(userId)}`;
  }

  /** leaseResource is the lock a session's worker holds under a lease. */
  leaseResource(k: Key): string {
    return `artifact:${this.headName(k)}`;
  }

  private serial<T>(name: string, op: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(name) ?? Promise.resolve();
    const next = prev.then(op, op);
    const tail = next.catch(() => undefined);
    this.queues.set(name, tail);
    void tail.then(() => {
      if (this.queues.get(name) === tail) this.queues.delete(name);
    });
    return next;
  }

  // lease returns the session's held lease (taking it if need be) under
  // the lease option, or undefined; a lost one is refused until acquire.
  private async lease(k: Key, retake = false): Promise<SessionLease | undefined> {
    if (!this.leaseOpts) {
      if (retake) throw new TypeError("AgentspaceSessionService: acquire needs the lease option");
      return undefined;
    }
    const name = this.headName(k);
    let l = this.leases.get(name);
    if (l && l.lost !== undefined && retake) l = undefined;
    if (!l) {
      l = await SessionLease.take(this.ws, this.leaseResource(k), this.actor, this.leaseOpts, `adk session ${k.appName}/${k.userId}/${k.sessionId}`);
      this.leases.set(name, l);
    }
    l.check();
    return l;
  }

  /** acquire takes a session's lease now (LockedError naming the holder), or returns the one held; after a loss, anew. */
  async acquire(k: Key): Promise<Lease> {
    return this.serial(this.headName(k), async () => (await this.lease(k, true))!.lease);
  }

  /** release gives a session's lease up, if held: another worker may take the session. */
  async release(k: Key): Promise<void> {
    const name = this.headName(k);
    await this.serial(name, async () => {
      const l = this.leases.get(name);
      this.leases.delete(name);
      await l?.release();
    });
  }

  /** close releases every lease this service holds. */
  async close(): Promise<void> {
    await Promise.all(
      [...this.leases.entries()].map(async ([name, l]) => {
        this.leases.delete(name);
        await l.release();
      }),
    );
  }

  private async readHead(k: Key): Promise<Head | undefined> {
    try {
      const a = await this.ws.artifacts.get(this.headName(k));
      return { version: a.version, doc: decode<HeadDoc>(artifactText(a)), updated: updatedAt(a) };
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  private async readScoped(name: string): Promise<Scoped | undefined> {
    try {
      const a = await this.ws.artifacts.get(name);
      return { version: a.version, value: decode<Record<string, unknown>>(artifactText(a)) };
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  // scopedOp writes delta over cur (conditionally on its version), or
  // creates the record.
  private scopedOp(name: string, cur: Scoped | undefined, delta: Record<string, unknown>): BatchOp {
    const content = encode({ ...cur?.value, ...delta });
    return cur
      ? { op: "update_artifact", name, if_version: cur.version, content }
      : { op: "create_artifact", name, kind: "adk-state", content_type: "application/json", content };
  }

  private session(k: Key, h: Head, app: Scoped | undefined, user: Scoped | undefined, events: Event[]): Session {
    const s = createSession({
      id: k.sessionId,
      appName: k.appName,
      userId: k.userId,
      state: mergeStates(app?.value ?? {}, user?.value ?? {}, h.doc.state),
      events: events.map((e) => createEvent(e)),
      lastUpdateTime: h.updated,
    });
    this.known.set(s, h);
    return s;
  }

  /**
   * createSession makes a session (AlreadyExistsError when the id is
   * taken) with the initial state's app:, user: and session keys, in one
   * batch.
   */
  async createSession({ appName, userId, state, sessionId }: CreateSessionRequest): Promise<Session> {
    const k: Key = { appName, userId, sessionId: sessionId?.trim() || randomUUID() };
    const parts = split(trimTempState(state ?? {}));
    const name = this.headName(k);
    return this.serial(name, async () => {
      const lease = await this.lease(k);
      const doc: HeadDoc = { app: appName, user: userId, id: k.sessionId, state: parts.session, log: freshLog() };
      return retrying(
        this.ws,
        async () => {
          const [app, user] = await Promise.all([this.readScoped(this.appStateName(appName)), this.readScoped(this.userStateName(appName, userId))]);
          const ops: BatchOp[] = [{ op: "create_artifact", name, kind: "adk-session", content_type: "application/json", content: encode(doc), fence: lease?.token }];
          if (!empty(parts.app)) ops.push(this.scopedOp(this.appStateName(appName), app, parts.app));
          if (!empty(parts.user)) ops.push(this.scopedOp(this.userStateName(appName, userId), user, parts.user));
          const res = await this.ws.batch(ops, { actor: this.actor }).catch((e) => {
            if (failedOp(e, ops.length) === 0) {
              if (lease && (e instanceof StaleFenceError || e instanceof LockedError)) lease.lose(e);
              throw new Final(e);
            }
            throw e;
          });
          const a = res.results![0].artifact!;
          const merged = (cur: Scoped | undefined, d: Record<string, unknown>): Scoped => ({ version: 0, value: { ...cur?.value, ...d } });
          return this.session(k, { version: a.version, doc, updated: updatedAt(a) }, merged(app, parts.app), merged(user, parts.user), []);
        },
        // The head's create is op 0: a taken id is the caller's to handle.
        (e) => moved(e),
      ).catch(unwrap);
    });
  }

  // events returns the events of h that config asks for: the last
  // numRecentEvents, then those from the first one at or after
  // afterTimestamp (as InMemorySessionService does).
  private async events(k: Key, h: Head, config: GetSessionRequest["config"]): Promise<Event[]> {
    const base = this.eventsFolder(k);
    let events: Event[];
    if (config?.numRecentEvents) events = await this.log.tail(base, h.doc.log, config.numRecentEvents);
    else if (config?.afterTimestamp) {
      // Only the parts from the last one with an event before afterTimestamp.
      let from = h.doc.log.parts.length - 1;
      while (from > 0 && !((h.doc.log.parts[from].t0 ?? -Infinity) < config.afterTimestamp)) from--;
      events = (await this.log.load(base, h.doc.log, h.doc.log.parts.slice(Math.max(0, from)))).flat();
    } else events = await this.log.tail(base, h.doc.log);
    if (config?.afterTimestamp) {
      let i = events.length - 1;
      while (i >= 0 && !(events[i].timestamp < config.afterTimestamp)) i--;
      events = events.slice(i + 1);
    }
    return events;
  }

  /** getSession reads a session (undefined when there is none); under a lease it takes the session's lease first. */
  async getSession({ appName, userId, sessionId, config }: GetSessionRequest): Promise<Session | undefined> {
    const k: Key = { appName, userId, sessionId };
    if (this.leaseOpts) await this.serial(this.headName(k), () => this.lease(k));
    return retrying(
      this.ws,
      async () => {
        const [h, app, user] = await Promise.all([this.readHead(k), this.readScoped(this.appStateName(appName)), this.readScoped(this.userStateName(appName, userId))]);
        if (!h) return undefined;
        return this.session(k, h, app, user, await this.events(k, h, config));
      },
      (e) => e instanceof NotFoundError,
    );
  }

  /**
   * listSessions lists an app's sessions (one user's, with userId), without
   * their events or state, as InMemorySessionService does: ordered by last
   * update if order says so, and paged by limit with page or offset.
   */
  async listSessions({ appName, userId, limit, offset, page, order }: ListSessionsRequest): Promise<ListSessionsResponse> {
    const prefix = `${this.prefix}/${seg(appName)}/sessions/` + (userId !== undefined ? `${seg(userId)}/` : "");
    const all: Session[] = [];
    for await (const a of this.ws.listAllArtifacts({ name_prefix: prefix, limit: 1000 })) {
      const rest = a.name.slice(`${this.prefix}/${seg(appName)}/sessions/`.length).split("/");
      if (rest.length !== 2) continue;
      all.push(createSession({ id: unseg(rest[1]), appName, userId: unseg(rest[0]), state: {}, events: [], lastUpdateTime: updatedAt(a) }));
    }
    if (order === "asc") all.sort((a, b) => a.lastUpdateTime - b.lastUpdateTime || a.id.localeCompare(b.id));
    else if (order === "desc") all.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime || a.id.localeCompare(b.id));
    const totalItems = all.length;
    if (limit === undefined) {
      return { sessions: offset ? all.slice(offset) : all, page: 1, limit: totalItems, totalItems, totalPages: totalItems === 0 ? 0 : 1 };
    }
    const at = page !== undefined ? (page - 1) * limit : (offset ?? 0);
    return {
      sessions: all.slice(at, at + limit),
      page: page ?? (limit === 0 ? 1 : Math.floor(at / limit) + 1),
      limit,
      totalItems,
      totalPages: limit === 0 ? 0 : Math.ceil(totalItems / limit),
    };
  }

  /** deleteSession deletes a session's head and events in one batch (nothing when there is no such session), and its lease. */
  async deleteSession(k: DeleteSessionRequest): Promise<void> {
    const name = this.headName(k);
    await this.serial(name, async () => {
      const lease = await this.lease(k);
      const gone = await retrying(
        this.ws,
        async () => {
          const h = await this.readHead(k);
          if (!h) return undefined;
          const parts = h.doc.log.parts.length < 999 ? h.doc.log.parts : [];
          const ops: BatchOp[] = [
            { op: "delete_artifact", name, if_version: h.version, fence: lease?.token },
            ...parts.map((p): BatchOp => ({ op: "delete_artifact", name: this.log.partName(this.eventsFolder(k), h.doc.log, p.seq) })),
          ];
          try {
            await this.ws.batch(ops, { actor: this.actor });
          } catch (e) {
            // Deleted by another writer meanwhile: done.
            if (e instanceof NotFoundError && failedOp(e, ops.length) === 0) return undefined;
            throw e;
          }
          return h.doc.log.parts.length < 999 ? undefined : h.doc.log.epoch;
        },
        moved,
      );
      if (gone !== undefined) await this.log.deleteEpoch(this.eventsFolder(k), gone, this.actor);
      this.leases.delete(name);
      await lease?.release();
    });
  }

  // merge merges the parts of the session's head after an append, once,
  // conditional on the head this session object knows (if another writer
  // moved it, the merge is dropped: that writer's next append merges). The
  // object keeps knowing the head it wrote, so merging makes it no staler.
  private async merge(k: Key, session: Session, lease: SessionLease | undefined): Promise<void> {
    const h = this.known.get(session);
    if (!h) return;
    try {
      const m = await this.log.planMerge(this.eventsFolder(k), h.doc.log);
      if (!m) return;
      const doc: HeadDoc = { ...h.doc, log: m.log };
      const ops: BatchOp[] = [{ op: "update_artifact", name: this.headName(k), if_version: h.version, fence: lease?.token, content: encode(doc) }, ...m.ops];
      const res = await this.ws.batch(ops, { actor: this.actor });
      const a = res.results![0].artifact!;
      this.known.set(session, { version: a.version, doc, updated: updatedAt(a) });
      this.log.keep(m.created);
      session.lastUpdateTime = updatedAt(a);
    } catch (e) {
      // The append stands. A fence the server refused (op 0, the head's write) means the lease is lost.
      if (lease && e instanceof AgentspaceError && e.batchIndex === 0 && (e instanceof StaleFenceError || e instanceof LockedError)) lease.lose(e);
    }
  }

  /**
   * appendEvent commits the event with its state deltas (the session's,
   * the app's, the user's) in one batch, conditional on the session being
   * as it was read: StaleSessionError otherwise, and nothing written. An
   * event whose id the session holds replaces it. A partial event is not
   * stored. Then it applies the event to the session object, as
   * BaseSessionService does.
   */
  override async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    if (event.partial) return event;
    const k: Key = { appName: session.appName, userId: session.userId, sessionId: session.id };
    const name = this.headName(k);
    event = trimTempDeltaState(event);
    if (!event.id) event.id = randomUUID();
    const stored = decode<Event>(encode(event));
    const delta = split(event.actions?.stateDelta);
    const replaces = session.events.some((e) => e.id === event.id);
    await this.serial(name, async () => {
      const lease = await this.lease(k);
      let h = this.known.get(session);
      if (!h) {
        // A session object this service did not make: ADK's own check, by time.
        h = await this.readHead(k);
        if (!h) throw new NotFoundError("not_found", 404, `appendEvent: session ${k.sessionId} of ${k.userId} in ${k.appName} not found`);
        if (h.updated > session.lastUpdateTime) {
          throw new StaleSessionError(`appendEvent: session ${k.sessionId} was changed after it was read (a stale session): read it again`, { expected: 0, current: h.version, name });
        }
      }
      const known = h;
      const base = this.eventsFolder(k);
      await retrying(
        this.ws,
        async () => {
          const [app, user] = await Promise.all([
            empty(delta.app) ? undefined : this.readScoped(this.appStateName(k.appName)),
            empty(delta.user) ? undefined : this.readScoped(this.userStateName(k.appName, k.userId)),
          ]);
          let plan = undefined;
          if (replaces) {
            // The part that holds the event, newest first.
            for (let i = known.doc.log.parts.length - 1; i >= 0 && !plan; i--) {
              const [entries] = await this.log.load(base, known.doc.log, [known.doc.log.parts[i]]);
              const at = entries.findIndex((e) => e.id === event.id);
              if (at >= 0) plan = this.log.planRewrite(base, known.doc.log, i, entries.map((e, j) => (j === at ? stored : e)));
            }
          }
          plan ??= this.log.planAppend(base, known.doc.log, [stored]);
          const doc: HeadDoc = { ...known.doc, state: { ...known.doc.state, ...delta.session }, log: plan.log };
          const ops: BatchOp[] = [{ op: "update_artifact", name, if_version: known.version, fence: lease?.token, content: encode(doc) }, ...plan.ops];
          if (!empty(delta.app)) ops.push(this.scopedOp(this.appStateName(k.appName), app, delta.app));
          if (!empty(delta.user)) ops.push(this.scopedOp(this.userStateName(k.appName, k.userId), user, delta.user));
          let res;
          try {
            res = await this.ws.batch(ops, { actor: this.actor });
          } catch (e) {
            if (failedOp(e, ops.length) === 0) {
              if (e instanceof ConflictError) {
                throw new StaleSessionError(`appendEvent: session ${k.sessionId} is at version ${e.current}, not ${known.version} as read (another writer appended): read it again`, {
                  expected: known.version,
                  current: e.current,
                  name,
                });
              }
              if (lease && (e instanceof StaleFenceError || e instanceof LockedError)) lease.lose(e);
              throw new Final(e);
            }
            throw e;
          }
          const a = res.results![0].artifact!;
          this.known.set(session, { version: a.version, doc, updated: updatedAt(a) });
          this.log.keep(plan.created);
          session.lastUpdateTime = updatedAt(a);
        },
        (e) => moved(e) && !(e instanceof StaleSessionError),
      ).catch(unwrap);
      await this.merge(k, session, lease);
    });
    await super.appendEvent({ session, event });
    return event;
  }
}
