// The client: one method per operation of the HTTP API, typed from the
// server's OpenAPI document (src/openapi.ts, generated).

import type { components } from "./openapi.js";
import { Transport, duration, newKey, type ClientOptions } from "./transport.js";
import { follow, followInbox, type FollowOptions, type InboxStreamOptions } from "./follow.js";
import { withClaim, withLock, type ClaimHandle, type ClaimOptions, type LockOptions, type LockHandle } from "./agent.js";
import { waitForWork, type Work, type WaitForWorkOptions } from "./wait.js";

type S = components["schemas"];
/** Artifact is an artifact record as the server sends it. */
export type Artifact = S["ArtifactWire"];
/** Task is a task record. */
export type Task = S["Task"];
/** Note is a note record. */
export type Note = S["Note"];
/** Lease is a lock lease with its fencing token. */
export type Lease = S["Lease"];
/** Event is one entry of the event log. */
export type Event = S["Event"];
/** Status is the dashboard's summary. */
export type Status = S["Status"];
/** BatchOp is one op of a batch, named by `op`. */
export type BatchOp = S["OpBody"];
/** BatchResult is a committed batch: each op's record and the events. */
export type BatchResult = S["BatchResult"];
/** TaskResult is a finished task's summary and artifacts. */
export type TaskResult = S["TaskResult"];
/** EventPage is one page of the log's history. */
export type EventPage = S["EventPage"];
/** Msg is a message between agents; `from` is the principal that sent it, `pending` who still owes an ack. */
export type Msg = S["Msg"];
/** MsgAck is one recorded acknowledgement. */
export type MsgAck = S["MsgAck"];
/** InboxPage is one page of an inbox, oldest first, with its unread and unacked counts, its read cursor, and whether the actor is paused. */
export type InboxPage = Omit<S["InboxPage"], "messages"> & { messages: Msg[] };
/** InboxEvent is one record of the inbox stream: the event's seq and type, and its message as it stands. */
export type InboxEvent = S["InboxEvent"];
/** AgentPause is what pausing or resuming an agent did: the message it sent the agent, and the events. */
export type AgentPause = S["AgentPause"];

/**
 * NewMessage is what messages.send takes: recipients (actors, and
 * "role:NAME"), the text, and optionally a type (default note), a
 * severity (info, warning, error, critical), data (a JSON object), and
 * requires_ack with a deadline (a Date or an RFC 3339 time) and whom to
 * escalate to when it passes unacknowledged (default role:admin).
 */
export type NewMessage = Omit<S["MessageBody"], "deadline"> & { deadline?: Date | string; idempotency_key?: string };

/** InboxQuery filters inbox.read. */
export interface InboxQuery {
  /** Whose inbox (another's needs the admin role); default the caller's. */
  actor?: string;
  /** Only the messages after the read cursor. */
  unread?: boolean;
  /** Only the messages the caller still owes an ack. */
  unacked?: boolean;
  /** Only one thread's messages (its first message's id). */
  thread?: string;
  /** A page's next: the page after it. */
  after?: string;
  limit?: number;
  /**
   * Long poll: wait up to this long (ms) for the page to hold a message;
   * after it, the empty page with the counts. The server answers at its
   * --max-wait at most; the call asks again until wait has passed.
   */
  wait?: number;
  signal?: AbortSignal;
}

/** Write holds a write's conditions; the client fills idempotency_key when absent. */
export interface Write {
  actor?: string;
  /**
   * Fail with ConflictError unless the stored version is this. Absent or 0:
   * no condition, as the Go API's IfVersion 0 (versions start at 1).
   */
  if_version?: number;
  /** Fail with StaleFenceError if the record's lock issued a newer token. */
  fence?: number;
  message?: string;
  /** A retry with the same key returns the first result; generated when absent. */
  idempotency_key?: string;
}

/** Content is text (sent as utf-8) or bytes (sent as base64). */
export type Content = string | Uint8Array;

/** NewArtifact is what artifacts.create takes. */
export interface NewArtifact extends Write {
  name: string;
  kind?: string;
  content?: Content;
  content_type?: string;
  labels?: Record<string, string>;
  task_id?: string;
}

/** ArtifactChange changes an artifact: absent fields stay. */
export interface ArtifactChange extends Write {
  content?: Content;
  kind?: string;
  content_type?: string;
  owner?: string;
  task_id?: string;
  labels?: Record<string, string>;
}

/** Ref names an artifact by name (default) or by id. */
export type Ref = string | { id: string };

/** ListArtifacts filters artifacts.list. */
export interface ListArtifacts {
  kind?: string;
  owner?: string;
  name_prefix?: string;
  task_id?: string;
  labels?: Record<string, string>;
  after?: string;
  limit?: number;
}

/** Defaults are write fields every write of a view carries (see Agentspace.fenced). */
interface Defaults {
  fence?: number;
}

function contentFields(c: Content | undefined): { content?: string; content_encoding?: "utf-8" | "base64" } {
  if (c === undefined) return {};
  if (typeof c === "string") return { content: c };
  return { content: Buffer.from(c.buffer, c.byteOffset, c.byteLength).toString("base64"), content_encoding: "base64" };
}

/** artifactBytes returns an artifact's content as bytes. */
export function artifactBytes(a: Artifact): Uint8Array {
  if (a.content === undefined) return new Uint8Array();
  return a.content_encoding === "base64" ? new Uint8Array(Buffer.from(a.content, "base64")) : new TextEncoder().encode(a.content);
}

/** artifactText returns an artifact's content as text (utf-8). */
export function artifactText(a: Artifact): string {
  if (a.content === undefined) return "";
  return a.content_encoding === "base64" ? Buffer.from(a.content, "base64").toString("utf8") : a.content;
}

function refPath(ref: Ref): { path: string; by?: string } {
  if (typeof ref === "string") return { path: `/v1/artifacts/${encodeURIComponent(ref)}` };
  return { path: `/v1/artifacts/${encodeURIComponent(ref.id)}`, by: "id" };
}

function labelsQuery(labels?: Record<string, string>): string | undefined {
  return labels && Object.keys(labels).length > 0 ? JSON.stringify(labels) : undefined;
}

/**
 * Agentspace is a client of one `wsctl serve`. It is safe to share; its
 * views (artifacts, tasks, notes, locks, events) use one connection pool.
 */
export class Agentspace {
  readonly transport: Transport;
  private readonly defaults: Defaults;

  constructor(opts: ClientOptions | Transport = {}, defaults: Defaults = {}) {
    this.transport = opts instanceof Transport ? opts : new Transport(opts);
    this.defaults = defaults;
  }

  /**
   * fenced returns a view of this client whose every write carries fence
   * (a lease's token) unless the write names its own.
   */
  fenced(fence: number): Agentspace {
    return new Agentspace(this.transport, { ...this.defaults, fence });
  }

  private w<T extends Write>(w: T): T & { idempotency_key: string } {
    return { fence: this.defaults.fence, ...w, idempotency_key: w.idempotency_key ?? newKey() };
  }

  private writeQuery(w: Write = {}): Record<string, string | number | undefined> {
    const k = this.w(w);
    return { actor: k.actor, if_version: k.if_version, fence: k.fence, message: k.message, idempotency_key: k.idempotency_key };
  }

  private get t(): Transport {
    return this.transport;
  }

  /** whoami says who requests act as. */
  whoami(): Promise<S["Whoami"]> {
    return this.t.call({ method: "GET", path: "/v1/whoami", retry: true });
  }

  /** status is the dashboard: counts, active tasks, live locks, recent events. */
  status(): Promise<Status> {
    return this.t.call({ method: "GET", path: "/v1/status", retry: true });
  }

  /** Artifacts: versioned, typed content. */
  readonly artifacts = {
    create: (a: NewArtifact): Promise<Artifact> => {
      const { content, ...rest } = a;
      return this.t.call({ method: "POST", path: "/v1/artifacts", body: { ...this.w(rest), ...contentFields(content) }, retry: true });
    },
    get: (ref: Ref, opts: { version?: number; signal?: AbortSignal } = {}): Promise<Artifact> => {
      const r = refPath(ref);
      return this.t.call({ method: "GET", path: r.path, query: { by: r.by, version: opts.version }, retry: true, signal: opts.signal });
    },
    update: (ref: Ref, c: ArtifactChange): Promise<Artifact> => {
      const r = refPath(ref);
      const { content, ...rest } = c;
      return this.t.call({ method: "PATCH", path: r.path, query: { by: r.by }, body: { ...this.w(rest), ...contentFields(content) }, retry: true });
    },
    delete: (ref: Ref, w: Write = {}): Promise<void> => {
      const r = refPath(ref);
      return this.t.call({ method: "DELETE", path: r.path, query: { by: r.by, ...this.writeQuery(w) }, retry: true });
    },
    rollback: (ref: Ref, to: number, w: Write = {}): Promise<Artifact> => {
      const r = refPath(ref);
      return this.t.call({ method: "POST", path: `${r.path}/rollback`, query: { by: r.by }, body: { ...this.w(w), to }, retry: true });
    },
    versions: async (ref: Ref): Promise<Artifact[]> => {
      const r = refPath(ref);
      const v = await this.t.call<S["Versions"]>({ method: "GET", path: `${r.path}/versions`, query: { by: r.by }, retry: true });
      return (v.versions ?? []) as Artifact[];
    },
    list: async (f: ListArtifacts = {}): Promise<{ artifacts: Artifact[]; next: string }> => {
      const { labels, ...q } = f;
      const p = await this.t.call<S["ArtifactPage"]>({ method: "GET", path: "/v1/artifacts", query: { ...q, labels: labelsQuery(labels) }, retry: true });
      return { artifacts: (p.artifacts ?? []) as Artifact[], next: p.next };
    },
  };

  /** listAllArtifacts yields every artifact the filter matches, following pages. */
  async *listAllArtifacts(f: ListArtifacts = {}): AsyncGenerator<Artifact> {
    let after = f.after;
    for (;;) {
      const page = await this.artifacts.list({ ...f, after });
      yield* page.artifacts;
      if (!page.next) return;
      after = page.next;
    }
  }

  /** Tasks: what is to be done, by whom, in what order. */
  readonly tasks = {
    create: (t: S["NewTaskBody"] & Write): Promise<Task> =>
      this.t.call({ method: "POST", path: "/v1/tasks", body: this.w(t), retry: true }),
    get: (id: string): Promise<Task> => this.t.call({ method: "GET", path: `/v1/tasks/${encodeURIComponent(id)}`, retry: true }),
    update: (id: string, c: S["TaskChangeBody"] & Write): Promise<Task> =>
      this.t.call({ method: "PATCH", path: `/v1/tasks/${encodeURIComponent(id)}`, body: this.w(c), retry: true }),
    list: async (f: { status?: string; assignee?: string; parent_id?: string; labels?: Record<string, string>; after?: string; limit?: number } = {}): Promise<{ tasks: Task[]; next: string }> => {
      const { labels, ...q } = f;
      const p = await this.t.call<S["TaskPage"]>({ method: "GET", path: "/v1/tasks", query: { ...q, labels: labelsQuery(labels) }, retry: true });
      return { tasks: p.tasks ?? [], next: p.next };
    },
    /**
     * claim takes the best ready task for the actor (NoTaskError when none
     * is ready within wait). Not retried: a lost answer leaves a claim that
     * returns to pending when its lease ends.
     */
    claim: (o: { lease?: number | string; wait?: number | string; labels?: Record<string, string>; parent_id?: string; actor?: string; signal?: AbortSignal } = {}): Promise<Task> =>
      this.t.call({
        method: "POST",
        path: "/v1/tasks/claim",
        body: { actor: o.actor, lease: duration(o.lease), wait: duration(o.wait), labels: o.labels, parent_id: o.parent_id },
        signal: o.signal,
      }),
    heartbeat: (id: string, o: Write & { lease?: number | string } = {}): Promise<Task> =>
      this.t.call({ method: "POST", path: `/v1/tasks/${encodeURIComponent(id)}/heartbeat`, body: { ...this.w(o), lease: duration(o.lease) }, retry: true }),
    complete: (id: string, r: Write & { summary?: string; artifacts?: string[] } = {}): Promise<Task> =>
      this.t.call({ method: "POST", path: `/v1/tasks/${encodeURIComponent(id)}/complete`, body: this.w(r), retry: true }),
    fail: (id: string, r: Write & { summary?: string; artifacts?: string[] } = {}): Promise<Task> =>
      this.t.call({ method: "POST", path: `/v1/tasks/${encodeURIComponent(id)}/fail`, body: this.w(r), retry: true }),
    release: (id: string, w: Write = {}): Promise<Task> =>
      this.t.call({ method: "POST", path: `/v1/tasks/${encodeURIComponent(id)}/release`, body: this.w(w), retry: true }),
  };

  /** Notes: shared context by kind and key. */
  readonly notes = {
    put: (kind: string, key: string, n: { title?: string; body?: string } & Write): Promise<Note> =>
      this.t.call({ method: "PUT", path: `/v1/notes/${encodeURIComponent(kind)}/${encodeURIComponent(key)}`, body: this.w(n), retry: true }),
    get: (kind: string, key: string): Promise<Note> =>
      this.t.call({ method: "GET", path: `/v1/notes/${encodeURIComponent(kind)}/${encodeURIComponent(key)}`, retry: true }),
    delete: (kind: string, key: string, w: Write = {}): Promise<void> =>
      this.t.call({ method: "DELETE", path: `/v1/notes/${encodeURIComponent(kind)}/${encodeURIComponent(key)}`, query: this.writeQuery(w), retry: true }),
    list: async (f: { kind?: string; after?: string; limit?: number } = {}): Promise<{ notes: Note[]; next: string }> => {
      const p = await this.t.call<S["NotePage"]>({ method: "GET", path: "/v1/notes", query: f, retry: true });
      return { notes: p.notes ?? [], next: p.next };
    },
  };

  /** Locks: leases with fencing tokens. */
  readonly locks = {
    /** acquire takes the lease (LockedError naming the holder when held and wait runs out); again by its owner, extends it. */
    acquire: (resource: string, o: { ttl: number | string; wait?: number | string; actor?: string; message?: string; signal?: AbortSignal }): Promise<Lease> =>
      this.t.call({
        method: "POST",
        path: `/v1/locks/${encodeURIComponent(resource)}/acquire`,
        body: { actor: o.actor, message: o.message, ttl: duration(o.ttl), wait: duration(o.wait) },
        signal: o.signal,
        retry: o.wait === undefined,
      }),
    renew: (resource: string, o: { token: number; ttl?: number | string; actor?: string }): Promise<Lease> =>
      this.t.call({ method: "POST", path: `/v1/locks/${encodeURIComponent(resource)}/renew`, body: { actor: o.actor, token: o.token, ttl: duration(o.ttl) }, retry: true }),
    release: (resource: string, o: { token: number; actor?: string }): Promise<void> =>
      this.t.call({ method: "POST", path: `/v1/locks/${encodeURIComponent(resource)}/release`, body: { actor: o.actor, token: o.token } }),
    forceRelease: (resource: string, w: Write = {}): Promise<void> =>
      this.t.call({ method: "POST", path: `/v1/locks/${encodeURIComponent(resource)}/force-release`, body: this.w(w), retry: true }),
    get: (resource: string): Promise<Lease> => this.t.call({ method: "GET", path: `/v1/locks/${encodeURIComponent(resource)}`, retry: true }),
    list: async (): Promise<Lease[]> => (await this.t.call<S["Leases"]>({ method: "GET", path: "/v1/locks", retry: true })).locks ?? [],
  };

  /** Events: the log, its history, and the live stream. */
  readonly events = {
    head: async (): Promise<number> => (await this.t.call<S["Head"]>({ method: "GET", path: "/v1/events/head", retry: true })).head,
    history: (q: { after?: number; type?: string[]; actor?: string; subject_kind?: string; subject_id?: string; subject_name?: string; since?: string; until?: string; limit?: number } = {}): Promise<EventPage> =>
      this.t.call({ method: "GET", path: "/v1/events/history", query: { ...q, type: q.type?.join(",") }, retry: true }),
    compact: (floor: number): Promise<void> => this.t.call({ method: "POST", path: "/v1/events/compact", body: { floor }, retry: true }),
  };

  /** Messages between agents (docs/messages.md). */
  readonly messages = {
    /** send sends a message as the caller; see NewMessage. */
    send: (m: NewMessage): Promise<Msg> => {
      const { deadline, idempotency_key, ...rest } = m;
      const body = { ...rest, deadline: deadline instanceof Date ? deadline.toISOString() : deadline, idempotency_key: idempotency_key ?? newKey() };
      return this.t.call({ method: "POST", path: "/v1/messages", body, retry: true });
    },
    /** get reads a message the caller sent or received (NotFoundError for anyone else's). */
    get: (id: string): Promise<Msg> => this.t.call({ method: "GET", path: `/v1/messages/${encodeURIComponent(id)}`, retry: true }),
    /** ack acknowledges a message the caller owes an ack, once: acking again answers the first ack's record. */
    ack: (id: string, o: { reply?: string; idempotency_key?: string } = {}): Promise<Msg> =>
      this.t.call({ method: "POST", path: `/v1/messages/${encodeURIComponent(id)}/ack`, body: { reply: o.reply, idempotency_key: o.idempotency_key ?? newKey() }, retry: true }),
    /** escalate escalates what is past its ack deadline now (a server does it every second); returns those escalated by this call. */
    escalate: async (): Promise<Msg[]> =>
      (await this.t.call<S["Escalated"]>({ method: "POST", path: "/v1/messages/escalate", body: {}, retry: true })).messages ?? [],
  };

  /** The caller's inbox: pages, the read cursor, and the live stream. */
  readonly inbox = {
    /** read returns one page of the inbox, oldest first, with its counts; with wait, a long poll. */
    read: async (q: InboxQuery = {}): Promise<InboxPage> => {
      const { wait, signal, ...filter } = q;
      const deadline = Date.now() + (wait ?? 0);
      for (;;) {
        const left = deadline - Date.now();
        const page = await this.t.call<S["InboxPage"]>({
          method: "GET",
          path: "/v1/inbox",
          query: { ...filter, wait: left > 0 ? duration(left) : undefined },
          retry: true,
          signal,
        });
        const messages = page.messages ?? [];
        if (messages.length > 0 || deadline - Date.now() <= 0) return { ...page, messages };
      }
    },
    /** markRead moves the caller's read cursor to message id (never back), across restarts. */
    markRead: (id: string): Promise<void> => this.t.call({ method: "POST", path: "/v1/inbox/read", body: { id }, retry: true }),
    /**
     * stream yields the inbox as it changes, after opts.after: each message
     * sent to the caller or a role it holds, and each ack or escalation of
     * one. It reconnects after a drop and resumes after the last seq seen.
     */
    stream: (opts: InboxStreamOptions = {}): AsyncGenerator<InboxEvent> => followInbox(this.transport, opts),
  };

  /** Agents: pause and resume (the admin "tokens" right). */
  readonly agents = {
    /**
     * pause refuses the agent's writes (PausedError) until resume, except
     * acks, lock renewals, task heartbeats and releases; it sends the agent
     * a `pause` message that needs its ack (by ackTimeout, ms or "5m", if
     * given; else escalated). Pausing a paused agent returns the first pause.
     */
    pause: (actor: string, o: { message?: string; ackTimeout?: number | string } = {}): Promise<AgentPause> =>
      this.t.call({ method: "POST", path: `/v1/agents/${encodeURIComponent(actor)}/pause`, body: { message: o.message, ack_timeout: duration(o.ackTimeout) }, retry: true }),
    /** resume ends a pause (NotFoundError when the agent is not paused) and sends the agent a `resume` message. */
    resume: (actor: string, o: { message?: string } = {}): Promise<AgentPause> =>
      this.t.call({ method: "POST", path: `/v1/agents/${encodeURIComponent(actor)}/resume`, body: { message: o.message } }),
  };

  /**
   * waitForWork blocks until the caller has an unread message or a task
   * is ready to claim (with opts' filters), whichever comes first, or
   * opts.timeout (ms) passes: then both lists are empty. The inbox's long
   * poll races the task events' stream; nothing polls on a timer.
   */
  waitForWork(opts: WaitForWorkOptions = {}): Promise<Work> {
    return waitForWork(this, opts);
  }

  /**
   * batch commits ops all or nothing; a failing op's error carries its
   * batchIndex. Retried with one idempotency key, so it applies once.
   */
  batch(ops: BatchOp[], w: { actor?: string; idempotency_key?: string } = {}): Promise<BatchResult> {
    const fenced = this.defaults.fence === undefined ? ops : ops.map((op) => ({ fence: this.defaults.fence, ...op }));
    return this.t.call({ method: "POST", path: "/v1/batch", body: { actor: w.actor, idempotency_key: w.idempotency_key ?? newKey(), ops: fenced }, retry: true });
  }

  /**
   * follow yields every event after `after` (that matches the filter) once,
   * in order, live; it reconnects after a dropped connection or a server
   * restart and resumes after the last seq it saw.
   */
  follow(opts: FollowOptions = {}): AsyncGenerator<Event> {
    return follow(this.transport, opts);
  }

  /**
   * withClaim claims a task, heartbeats it while fn runs, then completes it
   * with fn's result (or fails it with fn's error). NoTaskError when none
   * is ready.
   */
  withClaim<T>(fn: (claim: ClaimHandle) => Promise<T>, opts: ClaimOptions = {}): Promise<T> {
    return withClaim(this, fn, opts);
  }

  /**
   * withLock holds the lease on resource for as long as fn runs, renewing
   * it; fn gets a view whose writes carry the lease's fence, and a signal
   * that aborts if the lease is lost.
   */
  withLock<T>(resource: string, fn: (lock: LockHandle) => Promise<T>, opts: LockOptions): Promise<T> {
    return withLock(this, resource, fn, opts);
  }
}
