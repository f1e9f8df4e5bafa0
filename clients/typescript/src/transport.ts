// The one place requests are made: headers, the problem mapping, and the
// retry rule (reads, and writes that carry an idempotency key, are retried
// after a connection error; nothing else is, so no write happens twice).

import { randomUUID } from "node:crypto";
import { AgentspaceError, ConnectionError, InvalidError, ProtocolError, UnavailableError, errorFromProblem } from "./errors.js";
import type { Problem } from "./errors.js";

/** Options of a client: every one may also come from the environment. */
export interface ClientOptions {
  /**
   * Base URL of `wsctl serve`; default AGENTSPACE_DSN (the variable wsctl
   * reads), then its alias AGENTSPACE_URL, then http://127.0.0.1:7465.
   */
  url?: string;
  /** Bearer token (`wsctl token create`); default AGENTSPACE_TOKEN. */
  token?: string;
  /**
   * Who acts, where no token binds the actor (a loopback server); default
   * AGENTSPACE_ACTOR. With a token it must be the token's actor: the
   * first request checks, and a different one is an InvalidError naming
   * both (a token acts as its own actor only).
   */
  actor?: string;
  /** How long a retryable call keeps retrying after connection errors, in ms; default 15000. */
  retryFor?: number;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
}

/** A request as the transport takes it. */
export interface Request {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | string[] | undefined>;
  body?: unknown;
  /** The call may be repeated after a connection error (a read, or a keyed write). */
  retry?: boolean;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** Transport sends requests to one server. It is shared by the client's views. */
export class Transport {
  readonly url: string;
  readonly token: string | undefined;
  readonly actor: string | undefined;
  readonly retryFor: number;
  private readonly fetch: typeof fetch;
  private readonly actorSource: string;
  /** The check that the token acts as `actor`, once made (see checkActor). */
  private actorChecked: Promise<void> | undefined;

  constructor(opts: ClientOptions = {}) {
    const env = process.env;
    const [source, url] = opts.url !== undefined ? ["url", opts.url]
      : env.AGENTSPACE_DSN ? ["AGENTSPACE_DSN", env.AGENTSPACE_DSN]
      : env.AGENTSPACE_URL ? ["AGENTSPACE_URL", env.AGENTSPACE_URL]
      : ["url", "http://127.0.0.1:7465"];
    if (!/^https?:\/\//i.test(url)) {
      throw new InvalidError("invalid", 0, `${source}: want http:// or https:// (a workspace served by wsctl serve)`, { code: "invalid", field: "url" } as Problem);
    }
    this.url = url.replace(/\/+$/, "");
    this.token = opts.token ?? (env.AGENTSPACE_TOKEN || undefined);
    this.actorSource = opts.actor !== undefined ? "the actor given" : "AGENTSPACE_ACTOR";
    this.actor = opts.actor ?? (env.AGENTSPACE_ACTOR || undefined);
    this.retryFor = opts.retryFor ?? 15000;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  /**
   * headers are the identity headers of every request: the token, or
   * without one the actor (the server refuses an actor header that names
   * another actor than the token's).
   */
  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { accept: "application/json, application/problem+json", ...extra };
    if (this.token) h.authorization = `Bearer ${this.token}`;
    else if (this.actor) h["x-agentspace-actor"] = this.actor;
    return h;
  }

  /**
   * checkActor asks the server, once, whom the token acts as when the
   * client was given an actor as well, and refuses an actor that is
   * another: every request would be refused (403), and quietly acting as
   * the token's actor would record the work under a name not given.
   */
  private checkActor(signal?: AbortSignal): Promise<void> {
    if (!this.token || !this.actor) return Promise.resolve();
    this.actorChecked ??= (async () => {
      let resp: Response;
      try {
        resp = await this.fetch(this.href("/v1/whoami"), { headers: this.headers(), signal });
      } catch (e) {
        this.actorChecked = undefined; // unreachable now: the request says so, the next one checks again
        return;
      }
      const text = await resp.text();
      if (!resp.ok) {
        this.actorChecked = undefined;
        throw errorFromProblem(resp.status, text);
      }
      const who = (JSON.parse(text) as { actor?: string }).actor ?? "";
      if (who !== this.actor) {
        throw new InvalidError("invalid", 0,
          `${this.actorSource} names ${JSON.stringify(this.actor)} but the token acts as ${JSON.stringify(who)}: a token acts as its own actor only; ` +
          `drop the actor (or name ${JSON.stringify(who)}), or use a token of ${JSON.stringify(this.actor)}`,
          { code: "invalid", field: "actor", reason: `is not the token's actor ${JSON.stringify(who)}` } as Problem);
      }
    })();
    return this.actorChecked;
  }

  /** href builds the URL of path with its query. */
  href(path: string, query?: Request["query"]): string {
    const u = new URL(this.url + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v === undefined || v === "" || v === false) continue;
      if (Array.isArray(v)) for (const x of v) u.searchParams.append(k, x);
      else u.searchParams.set(k, String(v));
    }
    return u.toString();
  }

  /** raw sends one request once, mapping a failure to connect to ConnectionError. */
  async raw(req: Request): Promise<Response> {
    await this.checkActor(req.signal);
    const init: RequestInit = { method: req.method, headers: this.headers(req.headers), signal: req.signal };
    if (req.body !== undefined) {
      init.body = JSON.stringify(req.body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    try {
      return await this.fetch(this.href(req.path, req.query), init);
    } catch (e) {
      if (req.signal?.aborted) throw e;
      throw new ConnectionError(`${req.method} ${req.path}: ${(e as Error).message}${causeText(e)}`, { cause: e });
    }
  }

  /**
   * call sends req and returns its JSON body (undefined for 204). An error
   * answer throws its typed error. A retryable call is repeated after a
   * connection error or a 503 for up to retryFor ms.
   */
  async call<T>(req: Request): Promise<T> {
    const deadline = Date.now() + this.retryFor;
    for (let attempt = 0; ; attempt++) {
      let resp: Response;
      try {
        resp = await this.raw(req);
      } catch (e) {
        if (req.retry && e instanceof ConnectionError && Date.now() < deadline) {
          await sleep(backoff(attempt), req.signal);
          continue;
        }
        throw e;
      }
      const text = await readText(resp, req);
      if (resp.ok) {
        if (resp.status === 204 || text === "") return undefined as T;
        try {
          return JSON.parse(text) as T;
        } catch {
          throw new ProtocolError(resp.status, `${req.method} ${req.path}: malformed JSON body: ${text.slice(0, 200)}`);
        }
      }
      const err = errorFromProblem(resp.status, text);
      if (req.retry && err instanceof UnavailableError && err.code === "unavailable" && Date.now() < deadline) {
        await sleep(backoff(attempt), req.signal);
        continue;
      }
      throw err;
    }
  }
}

async function readText(resp: Response, req: Request): Promise<string> {
  try {
    return await resp.text();
  } catch (e) {
    if (req.signal?.aborted) throw e;
    throw new ConnectionError(`${req.method} ${req.path}: the answer was cut off: ${(e as Error).message}`, { cause: e });
  }
}

function causeText(e: unknown): string {
  const c = (e as { cause?: { code?: string; message?: string } }).cause;
  return c ? ` (${c.code ?? c.message ?? ""})` : "";
}

/** backoff is the wait before retry attempt n: 50 ms doubling to 1 s, with jitter. */
export function backoff(n: number): number {
  const base = Math.min(1000, 50 * 2 ** n);
  return base / 2 + Math.random() * (base / 2);
}

/** sleep waits ms, or rejects when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** newKey returns a fresh idempotency key. */
export function newKey(): string {
  return randomUUID();
}

/** duration turns milliseconds or a Go duration string into the wire's string. */
export function duration(d: number | string | undefined): string | undefined {
  if (d === undefined) return undefined;
  if (typeof d === "string") return d;
  if (!Number.isFinite(d) || d < 0) throw new RangeError(`duration: ${d} is not a number of milliseconds`);
  return `${Math.round(d)}ms`;
}

/** isAgentspaceError tells a typed error of this client from any other. */
export function isAgentspaceError(e: unknown): e is AgentspaceError {
  return e instanceof AgentspaceError;
}
