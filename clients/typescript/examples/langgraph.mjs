import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { AgentspaceSaver } from "@agentspace/client/langgraph";

const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const graph = new StateGraph(State)
  .addNode("work", () => ({ log: ["worked"] }))
  .addEdge(START, "work")
  .addEdge("work", END)
  .compile({ checkpointer: new AgentspaceSaver({ actor: `writer-${process.pid}` }) });

const config = { configurable: { thread_id: `thread-${Date.now()}` } };
console.log((await graph.invoke({ log: [] }, config)).log);
await graph.checkpointer.close(); // gives up the thread's lease
