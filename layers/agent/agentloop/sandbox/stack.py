"""The libraries execute_code's programs may import besides the standard library.

A *stack* is a directory built by ``make sandbox-stack`` (``.sandbox-stack``, for this
interpreter) or by ``make package`` (the sandbox function's layer, ``/opt/sandbox-stack``)::

    manifest.json                    {"libraries": {"numpy": "2.4.6", ...}, "fontlist": ...}
    site/                            numpy, pandas, matplotlib and their dependencies
    matplotlib/fontlist-v3.11.0.json matplotlib's font list, made once at build time

Which stack: ``AGENTLOOP_SANDBOX_STACK`` (a directory, or ``none``), else ``./.sandbox-stack``
when it has a manifest, else none (the standard library only). The runner itself reads only
the variable (:func:`from_env`), so a process that merely sits next to a build does not change
what the sandbox function - or a test - gives its programs.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentloop.config import ConfigurationError

ENV_VAR = "AGENTLOOP_SANDBOX_STACK"
LOCAL_DIR = ".sandbox-stack"
MANIFEST = "manifest.json"
# Where the namespace view shows the stack (the same path as the layer's on Lambda), and
# where matplotlib's config and cache dir is in the run's own /tmp (it must be writable).
VIEW_DIR = "/opt/sandbox-stack"
MPL_DIR = ".matplotlib"
# Threads the numeric libraries start at import: one each, so imports fit RLIMIT_AS and the
# process limit (OpenBLAS alone reserves its buffers per thread, 40 MB more on two cores).
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Stack:
    """A built stack: its directory, the pinned libraries' versions, the font list's path."""

    root: Path
    versions: tuple[tuple[str, str], ...]
    fontlist: PurePosixPath | None = None

    @property
    def site(self) -> Path:
        return self.root / "site"

    def libraries(self) -> list[str]:
        """``["numpy 2.4.6", ...]``, as the tool description names them."""
        return [f"{name} {version}" for name, version in self.versions]

    def env(self, root: str, tmp: str) -> dict[str, str]:
        """The program's environment additions when the stack is at ``root``, temp at ``tmp``."""
        env = {name: "1" for name in THREAD_VARS}
        env["PYTHONPATH"] = f"{root}/site"
        env["MPLBACKEND"] = "Agg"  # no display: figures go to files
        env["MPLCONFIGDIR"] = f"{tmp}/{MPL_DIR}"
        return env

    def namespace_args(self) -> list[str]:
        """bwrap options: the stack read-only at VIEW_DIR, a writable matplotlib dir in /tmp.

        The font list is bound read-only into that dir, so matplotlib uses it as built.
        """
        args = ["--ro-bind", str(self.root), VIEW_DIR]
        args += ["--perms", "1777", "--dir", f"/tmp/{MPL_DIR}"]
        if self.fontlist is not None:
            target = f"/tmp/{MPL_DIR}/{self.fontlist.name}"
            args += ["--ro-bind", str(self.root / self.fontlist), target]
        return args

    def prepare_unisolated(self, tmp: str) -> dict[str, str]:
        """Without namespaces: the matplotlib dir made in the run's temp dir, the font list
        copied in; the environment additions."""
        mpl = Path(tmp, MPL_DIR)
        mpl.mkdir(mode=0o700, exist_ok=True)
        if self.fontlist is not None:
            shutil.copyfile(self.root / self.fontlist, mpl / self.fontlist.name)
        return self.env(str(self.root), tmp)


def _versions(manifest: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    libraries = manifest.get("libraries")
    if not isinstance(libraries, dict) or not libraries:
        raise ValueError("no libraries listed")
    return tuple((str(name), str(version)) for name, version in libraries.items())


def _fontlist(root: Path, manifest: Mapping[str, object]) -> PurePosixPath | None:
    raw = manifest.get("fontlist")
    if raw is None:
        return None
    path = PurePosixPath(str(raw))
    if path.is_absolute() or ".." in path.parts or not (root / path).is_file():
        raise ValueError(f"bad font list {raw!r}")
    return path


@functools.lru_cache(maxsize=8)
def _load(root: Path, stamp: int) -> Stack:
    """The stack at ``root`` (cached per manifest version ``stamp``)."""
    try:
        manifest = json.loads((root / MANIFEST).read_text("utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        if not (root / "site").is_dir():
            raise ValueError("no site directory")
        return Stack(root, _versions(manifest), _fontlist(root, manifest))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"{ENV_VAR}: {root} is not a usable sandbox stack ({exc}); run make sandbox-stack"
        ) from exc


def load(directory: str | os.PathLike[str]) -> Stack:
    """The stack in ``directory``; ConfigurationError when it is not one."""
    root = Path(directory).resolve()
    try:
        stamp = (root / MANIFEST).stat().st_mtime_ns
    except OSError as exc:
        raise ConfigurationError(
            f"{ENV_VAR}: {root} has no {MANIFEST}; run make sandbox-stack"
        ) from exc
    return _load(root, stamp)


def find(setting: str | None) -> Stack | None:
    """The stack a setting names: a directory, ``none``, or unset (``./.sandbox-stack``)."""
    value = (setting or "").strip()
    if value.lower() == "none":
        return None
    if value:
        return load(value)
    if Path(LOCAL_DIR, MANIFEST).is_file():
        return load(LOCAL_DIR)
    return None


def from_env(environ: Mapping[str, str] | None = None) -> Stack | None:
    """The stack ``AGENTLOOP_SANDBOX_STACK`` names, and only that: the runner's default."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    return find(value) if value else None
