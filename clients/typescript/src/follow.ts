// follow and followInbox: the event log, or one inbox, as an async
// iterator over Server-Sent Events.
//
// Invariant: `last` is the highest seq the stream has shown us (an event's
// or a heartbeat's id), and every (re)connection asks for seq > last; the
// server sends each seq once, in order, so a reconnect can neither skip
// nor repeat an event. An event at or below `last` is dropped all the same.

import type { components } from "./openapi.js";
import { AgentspaceError, ConnectionError, ProtocolError, UnavailableError, errorFromProblem } from "./errors.js";
import { Transport, backoff, duration, sleep } from "./transport.js";

type Event = components["schemas"]["Event"];
type InboxEvent = components["schemas"]["InboxEvent"];

/** FollowOptions filter and tune a follow. */
export interface FollowOptions {
  /** Yield events with seq > after; default 0 (the whole log). */
  after?: number;
  /** Only these event types (e.g. task.claimed). */
  type?: string[];
  actor?: string;
  subject_kind?: string;
  subject_id?: string;
  subject_name?: string;
  /** Ask the server for a heartbeat after this much idle time (ms); a stream silent for three is made again. Default 5000. */
  heartbeat?: number;
  /** Give up (ConnectionError) after failing to connect for this long (ms); default 60000. */
  giveUpAfter?: number;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Called with the seq of every heartbeat: a consumer may checkpoint it. */
  onHeartbeat?: (seq: number) => void;
}

/** InboxStreamOptions tune a follow of one's inbox. */
export interface InboxStreamOptions {
  /** Yield the records of events with seq > after; default 0 (every message of the inbox). */
  after?: number;
  /** Whose inbox (another's needs the admin role); default the caller's. */
  actor?: string;
  /** Ask the server for a heartbeat after this much idle time (ms); a stream silent for three is made again. Default 5000. */
  heartbeat?: number;
  /** Give up (ConnectionError) after failing to connect for this long (ms); default 60000. */
  giveUpAfter?: number;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Called with the seq of every heartbeat: a consumer may checkpoint it. */
  onHeartbeat?: (seq: number) => void;
}

/** follow yields events after opts.after, live, resuming after drops. */
export function follow(t: Transport, opts: FollowOptions = {}): AsyncGenerator<Event> {
  const query = {
    type: opts.type?.join(","),
    actor: opts.actor,
    subject_kind: opts.subject_kind,
    subject_id: opts.subject_id,
    subject_name: opts.subject_name,
  };
  return stream<Event>(t, "/v1/events", query, opts);
}

/** followInbox yields an inbox's records after opts.after, live, resuming after drops. */
export function followInbox(t: Transport, opts: InboxStreamOptions = {}): AsyncGenerator<InboxEvent> {
  return stream<InboxEvent>(t, "/v1/inbox/stream", { actor: opts.actor }, opts);
}

/** stream yields the records of the SSE stream at path after opts.after, as the invariant above says. */
async function* stream<T extends { seq: number }>(
  t: Transport,
  path: string,
  filter: Record<string, string | undefined>,
  opts: { after?: number; heartbeat?: number; giveUpAfter?: number; signal?: AbortSignal; onHeartbeat?: (seq: number) => void },
): AsyncGenerator<T> {
  let last = opts.after ?? 0;
  const hb = opts.heartbeat ?? 5000;
  const giveUpAfter = opts.giveUpAfter ?? 60000;
  let failingSince: number | undefined;
  let attempt = 0;
  while (!opts.signal?.aborted) {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    let watchdog: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => ctl.abort(new Error("stream silent for three heartbeats")), 3 * hb);
    };
    try {
      arm();
      let resp: Response;
      try {
        resp = await t.raw({
          method: "GET",
          path,
          query: { ...filter, after: last, heartbeat: duration(hb) },
          headers: { accept: "text/event-stream", "last-event-id": String(last) },
          signal: ctl.signal,
        });
      } catch (e) {
        if (opts.signal?.aborted) return;
        if (e instanceof ConnectionError || ctl.signal.aborted) throw new Retry(e);
        throw e;
      }
      if (!resp.ok) {
        const err = errorFromProblem(resp.status, await resp.text());
        if (serverSide(err)) throw new Retry(err);
        throw err;
      }
      if (!resp.body) throw new Retry(new ProtocolError(resp.status, `${path}: a stream without a body`));
      failingSince = undefined;
      attempt = 0;
      for await (const msg of messages(resp.body, arm)) {
        if (msg.id !== undefined) {
          const seq = Number(msg.id);
          if (!Number.isSafeInteger(seq)) throw new ProtocolError(200, `event stream: id ${JSON.stringify(msg.id)} is not a seq`);
          if (msg.data === undefined) {
            if (seq > last) last = seq;
            opts.onHeartbeat?.(seq);
            continue;
          }
        }
        if (msg.event === "error") throw errorFromProblem(410, msg.data ?? "");
        if (msg.data === undefined) continue;
        let ev: T;
        try {
          ev = JSON.parse(msg.data) as T;
        } catch {
          throw new ProtocolError(200, `${path}: a malformed record: ${msg.data.slice(0, 200)}`);
        }
        if (typeof ev?.seq !== "number") throw new ProtocolError(200, `${path}: a record without a seq`);
        if (ev.seq <= last) continue;
        last = ev.seq;
        yield ev;
      }
      // The stream ended (a draining server): resume at once.
    } catch (e) {
      if (opts.signal?.aborted) return;
      if (!(e instanceof Retry) && !isStreamDrop(e, ctl)) throw e;
      failingSince ??= Date.now();
      if (Date.now() - failingSince > giveUpAfter) {
        throw new ConnectionError(`${path}: no stream for ${giveUpAfter} ms: ${(e instanceof Retry ? e.cause : e) as Error}`, { cause: e });
      }
      try {
        await sleep(backoff(attempt++), opts.signal);
      } catch {
        return;
      }
    } finally {
      clearTimeout(watchdog);
      opts.signal?.removeEventListener("abort", onAbort);
      ctl.abort();
    }
  }
}

class Retry extends Error {
  constructor(cause: unknown) {
    super("retry", { cause });
  }
}

// serverSide reports whether a refused (re)connection is the server's
// failure, worth retrying, by the problem's code: a server that cannot
// serve now (UnavailableError's codes: closed, schema, no_workspace,
// unavailable, timeout) or failed (internal), and an answer that is no
// problem at all from a 5xx (a proxy's 502), which has no code to read.
function serverSide(err: AgentspaceError): boolean {
  return err instanceof UnavailableError || err.code === "internal" || (err instanceof ProtocolError && err.status >= 500);
}

// A body that errors mid-read (connection reset, our own watchdog) is a
// drop to resume from, not an error of the caller's.
function isStreamDrop(e: unknown, ctl: AbortController): boolean {
  if (ctl.signal.aborted) return true;
  return e instanceof TypeError || (e as { name?: string }).name === "AbortError" || (e as { code?: string }).code === "ECONNRESET";
}

interface Message {
  id?: string;
  event?: string;
  data?: string;
}

/** messages parses a text/event-stream body into its messages. */
async function* messages(body: ReadableStream<Uint8Array>, onBytes: () => void): AsyncGenerator<Message> {
  const dec = new TextDecoder();
  let buf = "";
  let cur: Message = {};
  let has = false;
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    onBytes();
    buf += dec.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (has) yield cur;
        cur = {};
        has = false;
        continue;
      }
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      has = true;
      if (field === "id") cur.id = value;
      else if (field === "event") cur.event = value;
      else if (field === "data") cur.data = cur.data === undefined ? value : `${cur.data}\n${value}`;
    }
  }
  // A message cut off before its blank line is dropped: the resume asks for it again.
}
