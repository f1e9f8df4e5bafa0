// A Session kept in a JSON file, the way the OpenAI Agents SDK's examples
// keep one (examples/memory: read the array, change it, write it back),
// for the race test to show what such a store does with two writers.
// afterRead, if given, runs between the read and the write of addItems:
// the race test uses it to make two appends overlap for certain.
import { readFile, writeFile } from "node:fs/promises";

export class FileSession {
  constructor(file, sessionId, afterRead) {
    this.file = file;
    this.sessionId = sessionId;
    this.afterRead = afterRead;
  }
  async getSessionId() {
    return this.sessionId;
  }
  async read() {
    try {
      return JSON.parse(await readFile(this.file, "utf8"));
    } catch (e) {
      if (e.code === "ENOENT") return [];
      throw e;
    }
  }
  async getItems(limit) {
    const items = await this.read();
    return limit === undefined ? items : items.slice(-limit);
  }
  async addItems(items) {
    const current = await this.read();
    await this.afterRead?.();
    await writeFile(this.file, JSON.stringify([...current, ...items]));
  }
  async popItem() {
    const items = await this.read();
    const last = items.pop();
    await writeFile(this.file, JSON.stringify(items));
    return last;
  }
  async clearSession() {
    await writeFile(this.file, "[]");
  }
}
