"""A run's working directory for execute_code: files that persist from one call to the next.

The sandbox keeps nothing between calls, so the workspace is carried: each call starts from
:meth:`Workspace.snapshot` and its program's changes come back through :meth:`apply`. Calls
run one at a time per workspace (``lock``), so two calls of one round never lose each other's
files. A stateless run's workspace lives as long as the request; a thread's is loaded at its
first use and saved after each change, so it persists with the thread and is deleted with it.
Another run never sees it: it belongs to this request, or to this owner's thread.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentloop.files.artifacts import Artifacts, Made
from agentloop.files.limits import MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES
from agentloop.files.media import media_type
from agentloop.files.models import ATTACHED_NOTE, Attachment, FileRef
from agentloop.files.names import safe_name, unique_name

WORKSPACE_KEY = "workspace"
"""Key of the run's :class:`Workspace` in ``ChatContext.extras`` / ``ToolContext.extras``."""


class WorkspaceFull(Exception):
    """Attachments that would take the workspace past its bounds; the message says which."""


@dataclass(frozen=True)
class Placed:
    """An attachment as it was put in the workspace: what the model is told."""

    name: str
    media_type: str
    size: int


@dataclass
class Workspace:
    owner: str
    artifacts: Artifacts | None = None
    thread_id: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _files: dict[str, bytes] | None = field(default=None, repr=False)
    _before_attach: dict[str, bytes] | None = field(default=None, repr=False)

    async def snapshot(self) -> dict[str, bytes]:
        """The files as they are now (loaded from the thread at first use)."""
        if self._files is None:
            self._files = await self._load()
        return dict(self._files)

    async def apply(self, files: dict[str, bytes]) -> None:
        """The working directory as a call left it; saved with the thread, if there is one
        (a call that changed nothing writes nothing)."""
        if files == self._files:
            return
        self._files = dict(files)
        await self._save()

    async def attach(self, attachments: list[Attachment]) -> list[Placed]:
        """Put a person's files in the workspace under safe, unique names (WorkspaceFull if they
        do not fit its bounds); saved with the thread."""
        files = await self.snapshot()
        before = dict(files)
        taken = set(files)
        placed: list[Placed] = []
        for attachment in attachments:
            data = attachment.content()
            name = unique_name(safe_name(attachment.name), taken)
            files[name] = data
            placed.append(Placed(name, media_type(name), len(data)))
        check_bounds(files)
        await self.apply(files)
        self._before_attach = before
        return placed

    async def undo_attach(self) -> None:
        """The workspace as it was before :meth:`attach`: the request that brought the files
        was refused (a plan, a limit), so they are not left in the thread unnamed."""
        if self._before_attach is not None:
            before, self._before_attach = self._before_attach, None
            await self.apply(before)

    async def keep(self, made: list[Made], call_id: str) -> list[FileRef]:
        """Keep a call's outputs as the owner's files; none without a file store."""
        if self.artifacts is None or not made:
            return []
        return await self.artifacts.keep(
            self.owner, made, thread_id=self.thread_id, call_id=call_id
        )

    async def _load(self) -> dict[str, bytes]:
        if self.artifacts is None or self.thread_id is None:
            return {}
        return await self.artifacts.load_workspace(self.owner, self.thread_id)

    async def _save(self) -> None:
        if self.artifacts is not None and self.thread_id is not None:
            await self.artifacts.save_workspace(self.owner, self.thread_id, self._files or {})


def check_bounds(files: dict[str, bytes]) -> None:
    """WorkspaceFull when ``files`` are more than the workspace may hold."""
    if len(files) > MAX_WORKSPACE_FILES:
        raise WorkspaceFull(
            f"the working directory would hold {len(files)} files; the limit is "
            f"{MAX_WORKSPACE_FILES}"
        )
    total = sum(len(data) for data in files.values())
    if total > MAX_WORKSPACE_BYTES:
        raise WorkspaceFull(
            f"the working directory would hold {total:,} bytes; the limit is "
            f"{MAX_WORKSPACE_BYTES:,}"
        )


def attachment_note(placed: list[Placed]) -> str:
    """What the model is told of a person's files (never their bytes)."""
    listed = ", ".join(f"{p.name} ({p.media_type}, {_size(p.size)})" for p in placed)
    return f"{ATTACHED_NOTE}{listed}]"


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"
