from agentspace import Workspace

lead = Workspace(actor="lead")
worker = Workspace(actor="worker-1")
worker.put_note("status", "worker-1", body="ready")  # an agent that has written may be messaged

lead.send_message("worker-1", "Rebase on main before you push.", subject="rebase",
                  requires_ack=True, data={"branch": "main"})

# An agent loop's wait: an unread message (here, at once), else it blocks
# until one comes or a task is ready to claim.
work = worker.wait_for_work(timeout=60)
for m in work.inbox.messages:
    print(f"{m.from_} asks: {m.subject}: {m.body}")
    worker.mark_read(m.id)
    if m.owed_by("worker-1"):
        acked = worker.ack_message(m.id, "rebased")
        print("acked:", acked.acks[0].reply, "| still owed by:", acked.pending)
