"""README's "From Python" snippet (examples/readme_example.py; a Go test
keeps the two identical) runs against a real server and does its work."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

import support

from agentspace import Workspace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "readme_example.py"


class ReadmeTest(unittest.TestCase):
    def test_the_readme_snippet_claims_writes_and_follows(self) -> None:
        url = support.shared_url()
        with Workspace(url, actor="lead") as lead:
            task = lead.create_task("write the readme plan", priority=1000)
            env = dict(os.environ, AGENTSPACE_URL=url, AGENTSPACE_TOKEN="", AGENTSPACE_ACTOR="readme-worker",
                       PYTHONPATH=str(EXAMPLE.parents[1] / "src"))
            out = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("readme-worker finished write the readme plan", out.stdout)
            self.assertIn("readme-worker artifact.created plans/" + task.id + ".md", out.stdout)
            done = lead.get_task(task.id)
            self.assertEqual((done.status, done.result.artifacts), ("done", [f"plans/{task.id}.md"]))
            self.assertEqual(lead.get_artifact(f"plans/{task.id}.md").text, "# write the readme plan\n")


if __name__ == "__main__":
    unittest.main()
