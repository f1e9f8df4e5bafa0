// waitForWork: the agent loop's wait for a message or a ready task.
//
// Two waiters race: the inbox's long poll (answered by the server the
// moment the unread page would hold a message) and a follow of the task
// events from the log's head read before the first look. Invariant: a
// task that becomes ready after that look does so by a task event above
// the head, which wakes the task waiter to look again; one ready before it
// was seen by the look. Neither polls on a timer; the first to finish wins
// and the other is aborted.

import type { Agentspace, InboxPage, Task } from "./client.js";
import { follow } from "./follow.js";

/** WaitForWorkOptions tune Agentspace.waitForWork. */
export interface WaitForWorkOptions {
  /** Give up after this long (ms) with nothing; default: wait for ever. */
  timeout?: number;
  /** Only tasks with these labels count, as claim's filter. */
  labels?: Record<string, string>;
  /** Only subtasks of this task count. */
  parent_id?: string;
  /** Ends the wait (it rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** Work is what waitForWork returned with. */
export interface Work {
  /** The unread page of the inbox, with its counts. */
  inbox: InboxPage;
  /** The tasks ready to claim when a task woke the wait, best first (another agent may claim one first). */
  ready: Task[];
}

// The longest single long poll asked for; the server caps it at its
// --max-wait (60s by default) and the waiter asks again.
const poll = 60000;

/** readyTasks are the tasks a claim with these filters could take now, best first. */
export async function readyTasks(ws: Agentspace, opts: WaitForWorkOptions = {}): Promise<Task[]> {
  const pending: Task[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await ws.tasks.list({ status: "pending", labels: opts.labels, parent_id: opts.parent_id, after });
    pending.push(...page.tasks);
    if (!page.next) break;
    after = page.next;
  }
  const done = new Map<string, boolean>();
  const ready: Task[] = [];
  for (const t of pending) {
    for (const dep of t.depends_on ?? []) {
      if (!done.has(dep)) done.set(dep, (await ws.tasks.get(dep)).status === "done");
    }
    if ((t.depends_on ?? []).every((d) => done.get(d))) ready.push(t);
  }
  // Stable: oldest first within a priority, as claim orders them.
  return ready.sort((a, b) => (b.priority ?? 0) - (a.priority ?? 0));
}

/** waitForWork: see Agentspace.waitForWork. */
export async function waitForWork(ws: Agentspace, opts: WaitForWorkOptions = {}): Promise<Work> {
  const head = await ws.events.head();
  const page = await ws.inbox.read({ unread: true, signal: opts.signal });
  if (page.messages.length > 0) return { inbox: page, ready: [] };
  const ready = await readyTasks(ws, opts);
  if (ready.length > 0) return { inbox: page, ready };
  if (opts.timeout !== undefined && opts.timeout <= 0) return { inbox: page, ready: [] };

  const ctl = new AbortController();
  const onAbort = () => ctl.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    if (opts.timeout !== undefined) timer = setTimeout(() => resolve("timeout"), opts.timeout);
  });
  const messages = (async (): Promise<Work> => {
    for (;;) {
      const p = await ws.inbox.read({ unread: true, wait: poll, signal: ctl.signal });
      if (p.messages.length > 0) return { inbox: p, ready: [] };
    }
  })();
  const tasks = (async (): Promise<Task[] | undefined> => {
    for await (const _ of follow(ws.transport, { after: head, subject_kind: "task", signal: ctl.signal })) {
      const r = await readyTasks(ws, opts);
      if (r.length > 0) return r;
    }
    return undefined; // aborted
  })();
  try {
    const first = await Promise.race([messages, tasks, timedOut]);
    if (opts.signal?.aborted) throw opts.signal.reason;
    if (first !== "timeout" && first !== undefined && !Array.isArray(first)) return first;
    // A task, or the timeout: the page as it stands now, with its counts.
    return { inbox: await ws.inbox.read({ unread: true, signal: opts.signal }), ready: Array.isArray(first) ? first : [] };
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
    ctl.abort();
    await Promise.allSettled([messages, tasks]);
  }
}
