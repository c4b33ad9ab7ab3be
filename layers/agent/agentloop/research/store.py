"""Where research results go: a local folder by default, an S3 bucket when one is configured.

One small interface so the worker, the CLI and the tests write results the same way;
keys are always ``research/<date>/<job-id>/<file>``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

RESULTS_DIR_ENV = "AGENTLOOP_RESULTS_DIR"
RESULTS_BUCKET_ENV = "AGENTLOOP_RESULTS_BUCKET"
DEFAULT_RESULTS_DIR = "./research-output"


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


def _checked(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a relative store key: {key!r}")
    return key


class LocalResultStore:
    """Files under a folder; each write is atomic (a reader never sees half a report)."""

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


def store_from_env(environ: Mapping[str, str] | None = None) -> ResultStore:
    """S3 when ``AGENTLOOP_RESULTS_BUCKET`` is set, else ``AGENTLOOP_RESULTS_DIR``."""
    env = os.environ if environ is None else environ
    bucket = env.get(RESULTS_BUCKET_ENV, "").strip()
    if bucket:
        return S3ResultStore(bucket)
    return LocalResultStore(env.get(RESULTS_DIR_ENV, "").strip() or DEFAULT_RESULTS_DIR)
