"""What a run's working directory held at its end, checked: the next workspace and the
files made for the person.

The shuttle's answer (``_workdir.collect``) comes from inside the sandbox, where the program
could have written it: every path is checked again, every byte decoded and counted here, and
anything wrong leaves the workspace exactly as it was before the call, with a note that says
why. Files new or changed under ``output/`` are the ones shown to the person.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from agentloop.files.artifacts import Made
from agentloop.files.limits import (
    MAX_OUTPUTS_PER_CALL,
    MAX_WORKSPACE_BYTES,
    MAX_WORKSPACE_FILES,
    OUTPUT_DIR,
)
from agentloop.files.names import safe_path
from agentloop.files.workspace import WorkspaceFull, check_bounds

_AS_BEFORE = "the working directory is as it was before this call."


@dataclass(frozen=True)
class Settled:
    files: dict[str, bytes] | None
    """The working directory for the next call; None: unchanged."""
    made: list[Made] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def settle(before: dict[str, bytes], answer: dict[str, Any] | None, stopped: bool) -> Settled:
    """The working directory after a run, from the shuttle's ``answer``."""
    if answer is None:  # a stopped program's ending note says why already
        notes = [] if stopped else [f"The program's files could not be read back; {_AS_BEFORE}"]
        return Settled(None, notes=notes)
    problem = _problem(answer)
    if problem is not None:
        return Settled(
            None, notes=[f"{problem} None of this call's file changes were kept; {_AS_BEFORE}"]
        )
    try:
        files, changed, refused = _files(before, answer)
    except ValueError as exc:
        return Settled(
            None, notes=[f"The program's files could not be read back ({exc}); {_AS_BEFORE}"]
        )
    try:
        check_bounds(files)
    except WorkspaceFull:
        return Settled(
            None,
            notes=[
                "The program's files are over the working directory's "
                "bounds; none of this call's changes were kept."
            ],
        )
    made, notes = _made(changed, files)
    skipped = [p for p in answer.get("skipped") or [] if isinstance(p, str)]
    if skipped:
        notes.append(
            "Not kept (links, special files, or names starting with '.'): " + _listed(skipped)
        )
    if refused:
        notes.append("Not kept (names a file cannot have here): " + _listed(refused))
    return Settled(files, made, notes)


def _listed(paths: list[str]) -> str:
    """A few of ``paths``, each cut short: they come from inside the sandbox."""
    return ", ".join(path[:100] for path in paths[:5])


def _problem(answer: dict[str, Any]) -> str | None:
    """Why the whole answer is refused, in words the model can act on."""
    kind = answer.get("problem")
    if kind == "too_many_files":
        count = answer.get("count")
        made = f"{count:,}" if isinstance(count, int) else "too many"
        return (
            f"The program left {made} files in its working directory; at most "
            f"{MAX_WORKSPACE_FILES} can be kept."
        )
    if kind == "too_large":
        return (
            f"The files in the working directory hold more than {MAX_WORKSPACE_BYTES:,} "
            "bytes together, the most that can be kept; delete or shrink some."
        )
    if kind is not None:
        return "The program's files could not be read back."
    return None


def _files(
    before: dict[str, bytes], answer: dict[str, Any]
) -> tuple[dict[str, bytes], list[str], list[str]]:
    """The directory's files, which of them this call changed, and the names refused: not a
    safe relative path, or inside another file's name ("a" and "a/b"); ValueError if malformed."""
    present, changed = answer.get("present"), answer.get("changed")
    if not isinstance(present, list) or not isinstance(changed, dict):
        raise ValueError("malformed answer")
    files: dict[str, bytes] = {}
    refused: list[str] = []
    for path in present:
        if not isinstance(path, str) or safe_path(path) != path:
            refused.append(str(path))
        elif path in changed:
            files[path] = _decode(changed[path])
        elif path in before:
            files[path] = before[path]
    for path in [p for p in files if any(parent in files for parent in _parents(p))]:
        del files[path]
        refused.append(path)
    return files, [path for path in changed if path in files], refused


def _parents(path: str) -> list[str]:
    """``a`` and ``a/b`` for ``a/b/c``."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _decode(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError("malformed file")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ValueError("malformed file") from exc


def _made(changed: list[str], files: dict[str, bytes]) -> tuple[list[Made], list[str]]:
    """The new or changed files under ``output/``, at most ``MAX_OUTPUTS_PER_CALL``."""
    outputs = sorted(p for p in changed if p.startswith(f"{OUTPUT_DIR}/"))
    notes: list[str] = []
    if len(outputs) > MAX_OUTPUTS_PER_CALL:
        notes.append(
            f"{len(outputs)} files were written to {OUTPUT_DIR}/; only the first "
            f"{MAX_OUTPUTS_PER_CALL} (by name) are shown to the person."
        )
    return [Made(p, files[p]) for p in outputs[:MAX_OUTPUTS_PER_CALL]], notes
