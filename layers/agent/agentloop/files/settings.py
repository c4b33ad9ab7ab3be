"""Where kept files go: ``AGENTLOOP_FILES_BUCKET`` (S3, deployed) or a directory beside the
store (``AGENTLOOP_FILES_DIR``, default ``.agentloop/files``), and how long links last
(``AGENTLOOP_FILE_URL_TTL_S``, default an hour)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agentloop.config import ConfigurationError
from agentloop.files.artifacts import DEFAULT_URL_TTL_S, Artifacts
from agentloop.files.blobs import DirectoryBlobs, S3Blobs

DEFAULT_DIR = ".agentloop/files"
MAX_URL_TTL_S = 7 * 24 * 3600
"""S3's longest presigned link (a role's credentials may end it sooner)."""


def artifacts_from_env(environ: Mapping[str, str] | None = None) -> Artifacts:
    env = os.environ if environ is None else environ
    raw_ttl = env.get("AGENTLOOP_FILE_URL_TTL_S", "").strip()
    ttl = DEFAULT_URL_TTL_S
    if raw_ttl:
        if not raw_ttl.isdigit() or not 60 <= int(raw_ttl) <= MAX_URL_TTL_S:
            raise ConfigurationError(
                f"AGENTLOOP_FILE_URL_TTL_S must be 60 to {MAX_URL_TTL_S} seconds, got {raw_ttl!r}"
            )
        ttl = int(raw_ttl)
    bucket = env.get("AGENTLOOP_FILES_BUCKET", "").strip()
    if bucket:
        endpoint = env.get("AGENTLOOP_FILES_ENDPOINT_URL", "").strip() or None
        return Artifacts(S3Blobs(bucket, endpoint_url=endpoint), url_ttl_s=ttl)
    directory = env.get("AGENTLOOP_FILES_DIR", "").strip() or DEFAULT_DIR
    return Artifacts(DirectoryBlobs(directory), url_ttl_s=ttl)
