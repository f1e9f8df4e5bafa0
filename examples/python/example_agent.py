"""An agent in a few lines: claim a task, write an artifact, follow events.

    pip install ./clients/python      # or run from a checkout as is
    python3 example_agent.py --url http://127.0.0.1:7465 --token ast_...

Prints one JSON line per step, and exits 0 once it has seen its own
artifact come back through the event stream.
"""

import argparse
import json
import os
import sys

try:
    import agentspace
except ImportError:  # not installed: use the checkout's package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
    import agentspace


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=os.environ.get("AGENTSPACE_URL", "http://127.0.0.1:7465"))
    ap.add_argument("--token", default=os.environ.get("AGENTSPACE_TOKEN"))
    ap.add_argument("--wait", type=float, default=10, help="seconds to wait for a task")
    args = ap.parse_args()
    ws = agentspace.Workspace(args.url, token=args.token)

    me = ws.whoami()
    head = ws.events_head()
    try:
        task = ws.claim_task(wait=args.wait)
    except agentspace.NoTaskError:
        print(json.dumps({"step": "claim", "task": None}))
        return 3
    print(json.dumps({"step": "claim", "task": task.id, "title": task.title, "actor": me.actor}))

    name = f"out/{task.id}.md"
    art = ws.create_artifact(name, f"# {task.title}\n\nDone by {me.actor}.\n", kind="output", task_id=task.id)
    print(json.dumps({"step": "write", "name": art.name, "version": art.version}))
    ws.complete_task(task.id, "wrote " + name, [name])

    for ev in ws.follow(after=head, types=["artifact.created", "task.updated"]):
        print(json.dumps({"step": "event", "seq": ev.seq, "type": ev.type, "subject": ev.subject.name}))
        if ev.type == "artifact.created" and ev.subject.name == name:
            print(json.dumps({"step": "done", "seq": ev.seq}))
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
