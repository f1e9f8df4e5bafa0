"""An agent in a few lines: claim a task, write an artifact, follow events.

    python3 example_agent.py --url http://127.0.0.1:7465 --token ast_...

Prints one JSON line per step, and exits 0 once it has seen its own
artifact come back through the event stream.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentspace_client import Client  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=os.environ.get("AGENTSPACE_URL", "http://127.0.0.1:7465"))
    ap.add_argument("--token", default=os.environ.get("AGENTSPACE_TOKEN"))
    ap.add_argument("--wait", default="10s")
    args = ap.parse_args()
    c = Client(args.url, token=args.token)

    me = c.request("GET", "/v1/whoami")
    head = c.request("GET", "/v1/events/head")["head"]
    task = c.claim(wait=args.wait)
    if task is None:
        print(json.dumps({"step": "claim", "task": None}))
        return 3
    print(json.dumps({"step": "claim", "task": task["id"], "title": task["title"], "actor": me["actor"]}))

    name = f"out/{task['id']}.md"
    art = c.write_artifact(name, f"# {task['title']}\n\nDone by {me['actor']}.\n", kind="output", task_id=task["id"])
    print(json.dumps({"step": "write", "name": art["name"], "version": art["version"]}))
    c.complete(task["id"], "wrote " + name, [name])

    for ev in c.events(after=head, types=["artifact.created", "task.updated"]):
        print(json.dumps({"step": "event", "seq": ev["seq"], "type": ev["type"], "subject": ev["subject"]["name"]}))
        if ev["type"] == "artifact.created" and ev["subject"]["name"] == name:
            print(json.dumps({"step": "done", "seq": ev["seq"]}))
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
