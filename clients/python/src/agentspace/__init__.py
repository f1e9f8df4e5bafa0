"""agentspace: a client of the agentspace HTTP API (``wsctl serve``),
in Python's standard library only.

    from agentspace import Workspace

    ws = Workspace()          # AGENTSPACE_URL and AGENTSPACE_TOKEN
    with ws.claim(lease=60) as claim:
        with ws.lock("artifact:plans/api.md", ttl=30) as lease:
            plan = ws.get_artifact("plans/api.md")
            ws.update_artifact("plans/api.md", plan.text + "- more\\n",
                               if_version=plan.version, fence=lease.token)
        claim.complete("extended the plan", ["plans/api.md"])

Records are dataclasses in the API's JSON shape; every error answer is a
typed exception (ConflictError, LockedError, PausedError, ...); ``follow``
yields the event log and ``follow_inbox`` one's inbox, each resuming by
itself after a dropped connection; ``wait_for_work`` blocks an agent loop
until a message arrives or a task is ready.
"""

from ._client import Op, Seconds, Workspace, artifact_resource, task_resource
from ._errors import (
    AgentspaceError,
    AlreadyExistsError,
    AuthError,
    CompactedError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    LockedError,
    LockLostError,
    NoTaskError,
    NotFoundError,
    NotHolderError,
    PausedError,
    ProtocolError,
    RewoundError,
    ServerError,
    ServerUnreachableError,
    StaleFenceError,
    TooLargeError,
    TooManyError,
    UnavailableError,
    error_from_problem,
)
from ._helpers import HeldClaim, HeldLease
from ._models import (
    AgentPause,
    Artifact,
    ArtifactPage,
    BatchResult,
    Event,
    EventPage,
    InboxEvent,
    InboxPage,
    Lease,
    Msg,
    MsgAck,
    Note,
    NotePage,
    OpResult,
    Status,
    Subject,
    Task,
    TaskPage,
    TaskResult,
    Whoami,
)
from ._wait import Work

__version__ = "0.1.0"

__all__ = [
    "AgentPause",
    "AgentspaceError",
    "AlreadyExistsError",
    "Artifact",
    "ArtifactPage",
    "AuthError",
    "BatchResult",
    "CompactedError",
    "ConflictError",
    "Event",
    "EventPage",
    "ForbiddenError",
    "HeldClaim",
    "HeldLease",
    "InboxEvent",
    "InboxPage",
    "InvalidError",
    "Lease",
    "LockLostError",
    "LockedError",
    "Msg",
    "MsgAck",
    "NoTaskError",
    "Note",
    "NotePage",
    "NotFoundError",
    "NotHolderError",
    "Op",
    "OpResult",
    "PausedError",
    "ProtocolError",
    "RewoundError",
    "Seconds",
    "ServerError",
    "ServerUnreachableError",
    "StaleFenceError",
    "Status",
    "Subject",
    "Task",
    "TaskPage",
    "TaskResult",
    "TooLargeError",
    "TooManyError",
    "UnavailableError",
    "Whoami",
    "Work",
    "Workspace",
    "artifact_resource",
    "error_from_problem",
    "task_resource",
]
