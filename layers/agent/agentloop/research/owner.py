"""Who a research job is charged to: its owner, a principal id, under the same limits as chat.

A job's spec may name its owner (``"owner": "key:nightly"``); a job without one is charged
to the deployment's research owner, ``AGENTLOOP_RESEARCH_OWNER`` (default ``key:research``).
An owner id has the form the server gives its callers (``agentloop.principal``): ``key:<key
name>`` (the API key's name rules), ``jwt:<24 hex digits>``, ``iam:<ARN>`` or ``local``, so a
job spends the same allowance as that caller's chat requests. An owner carries no tier (none
is claimed for it): the default limits, or the operator's overrides
(``python -m agentloop limits set <id> ...``), apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentloop.auth import KEY_NAME
from agentloop.config import ConfigurationError
from agentloop.principal import JWT_ID_HEX_CHARS, Principal

OWNER_ENV = "AGENTLOOP_RESEARCH_OWNER"
DEFAULT_OWNER = "key:research"
MAX_ARN_CHARS = 2048
"""As the server bounds an IAM caller's ARN (``server.identity.MAX_ARN_CHARS``)."""
_JWT_ID = re.compile(f"[0-9a-f]{{{JWT_ID_HEX_CHARS}}}")
_ARN = re.compile(r"arn:[!-~]+")


def check_owner(owner_id: str) -> str:
    """``owner_id`` if it is a principal id the server could give a caller, else ValueError
    saying which forms are."""
    owner_principal(owner_id)
    return owner_id


def owner_principal(owner_id: str) -> Principal:
    """The principal a job's owner id names; ValueError when it names none."""
    kind, sep, rest = owner_id.partition(":")
    if owner_id == "local":
        return Principal.local()
    if sep and kind == "key" and KEY_NAME.fullmatch(rest):
        return Principal.for_key(rest)
    if sep and kind == "jwt" and _JWT_ID.fullmatch(rest):
        return Principal(kind="jwt", id=owner_id, name=owner_id)
    if sep and kind == "iam" and len(rest) <= MAX_ARN_CHARS and _ARN.fullmatch(rest):
        return Principal.for_iam(rest)
    raise ValueError(
        "an owner is a principal id: key:<key name> (1-64 letters, digits and . _ @ + -), "
        f"jwt:<{JWT_ID_HEX_CHARS} hex digits>, iam:<ARN> or local"
    )


def default_owner(environ: Mapping[str, str]) -> str:
    """The owner of jobs that name none: ``AGENTLOOP_RESEARCH_OWNER``, else ``key:research``;
    ConfigurationError when the variable names no principal."""
    value = environ.get(OWNER_ENV, "").strip() or DEFAULT_OWNER
    try:
        return check_owner(value)
    except ValueError as exc:
        raise ConfigurationError(f"{OWNER_ENV}: {exc}") from None
