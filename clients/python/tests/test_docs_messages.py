"""docs/python.md's Messages example is examples/messages_example.py,
and it runs against a real server as the document says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

import support

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "messages_example.py"
DOC = ROOT.parents[1] / "docs" / "python.md"


class MessagesDocTest(unittest.TestCase):
    def test_the_documented_example_is_the_file_and_it_runs(self) -> None:
        m = re.search(r"\n## Messages\n.*?```python\n(.*?)```\n", DOC.read_text(), re.S)
        self.assertIsNotNone(m, "docs/python.md has a Messages section with a python block")
        assert m is not None
        self.assertEqual(m.group(1), EXAMPLE.read_text(), "docs/python.md's Messages example differs from examples/messages_example.py")
        env = dict(os.environ, AGENTSPACE_URL=support.shared_url(), AGENTSPACE_DSN="", AGENTSPACE_TOKEN="", AGENTSPACE_ACTOR="",
                   PYTHONPATH=str(ROOT / "src"))
        out = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("lead asks: rebase: Rebase on main before you push.", out.stdout)
        self.assertIn("acked: rebased | still owed by: []", out.stdout)


if __name__ == "__main__":
    unittest.main()
