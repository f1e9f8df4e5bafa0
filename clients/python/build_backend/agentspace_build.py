"""A PEP 517 build backend in the standard library only.

The package has no dependencies, and its build needs none either: pip
builds it on a machine that reaches no package index, with or without
build isolation, and without setuptools or wheel installed. It builds a
pure-Python wheel of src/agentspace, an sdist, and an editable wheel.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "agentspace"


def _project() -> dict[str, str]:
    """Read the [project] fields the metadata needs from pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    out = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(rf'^{key}\s*=\s*"([^"]*)"', section, re.M)
        if m is None:
            raise ValueError(f"pyproject.toml: [project] has no {key}")
        out[key] = m.group(1)
    return out


def _metadata() -> str:
    p = _project()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {p['name']}\n"
        f"Version: {p['version']}\n"
        f"Summary: {p['description']}\n"
        f"Requires-Python: {p['requires-python']}\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: Typing :: Typed\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _wheel_name() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}-py3-none-any.whl"


def _package_files() -> list[Path]:
    src = ROOT / "src" / PACKAGE
    return sorted(f for f in src.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc")


def _write_wheel(directory: str, files: dict[str, bytes]) -> str:
    """Write a wheel holding files plus its dist-info; return its name."""
    info = _dist_info()
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata().encode("utf-8")
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: agentspace_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = io.StringIO()
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files[f"{info}/RECORD"] = record.getvalue().encode("utf-8")
    name = _wheel_name()
    stamp = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")))[:6]
    with zipfile.ZipFile(Path(directory) / name, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            zi = zipfile.ZipInfo(path, date_time=stamp)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def get_requires_for_build_wheel(config_settings: object = None) -> list[str]:
    """Nothing: the build uses the standard library only."""
    return []


def get_requires_for_build_sdist(config_settings: object = None) -> list[str]:
    """Nothing."""
    return []


def get_requires_for_build_editable(config_settings: object = None) -> list[str]:
    """Nothing."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: object = None) -> str:
    """Write the dist-info directory the wheel will hold."""
    info = Path(metadata_directory) / _dist_info()
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata(), encoding="utf-8")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: agentspace_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return info.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: object = None, metadata_directory: str | None = None) -> str:
    """Build the wheel of src/agentspace."""
    src = ROOT / "src"
    return _write_wheel(wheel_directory, {f.relative_to(src).as_posix(): f.read_bytes() for f in _package_files()})


def build_editable(wheel_directory: str, config_settings: object = None, metadata_directory: str | None = None) -> str:
    """Build a wheel that puts src on the path, for pip install -e."""
    return _write_wheel(wheel_directory, {f"__editable__.{PACKAGE}.pth": (str(ROOT / "src") + "\n").encode("utf-8")})


def build_sdist(sdist_directory: str, config_settings: object = None) -> str:
    """Build the source distribution: pyproject, README, the backend and src."""
    p = _project()
    base = f"{p['name']}-{p['version']}"
    members = [ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "build_backend" / "agentspace_build.py", *_package_files()]
    name = f"{base}.tar.gz"
    with tarfile.open(Path(sdist_directory) / name, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for f in members:
            tar.add(f, arcname=f"{base}/{f.relative_to(ROOT).as_posix()}")
        pkg_info = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name
