"""The project's one Secrets Manager secret: a JSON object of provider keys and token hashes.

Its id comes from ``AGENTLOOP_SECRET_ID`` (the SAM template sets it). Reads go through
Powertools parameters so a warm container serves them from memory for ``max_age_s`` seconds:
rotating a value takes effect within that time, without a redeploy, and without a Secrets
Manager call per request. Powertools and boto3 are imported on first read, so importing
this module costs nothing on a cold start that never reads the secret.

Error messages name the secret id, never a value read from it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

SECRET_ID_ENV = "AGENTLOOP_SECRET_ID"
DEFAULT_MAX_AGE_S = 300

PROVIDER_KEY_NAMES: tuple[str, ...] = (
    "GROQ_API_KEY",
    "OPENAI_API_KEY",
    "TAVILY_API_KEY",
    "BRAVE_API_KEY",
    "AGENTLOOP_SIGNING_KEY",
)
"""Keys copied from the secret into the environment, where the SDKs, the tools and the
signer of paused runs (``signing.Signer``) look for them."""


def read_secret(secret_id: str, max_age_s: int = DEFAULT_MAX_AGE_S) -> dict[str, Any]:
    """Return the secret's JSON object, from Powertools' cache if it is younger than max_age_s.

    Note Powertools' rule: an entry lives for the ``max_age`` it was *stored* with; a later
    read with a smaller ``max_age_s`` does not shorten it. ``max_age_s=0`` reads without caching.
    The result is a copy, so a caller changing it cannot corrupt the cached value.
    """
    from agentloop.config import ConfigurationError

    if not secret_id or not secret_id.strip():
        raise ConfigurationError(f"no secret id given: set {SECRET_ID_ENV}")

    from aws_lambda_powertools.utilities import parameters
    from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
        BotoCoreError,
        ClientError,
    )

    try:
        value = parameters.get_secret(secret_id, transform="json", max_age=max_age_s)
    except parameters.TransformParameterError:
        raise ConfigurationError(
            f"secret {secret_id!r} is not valid JSON: it must hold a JSON object"
        ) from None
    except parameters.GetParameterError as exc:
        raise ConfigurationError(_describe_read_failure(secret_id, exc)) from exc
    except (BotoCoreError, ClientError) as exc:
        # Raised while Powertools creates its client (e.g. no region), outside its own wrapping.
        raise ConfigurationError(
            f"could not read secret {secret_id!r}: {type(exc).__name__}"
        ) from exc

    if not isinstance(value, dict):
        raise ConfigurationError(
            f"secret {secret_id!r} must hold a JSON object, not a JSON {_json_type(value)}"
        )
    return copy.deepcopy(value)


def load_provider_keys(
    secret: Mapping[str, Any], environ: MutableMapping[str, str] = os.environ
) -> list[str]:
    """Copy provider keys from the secret into unset variables; return the names set.

    A variable that is already set (to anything but an empty string) wins, so a local
    ``GROQ_API_KEY`` or a template override is never replaced. Values are stripped; empty
    or non-string values are skipped. Only names are returned, so the result can be logged.
    """
    loaded: list[str] = []
    for name in PROVIDER_KEY_NAMES:
        if environ.get(name):
            continue
        value = secret.get(name)
        if not isinstance(value, str) or not value.strip():
            continue
        environ[name] = value.strip()
        loaded.append(name)
    return loaded


def _describe_read_failure(secret_id: str, exc: BaseException) -> str:
    """Say why a read failed from the AWS error code (Powertools keeps the original as context)."""
    cause = exc.__context__ or exc
    response = getattr(cause, "response", None)
    code = ""
    if isinstance(response, dict):
        code = str(response.get("Error", {}).get("Code", ""))
    if code == "ResourceNotFoundException":
        return (
            f"secret {secret_id!r} was not found in Secrets Manager: "
            f"check {SECRET_ID_ENV} and the region"
        )
    if code == "AccessDeniedException":
        return (
            f"access to secret {secret_id!r} was denied: the function's role needs "
            "secretsmanager:GetSecretValue on it"
        )
    return f"could not read secret {secret_id!r}: {code or type(cause).__name__}"


def _json_type(value: object) -> str:
    """Name a decoded JSON value's type the way JSON does."""
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__
