"""Where kept files live: a directory locally, an S3 bucket deployed; one small interface.

Keys are made by :mod:`agentloop.files.artifacts` from ids and digests only, never from a
name a client or a program chose. Each blob has a little metadata (a JSON object of strings).
A backend that cannot be reached raises :class:`FilesUnavailable`; the callers turn that into
a 503 or a tool error, never into a file served without its owner check.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentloop.files.media import disposition

SIGNING_KEY_FILE = ".url-key"


class FilesUnavailable(Exception):
    """The file store could not be used (a bucket that refuses, a full disk)."""


@dataclass(frozen=True)
class Blob:
    data: bytes
    meta: dict[str, str]


class Blobs(Protocol):
    """The operations kept files need; ``url`` makes a fetchable, expiring link to a file."""

    async def put(self, key: str, data: bytes, meta: dict[str, str], media_type: str) -> None: ...
    async def get(self, key: str) -> Blob | None: ...
    async def head(self, key: str) -> dict[str, str] | None: ...
    async def delete(self, keys: list[str]) -> None: ...
    def url(self, key: str, name: str, media_type: str, ttl_s: int) -> tuple[str, int]: ...


class DirectoryBlobs:
    """Blobs as files under ``root`` (local runs); links are this app's ``GET /files/{id}``
    signed with a key kept beside them (HMAC-SHA256 over the id and the expiry)."""

    def __init__(self, root: str | os.PathLike[str], route: str = "/files/") -> None:
        self.root = Path(root)
        self.route = route
        self._key: bytes | None = None

    async def put(self, key: str, data: bytes, meta: dict[str, str], media_type: str) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(path.with_name(path.name + ".meta.json"), json.dumps(meta).encode())
            _write_atomic(path, data)
        except OSError as exc:
            raise FilesUnavailable(f"could not write a file: {exc.strerror}") from exc

    async def get(self, key: str) -> Blob | None:
        meta = await self.head(key)
        if meta is None:
            return None
        try:
            return Blob(self._path(key).read_bytes(), meta)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FilesUnavailable(f"could not read a file: {exc.strerror}") from exc

    async def head(self, key: str) -> dict[str, str] | None:
        path = self._path(key)
        try:
            meta = json.loads(path.with_name(path.name + ".meta.json").read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise FilesUnavailable(f"could not read a file's metadata: {exc}") from exc
        return {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else None

    async def delete(self, keys: list[str]) -> None:
        for key in keys:
            path = self._path(key)
            for name in (path.name + ".meta.json", path.name):
                with contextlib.suppress(FileNotFoundError):
                    path.with_name(name).unlink()

    def url(self, key: str, name: str, media_type: str, ttl_s: int) -> tuple[str, int]:
        file_id = key.rsplit("/", 1)[-1]
        expires = int(time.time()) + ttl_s
        return (
            f"{self.route}{file_id}?expires={expires}&signature={self.sign(file_id, expires)}",
            expires,
        )

    def sign(self, file_id: str, expires: int) -> str:
        """The link's signature; :meth:`verify` checks it in constant time."""
        message = f"{file_id}.{expires}".encode()
        return hmac.new(self._signing_key(), message, hashlib.sha256).hexdigest()

    def verify(self, file_id: str, expires: int, signature: str) -> bool:
        # As bytes: a hostile signature may hold any character (compare_digest takes ASCII).
        given = signature.encode("utf-8", "replace")
        return hmac.compare_digest(self.sign(file_id, expires).encode(), given)

    def _signing_key(self) -> bytes:
        """32 random bytes made at first use, readable by this user only; read once."""
        if self._key is None:
            self._key = self._stored_key()
        return self._key

    def _stored_key(self) -> bytes:
        path = self.root / SIGNING_KEY_FILE
        with contextlib.suppress(FileNotFoundError):
            key = path.read_bytes()
            if len(key) == 32:
                return key
        self.root.mkdir(parents=True, exist_ok=True)
        key = secrets.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key)
        return key

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"not a blob key: {key!r}")
        return self.root / key


def _write_atomic(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


class S3Blobs:
    """Blobs in an S3 bucket (deployed); links are presigned GETs. boto3 is imported at the
    first use, and its calls run in a thread."""

    def __init__(
        self, bucket: str, *, region: str | None = None, endpoint_url: str | None = None
    ) -> None:
        self.bucket = bucket
        self.region = region
        self.endpoint_url = endpoint_url
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3  # type: ignore[import-untyped, unused-ignore]

            session = boto3.session.Session()
            self._client = session.client(
                "s3", region_name=self.region, endpoint_url=self.endpoint_url
            )
        return self._client

    async def put(self, key: str, data: bytes, meta: dict[str, str], media_type: str) -> None:
        await self._call(
            "put_object",
            Bucket=self.bucket,
            Key=key,
            Body=data,
            ContentType=media_type,
            Metadata={"meta": json.dumps(meta, ensure_ascii=True)},
        )

    async def get(self, key: str) -> Blob | None:
        response = await self._call("get_object", Bucket=self.bucket, Key=key)
        if response is None:
            return None
        data = await asyncio.to_thread(response["Body"].read)
        return Blob(data, _meta(response))

    async def head(self, key: str) -> dict[str, str] | None:
        response = await self._call("head_object", Bucket=self.bucket, Key=key)
        return None if response is None else _meta(response)

    async def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            objects = [{"Key": key} for key in keys[start : start + 1000]]
            await self._call(
                "delete_objects", Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            )

    def url(self, key: str, name: str, media_type: str, ttl_s: int) -> tuple[str, int]:
        params = {
            "Bucket": self.bucket,
            "Key": key,
            "ResponseContentType": media_type if media_type != "text/html" else "text/plain",
            "ResponseContentDisposition": disposition(name, media_type),
        }
        url = self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=ttl_s)
        return str(url), int(time.time()) + ttl_s

    async def _call(self, operation: str, **params: Any) -> Any:
        """One S3 call in a thread; a missing key is None, anything else FilesUnavailable."""
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped, unused-ignore]

        try:
            return await asyncio.to_thread(getattr(self.client, operation), **params)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise FilesUnavailable(f"the file store refused {operation}: {code}") from exc
        except BotoCoreError as exc:
            raise FilesUnavailable(
                f"the file store could not be reached: {type(exc).__name__}"
            ) from exc


def _meta(response: dict[str, Any]) -> dict[str, str]:
    raw = response.get("Metadata", {}).get("meta", "{}")
    try:
        meta = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
