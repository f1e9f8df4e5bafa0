// AgentspaceStore: LangGraph's long-term memory store over agentspace
// artifacts. An item is the artifact PREFIX/items/NAMESPACE/KEY (the whole
// namespace is one segment, so no item's name is another's folder), its
// value the artifact's JSON content, its version the artifact's: put can
// take an expected version and then fails with ConflictError.

import { BaseStore, type Item, type ListNamespacesOperation, type Operation, type OperationResults, type PutOperation, type SearchItem, type SearchOperation } from "@langchain/langgraph-checkpoint";
import { Agentspace, artifactText, type Artifact } from "../client.js";
import { AlreadyExistsError, NotFoundError } from "../errors.js";
import type { ClientOptions } from "../transport.js";
import { seg, unseg } from "./names.js";

/** StoreOptions configure an AgentspaceStore. */
export interface StoreOptions {
  client?: Agentspace;
  clientOptions?: ClientOptions;
  /** Who writes; default the client's actor. */
  actor?: string;
  /** Where the items live; default "langgraph". */
  prefix?: string;
}

/** VersionedItem is an item with its record's version. */
export interface VersionedItem extends Item {
  version: number;
}

const sep = "\u001f";

/** AgentspaceStore is a BaseStore whose items are workspace artifacts. */
export class AgentspaceStore extends BaseStore {
  readonly ws: Agentspace;
  readonly prefix: string;
  readonly actor: string | undefined;

  constructor(opts: StoreOptions = {}) {
    super();
    this.ws = opts.client ?? new Agentspace(opts.clientOptions);
    this.prefix = (opts.prefix ?? "langgraph").replace(/\/+$/, "");
    this.actor = opts.actor;
  }

  private nsSeg(namespace: string[]): string {
    if (namespace.length === 0) throw new Error("AgentspaceStore: the namespace is empty");
    for (const n of namespace) {
      if (n === "" || n.includes(sep)) throw new Error(`AgentspaceStore: namespace label ${JSON.stringify(n)} is empty or holds U+001F`);
    }
    return seg(namespace.join(sep));
  }

  private itemName(namespace: string[], key: string): string {
    return `${this.prefix}/items/${this.nsSeg(namespace)}/${seg(key)}`;
  }

  private item(a: Artifact, value?: Record<string, unknown>): VersionedItem {
    const [nsPart, keyPart] = a.name.slice(`${this.prefix}/items/`.length).split("/");
    return {
      namespace: unseg(nsPart).split(sep),
      key: unseg(keyPart),
      value: value ?? (JSON.parse(artifactText(a)) as Record<string, unknown>),
      createdAt: new Date(a.created_at ?? 0),
      updatedAt: new Date(a.updated_at ?? 0),
      version: a.version,
    };
  }

  /** getItem returns the item with its version, or null. */
  async getItem(namespace: string[], key: string): Promise<VersionedItem | null> {
    try {
      return this.item(await this.ws.artifacts.get(this.itemName(namespace, key)));
    } catch (e) {
      if (e instanceof NotFoundError) return null;
      throw e;
    }
  }

  /**
   * putItem writes value under namespace/key. With ifVersion n it succeeds
   * only if the item's version is n (0: only if there is no item), else
   * ConflictError (AlreadyExistsError for 0) and nothing is written.
   */
  async putItem(namespace: string[], key: string, value: Record<string, unknown>, opts: { ifVersion?: number } = {}): Promise<VersionedItem> {
    const name = this.itemName(namespace, key);
    const content = JSON.stringify(value);
    const create = () => this.ws.artifacts.create({ name, kind: "memory", content, content_type: "application/json", actor: this.actor });
    const update = (v?: number) => this.ws.artifacts.update(name, { content, if_version: v, actor: this.actor });
    if (opts.ifVersion === 0) return this.item(await create(), value);
    if (opts.ifVersion !== undefined) return this.item(await update(opts.ifVersion), value);
    for (;;) {
      try {
        return this.item(await update(), value);
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
      try {
        return this.item(await create(), value);
      } catch (e) {
        if (!(e instanceof AlreadyExistsError)) throw e;
      }
    }
  }

  /** put writes an item; options.ifVersion makes it conditional (see putItem). */
  override async put(namespace: string[], key: string, value: Record<string, unknown>, _index?: false | string[], options: { ifVersion?: number } = {}): Promise<void> {
    await this.putItem(namespace, key, value, options);
  }

  private async remove(namespace: string[], key: string): Promise<void> {
    try {
      await this.ws.artifacts.delete(this.itemName(namespace, key), { actor: this.actor });
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  private async *under(namespacePrefix: string[]): AsyncGenerator<Artifact> {
    const np = namespacePrefix.length === 0 ? "" : seg(namespacePrefix.join(sep));
    for await (const a of this.ws.listAllArtifacts({ name_prefix: `${this.prefix}/items/${np}`, limit: 1000 })) {
      const ns = unseg(a.name.slice(`${this.prefix}/items/`.length).split("/")[0]).split(sep);
      if (namespacePrefix.every((p, i) => ns[i] === p)) yield a;
    }
  }

  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    if (op.query) throw new Error("AgentspaceStore: semantic search (query) is not supported; use filter");
    const out: SearchItem[] = [];
    for await (const a of this.under(op.namespacePrefix)) {
      const it = this.item(await this.ws.artifacts.get({ id: a.id }));
      if (op.filter && !Object.entries(op.filter).every(([k, v]) => JSON.stringify(it.value[k]) === JSON.stringify(v))) continue;
      out.push(it);
    }
    out.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime());
    const offset = op.offset ?? 0;
    return out.slice(offset, offset + (op.limit ?? 10));
  }

  private async namespaces(op: ListNamespacesOperation): Promise<string[][]> {
    const seen = new Map<string, string[]>();
    for await (const a of this.under([])) {
      let ns = unseg(a.name.slice(`${this.prefix}/items/`.length).split("/")[0]).split(sep);
      const ok = (op.matchConditions ?? []).every((c) => {
        const path = c.matchType === "prefix" ? ns.slice(0, c.path.length) : ns.slice(-c.path.length);
        return path.length === c.path.length && c.path.every((p, i) => p === "*" || p === path[i]);
      });
      if (!ok) continue;
      if (op.maxDepth !== undefined) ns = ns.slice(0, op.maxDepth);
      seen.set(ns.join(sep), ns);
    }
    const all = [...seen.values()].sort((a, b) => (a.join(sep) < b.join(sep) ? -1 : 1));
    return all.slice(op.offset, op.offset + op.limit);
  }

  /** batch runs the operations in order. */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) {
      if ("namespacePrefix" in op) results.push(await this.searchOp(op as SearchOperation));
      else if ("value" in op) {
        const p = op as PutOperation;
        if (p.value === null) await this.remove(p.namespace, p.key);
        else await this.putItem(p.namespace, p.key, p.value);
        results.push(undefined);
      } else if ("key" in op) results.push(await this.getItem(op.namespace, op.key));
      else results.push(await this.namespaces(op as ListNamespacesOperation));
    }
    return results as OperationResults<Op>;
  }
}
