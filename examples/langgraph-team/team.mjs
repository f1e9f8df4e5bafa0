// A LangGraph.js team that persists to agentspace: a supervisor hands
// each item to a researcher, then to a writer, until none is left. The
// nodes are deterministic (no model). Kill it at any moment and start it
// again: it resumes from its last checkpoint and finishes the run.
//
//   AGENTSPACE_URL=http://127.0.0.1:7465 node team.mjs [thread-id]
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { AgentspaceSaver } from "@agentspace/client/langgraph";

const thread_id = process.argv[2] ?? "team-1";
const stepMs = Number(process.env.TEAM_STEP_MS ?? 300);
const items = ["auth", "billing", "search", "export"];

const Team = Annotation.Root({
  todo: Annotation({ reducer: (_, b) => b, default: () => [] }),
  current: Annotation({ reducer: (_, b) => b, default: () => "" }),
  notes: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  done: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

const say = (o) => console.log(JSON.stringify(o));
const work = (ms) => new Promise((r) => setTimeout(r, ms));

const graph = new StateGraph(Team)
  .addNode("supervisor", (s) => {
    const [next, ...rest] = s.todo;
    say({ node: "supervisor", next: next ?? null });
    return { current: next ?? "", todo: rest };
  })
  .addNode("researcher", async (s) => {
    await work(stepMs);
    say({ node: "researcher", item: s.current });
    return { notes: [`findings on ${s.current}`] };
  })
  .addNode("writer", async (s) => {
    await work(stepMs);
    say({ node: "writer", item: s.current });
    return { done: [s.current] };
  })
  .addEdge(START, "supervisor")
  .addConditionalEdges("supervisor", (s) => (s.current ? "researcher" : END))
  .addEdge("researcher", "writer")
  .addEdge("writer", "supervisor")
  .compile({
    // The thread's lease outlives a killed writer by at most leaseTtl; the
    // next start waits for it (leaseWait) and goes on from the checkpoint.
    checkpointer: new AgentspaceSaver({ actor: `team-${process.pid}`, prefix: "examples/langgraph-team", leaseTtl: 5000, leaseWait: 30000 }),
  });

// durability "sync": each step's checkpoint is stored before the next step
// starts, so a kill loses at most the step under way (LangGraph's default,
// "async", lets the graph run ahead of its checkpoints).
const config = { configurable: { thread_id }, recursionLimit: 100, durability: "sync" };
const state = await graph.getState(config);
// A thread is unfinished while it has a next step, and also when the
// process died after its last step's writes were all saved but before the
// next checkpoint: LangGraph then reports no next step, yet an item is
// still in hand or to do. invoke(null) applies those writes and goes on.
const unfinished =
  state.next.length > 0 ||
  (state.config.configurable?.checkpoint_id !== undefined && (state.values.current !== "" || state.values.todo.length > 0));
let out;
if (unfinished) {
  say({ resumed: state.config.configurable.checkpoint_id, next: state.next, done: state.values.done });
  out = await graph.invoke(null, config);
} else {
  say({ started: thread_id });
  out = await graph.invoke({ todo: items }, config);
}
say({ finished: out.done });
await graph.checkpointer.close();
