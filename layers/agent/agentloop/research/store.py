"""Where research results go: a local folder by default, an S3 bucket when one is configured.

One small interface so the worker, the CLI and the tests write results the same way;
report keys are ``research/<date>/<job-id>/<file>``, checkpoints ``checkpoints/...``.
Checkpoints are written with a compare-and-swap (:meth:`ResultStore.put_if`): S3's
conditional writes (``If-Match`` / ``If-None-Match``), and a file lock locally, so two
deliveries of one job can never both extend it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

RESULTS_DIR_ENV = "AGENTLOOP_RESULTS_DIR"
RESULTS_BUCKET_ENV = "AGENTLOOP_RESULTS_BUCKET"
DEFAULT_RESULTS_DIR = "./research-output"


@dataclass(frozen=True)
class Versioned:
    """A stored object and the version to name when replacing it (S3's ETag)."""

    body: bytes
    version: str


class VersionConflict(Exception):
    """The key changed since it was read (or exists when it was to be created)."""


class ResultStore(Protocol):
    def put(self, key: str, body: bytes, content_type: str) -> str:
        """Store ``body`` under ``key`` (replacing it) and return where it went."""
        ...

    def location(self, key: str) -> str:
        """Where ``key`` is (or would be), for reports and logs."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key`` if it is there (a missing key is not an error)."""
        ...

    def get(self, key: str) -> Versioned | None:
        """``key``'s body and version, or None when there is no such key."""
        ...

    def put_if(self, key: str, body: bytes, content_type: str, *, version: str | None) -> str:
        """Store ``body`` only if ``key`` is still at ``version`` (None: only if it does not
        exist); return the new version. :class:`VersionConflict` otherwise."""
        ...


def _checked(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a relative store key: {key!r}")
    return key


_LOCAL_LOCK = threading.Lock()


class LocalResultStore:
    """Files under a folder; each write is atomic (a reader never sees half a report).

    A version is the SHA-256 of the body (checkpoints carry a sequence number, so two
    versions never share a body); ``put_if`` holds a lock file while it compares and writes,
    so two processes on one folder are kept apart as well as two threads.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def location(self, key: str) -> str:
        return str(self.root / _checked(key))

    def put(self, key: str, body: bytes, content_type: str) -> str:
        path = self.root / _checked(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return str(path)

    def delete(self, key: str) -> None:
        (self.root / _checked(key)).unlink(missing_ok=True)

    def get(self, key: str) -> Versioned | None:
        try:
            body = (self.root / _checked(key)).read_bytes()
        except FileNotFoundError:
            return None
        return Versioned(body, _digest(body))

    def put_if(self, key: str, body: bytes, content_type: str, *, version: str | None) -> str:
        path = self.root / _checked(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path.parent / f".{path.name}.lock"):
            current = self.get(key)
            if (current.version if current else None) != version:
                raise VersionConflict(f"{key} changed since it was read")
            self.put(key, body, content_type)
        return _digest(body)


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with _LOCAL_LOCK:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


class S3ResultStore:
    """Objects in a bucket (encrypted at rest by the bucket's default encryption)."""

    def __init__(self, bucket: str, client: Any = None) -> None:
        self.bucket = bucket
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:  # created on first use: importing boto3 costs a cold start
            import boto3  # type: ignore[import-untyped, unused-ignore]

            self._client = boto3.client("s3")
        return self._client

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{_checked(key)}"

    def put(self, key: str, body: bytes, content_type: str) -> str:
        self.client.put_object(
            Bucket=self.bucket, Key=_checked(key), Body=body, ContentType=content_type
        )
        return self.location(key)

    def delete(self, key: str) -> None:
        # S3 answers 204 whether or not the key existed, so no lookup is needed first.
        self.client.delete_object(Bucket=self.bucket, Key=_checked(key))

    def get(self, key: str) -> Versioned | None:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=_checked(key))
        except self.client.exceptions.NoSuchKey:
            return None
        return Versioned(response["Body"].read(), response["ETag"])

    def put_if(self, key: str, body: bytes, content_type: str, *, version: str | None) -> str:
        # S3's conditional writes: If-Match replaces only that ETag, If-None-Match: * only
        # creates. 412 is a lost race; 409 a concurrent conditional write to the same key.
        condition = {"IfMatch": version} if version is not None else {"IfNoneMatch": "*"}
        try:
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=_checked(key),
                Body=body,
                ContentType=content_type,
                **condition,
            )
        except self.client.exceptions.ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (409, 412):
                raise VersionConflict(f"{self.location(key)} changed since it was read") from exc
            raise
        return str(response["ETag"])


def store_from_env(environ: Mapping[str, str] | None = None) -> ResultStore:
    """S3 when ``AGENTLOOP_RESULTS_BUCKET`` is set, else ``AGENTLOOP_RESULTS_DIR``."""
    env = os.environ if environ is None else environ
    bucket = env.get(RESULTS_BUCKET_ENV, "").strip()
    if bucket:
        return S3ResultStore(bucket)
    return LocalResultStore(env.get(RESULTS_DIR_ENV, "").strip() or DEFAULT_RESULTS_DIR)
