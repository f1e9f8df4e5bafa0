// Test helpers: the server under test comes from the Go test that runs
// these files (AGENTSPACE_URL), and AGENTSPACE_TEST_WSCTL / _DSN let a test
// start servers of its own over the same store (to restart one).
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Agentspace } from "../../dist/index.js";

/** url is the server under test. */
export const url = process.env.AGENTSPACE_URL;
if (!url) throw new Error("AGENTSPACE_URL is not set: run these tests through the Go test (go test ./clients/)");

/** client returns a client acting as actor. */
export function client(actor = `ts-${randomUUID().slice(0, 8)}`, opts = {}) {
  return new Agentspace({ url, actor, ...opts });
}

/** unique returns a fresh name under prefix. */
export function unique(prefix) {
  return `${prefix}/${randomUUID()}`;
}

/**
 * startServer runs `wsctl serve` on the test's store at port (0: any) and
 * resolves with { url, stop } once it listens.
 */
export function startServer(port = 0) {
  const bin = process.env.AGENTSPACE_TEST_WSCTL;
  const dsn = process.env.AGENTSPACE_TEST_DSN;
  if (!bin || !dsn) throw new Error("AGENTSPACE_TEST_WSCTL and AGENTSPACE_TEST_DSN must be set by the Go test");
  const child = spawn(bin, ["--dsn", dsn, "serve", "--listen", `127.0.0.1:${port}`, "--heartbeat", "200ms"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, GORACE: "atexit_sleep_ms=0" },
  });
  let log = "";
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`wsctl serve did not start: ${log}`)), 30000);
    child.stderr.on("data", (d) => {
      log += d;
      const m = /on (http:\/\/\S+) for/.exec(log);
      if (m) {
        clearTimeout(t);
        resolve({
          url: m[1],
          stop: () =>
            new Promise((res) => {
              if (child.exitCode !== null) return res();
              child.once("exit", () => res());
              child.kill("SIGKILL");
            }),
        });
      }
    });
    child.once("exit", (code) => reject(new Error(`wsctl serve exited ${code}: ${log}`)));
  });
}
