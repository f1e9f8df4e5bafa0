"""A small client of the agentspace HTTP API, Python standard library only.

It speaks the API that `wsctl serve` answers (see docs/http.md and
/v1/openapi.json): records are the workspace's JSON, errors are
application/problem+json with a stable "code", events are Server-Sent
Events resumed with Last-Event-ID.
"""

import json
import urllib.error
import urllib.parse
import urllib.request


class APIError(Exception):
    """An error answer: status, the problem's code, and the whole problem."""

    def __init__(self, status, problem):
        super().__init__(f"{status} {problem.get('code')}: {problem.get('detail', '')}")
        self.status = status
        self.code = problem.get("code")
        self.problem = problem


class Client:
    def __init__(self, base_url, token=None, actor=None, timeout=60):
        self.base = base_url.rstrip("/")
        self.token = token
        self.actor = actor
        self.timeout = timeout

    def _headers(self):
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        elif self.actor:
            h["X-Agentspace-Actor"] = self.actor
        return h

    def request(self, method, path, body=None, timeout=None):
        data = None
        headers = self._headers()
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"code": "internal", "detail": raw[:200].decode(errors="replace")}
            raise APIError(e.code, problem) from None

    # Tasks
    def create_task(self, title, **fields):
        return self.request("POST", "/v1/tasks", dict(fields, title=title))

    def claim(self, wait="30s", lease="5m"):
        """Claim the best ready task, waiting up to wait; None when none is ready."""
        try:
            return self.request("POST", "/v1/tasks/claim", {"wait": wait, "lease": lease}, timeout=self.timeout + 60)
        except APIError as e:
            if e.code == "no_task":
                return None
            raise

    def complete(self, task_id, summary, artifacts=()):
        return self.request("POST", f"/v1/tasks/{task_id}/complete", {"summary": summary, "artifacts": list(artifacts)})

    # Artifacts
    def write_artifact(self, name, content, if_version=0, **fields):
        """Create the artifact, or (if_version > 0) write its next version."""
        if if_version:
            path = "/v1/artifacts/" + urllib.parse.quote(name, safe="")
            return self.request("PATCH", path, dict(fields, content=content, if_version=if_version))
        return self.request("POST", "/v1/artifacts", dict(fields, name=name, content=content))

    def read_artifact(self, name):
        return self.request("GET", "/v1/artifacts/" + urllib.parse.quote(name, safe=""))

    # Events
    def events(self, after=0, types=(), last_event_id=None):
        """Yield events (dicts) from the stream, after seq `after`, for ever.

        Heartbeats update the cursor but yield nothing. Resume a stream by
        passing the last seq seen as last_event_id.
        """
        q = {"after": str(after)}
        if types:
            q["type"] = ",".join(types)
        headers = self._headers()
        headers["Accept"] = "text/event-stream"
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        req = urllib.request.Request(self.base + "/v1/events?" + urllib.parse.urlencode(q), headers=headers)
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            data = []
            for raw in resp:
                line = raw.decode().rstrip("\r\n")
                if line == "":
                    if data:
                        yield json.loads("\n".join(data))
                    data = []
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
