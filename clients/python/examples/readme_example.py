from agentspace import Workspace

ws = Workspace()  # AGENTSPACE_DSN (or AGENTSPACE_URL), AGENTSPACE_TOKEN (or AGENTSPACE_ACTOR on loopback)
me = ws.whoami().actor
head = ws.events_head()

with ws.claim(lease=60, wait=10) as claim:  # heartbeats while the block runs
    name = f"plans/{claim.id}.md"
    with ws.lock(f"artifact:{name}", ttl=30) as lease:  # renewed while the block runs
        ws.create_artifact(name, f"# {claim.task.title}\n", kind="plan", fence=lease.token)
    claim.complete(f"wrote {name}", [name])

for event in ws.follow(after=head):  # resumes by itself after a dropped connection
    print(event.seq, event.actor, event.type, event.subject.name)
    if event.type == "task.updated" and event.subject.id == claim.id:
        break
print(me, "finished", claim.task.title)
