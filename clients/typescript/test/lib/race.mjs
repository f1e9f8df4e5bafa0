// Race helpers: a barrier that makes two writers overlap for certain
// (no sleeps), and a fetch that holds a client's first batch at it.

/**
 * barrier(n) resolves arrive() for everyone once n have arrived, or once
 * open() is called (by a writer that failed before it got there).
 */
export function barrier(n) {
  let arrived = 0;
  let release;
  const done = new Promise((r) => (release = r));
  return {
    arrive() {
      if (++arrived >= n) release();
      return done;
    },
    open() {
      release();
    },
  };
}

/**
 * holdFirstBatch returns a fetch whose first POST /v1/batch waits at b
 * before it is sent: two clients with it each send a write only after
 * both have read what the write is based on.
 */
export function holdFirstBatch(b) {
  let held = false;
  return async (input, init) => {
    if (!held && init?.method === "POST" && new URL(String(input)).pathname === "/v1/batch") {
      held = true;
      await b.arrive();
    }
    return fetch(input, init);
  };
}
