"""Files kept for their owner: the outputs of a run's programs, and a thread's workspace.

Keys (never a client's or a program's name)::

    files/<id>                          a kept file; metadata: owner digest, name, type, size
    threads/<owner>/<thread>/files.json the thread's kept files, in order (its index)
    threads/<owner>/<thread>/workspace  the thread's working directory, one bundle

``<owner>`` and ``<thread>`` are digests. A file's id is 192 random bits; it is looked up only
with its owner: another caller's id is the same ``None`` as one that does not exist. A thread's
files and workspace are deleted with it (:meth:`Artifacts.delete_thread`); deployed, a bucket
lifecycle rule expires everything else.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass

from agentloop.files.blobs import Blob, Blobs, FilesUnavailable
from agentloop.files.media import media_type
from agentloop.files.models import FileRef
from agentloop.files.names import safe_name

DEFAULT_URL_TTL_S = 3600


def digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


def new_file_id() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Made:
    """A file a program made, to be kept: its path in the working directory and its bytes."""

    name: str
    data: bytes


@dataclass
class Artifacts:
    blobs: Blobs
    url_ttl_s: int = DEFAULT_URL_TTL_S

    async def keep(
        self,
        owner: str,
        made: list[Made],
        *,
        thread_id: str | None = None,
        call_id: str | None = None,
    ) -> list[FileRef]:
        """Store ``made`` as the owner's files (and in the thread's index); their refs."""
        refs: list[FileRef] = []
        for item in made:
            file_id = new_file_id()
            name = safe_name(item.name)
            media = media_type(name)
            meta = {
                "owner": digest(owner),
                "name": name,
                "media_type": media,
                "size": str(len(item.data)),
                "call_id": call_id or "",
            }
            await self.blobs.put(f"files/{file_id}", item.data, meta, media)
            refs.append(self._ref(file_id, meta))
        if thread_id is not None and refs:
            await self._index_add(owner, thread_id, refs)
        return refs

    async def open(self, owner: str, file_id: str) -> Blob | None:
        """The owner's file ``file_id`` with its metadata; None for anyone else's or none."""
        if not _usable_id(file_id):
            return None
        blob = await self.blobs.get(f"files/{file_id}")
        return blob if blob is not None and blob.meta.get("owner") == digest(owner) else None

    async def ref(self, owner: str, file_id: str) -> FileRef | None:
        """A fresh link to the owner's file ``file_id``; None for anyone else's or none."""
        if not _usable_id(file_id):
            return None
        meta = await self.blobs.head(f"files/{file_id}")
        if meta is None or meta.get("owner") != digest(owner):
            return None
        return self._ref(file_id, meta)

    async def thread_files(self, owner: str, thread_id: str) -> list[FileRef]:
        """The thread's kept files, in the order made, each with a fresh link."""
        return [self._ref(entry["id"], entry) for entry in await self._index(owner, thread_id)]

    async def delete_thread(self, owner: str, thread_id: str) -> None:
        """The thread's kept files, its index and its workspace: gone."""
        entries = await self._index(owner, thread_id)
        prefix = _thread_prefix(owner, thread_id)
        keys = [f"files/{entry['id']}" for entry in entries]
        await self.blobs.delete([*keys, f"{prefix}/files.json", f"{prefix}/workspace"])

    async def load_workspace(self, owner: str, thread_id: str) -> dict[str, bytes]:
        """The thread's working directory as it was left (empty for a new thread)."""
        blob = await self.blobs.get(f"{_thread_prefix(owner, thread_id)}/workspace")
        if blob is None:
            return {}
        try:
            files = json.loads(blob.data)["files"]
            return {str(path): base64.b64decode(data) for path, data in files.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise FilesUnavailable("the thread's workspace could not be read") from exc

    async def save_workspace(self, owner: str, thread_id: str, files: dict[str, bytes]) -> None:
        bundle = {"files": {path: base64.b64encode(data).decode() for path, data in files.items()}}
        key = f"{_thread_prefix(owner, thread_id)}/workspace"
        await self.blobs.put(
            key, json.dumps(bundle).encode(), {"owner": digest(owner)}, "application/json"
        )

    def _ref(self, file_id: str, meta: dict[str, str]) -> FileRef:
        name, media = meta.get("name", "file"), meta.get("media_type", "application/octet-stream")
        url, expires = self.blobs.url(f"files/{file_id}", name, media, self.url_ttl_s)
        size = meta.get("size", "0")
        return FileRef(
            id=file_id,
            name=name,
            media_type=media,
            size=int(size) if size.isdigit() else 0,
            url=url,
            expires_at=expires,
            call_id=meta.get("call_id") or None,
        )

    async def _index(self, owner: str, thread_id: str) -> list[dict[str, str]]:
        blob = await self.blobs.get(f"{_thread_prefix(owner, thread_id)}/files.json")
        if blob is None:
            return []
        try:
            entries = json.loads(blob.data)
        except ValueError as exc:
            raise FilesUnavailable("the thread's file index could not be read") from exc
        return [e for e in entries if isinstance(e, dict) and _usable_id(str(e.get("id", "")))]

    async def _index_add(self, owner: str, thread_id: str, refs: list[FileRef]) -> None:
        """Add to the thread's index; a thread has one run at a time (its claim), and a run's
        calls keep files one at a time (the workspace's lock), so no write is lost."""
        entries = await self._index(owner, thread_id)
        entries += [
            {
                "id": r.id,
                "name": r.name,
                "media_type": r.media_type,
                "size": str(r.size),
                "call_id": r.call_id or "",
            }
            for r in refs
        ]
        key = f"{_thread_prefix(owner, thread_id)}/files.json"
        await self.blobs.put(
            key, json.dumps(entries).encode(), {"owner": digest(owner)}, "application/json"
        )


def _thread_prefix(owner: str, thread_id: str) -> str:
    return f"threads/{digest(owner)}/{digest(thread_id)}"


def _usable_id(file_id: str) -> bool:
    """An id of the form this module makes (32 URL-safe characters); anything else is absent."""
    return (
        len(file_id) == 32 and all(c.isalnum() or c in "-_" for c in file_id) and file_id.isascii()
    )
