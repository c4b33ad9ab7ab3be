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
            None,
            notes=[
                problem + " None of this call's file changes were kept; "
                "the working directory is as it was before it."
            ],
        )
    try:
        files, changed = _files(before, answer)
    except ValueError as exc:
        return Settled(
            None,
            notes=[
                f"The program's files could not be read back ({exc}); "
                "the working directory is as it was before this call."
            ],
        )
    if len(files) > MAX_WORKSPACE_FILES or sum(map(len, files.values())) > MAX_WORKSPACE_BYTES:
        return Settled(
            None,
            notes=[
                "The program's files are over the working directory's "
                "bounds; none of this call's changes were kept."
            ],
        )
    made, notes = _made(changed, files)
    skipped = [str(p) for p in answer.get("skipped") or [] if isinstance(p, str)][:5]
    if skipped:
        notes.append(
            "Not kept (links, special files, or names starting with '.'): " + ", ".join(skipped)
        )
    return Settled(files, made, notes)


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


def _files(before: dict[str, bytes], answer: dict[str, Any]) -> tuple[dict[str, bytes], list[str]]:
    """The directory's files, and which of them this call changed (ValueError if malformed)."""
    present, changed = answer.get("present"), answer.get("changed")
    if not isinstance(present, list) or not isinstance(changed, dict):
        raise ValueError("malformed answer")
    files: dict[str, bytes] = {}
    for path in present:
        if not isinstance(path, str) or safe_path(path) != path:
            continue
        if path in changed:
            files[path] = _decode(changed[path])
        elif path in before:
            files[path] = before[path]
    return files, [path for path in changed if path in files]


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
