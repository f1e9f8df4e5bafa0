// @agentspace/client/langgraph: LangGraph.js persistence in an agentspace
// workspace: a checkpoint saver with one fenced writer per thread, and a
// store whose put can take an expected version.

export { AgentspaceSaver } from "./saver.js";
export type { SaverOptions } from "./saver.js";
export { AgentspaceStore } from "./store.js";
export type { StoreOptions, VersionedItem } from "./store.js";
