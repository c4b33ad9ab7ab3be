"""Who is calling: one value for every way a caller can prove who they are.

The ``id`` keys a caller's limits, threads, files and sandbox tenant, and appears in logs, so
it is short, stable and holds nothing secret: a JWT caller's id is a digest of issuer and
subject (an issuer URL is long, and two issuers may reuse a subject), a key caller's is the
key's name (never the key), an IAM caller's is the ARN. ``name`` is what a person reads.
Standard library only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

PrincipalKind = Literal["jwt", "key", "iam", "local"]

PRINCIPAL_KEY = "principal"
"""Key of the run's Principal in ``ChatContext.extras`` / ``ToolContext.extras``."""

JWT_ID_HEX_CHARS = 24
"""96 bits of sha256(issuer|subject): no collision among any plausible number of users."""


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller the server has authenticated (or, locally, chosen not to)."""

    kind: PrincipalKind
    id: str
    name: str
    tier: str | None = None
    issuer: str | None = None
    subject: str | None = None

    @classmethod
    def local(cls) -> Principal:
        """The one caller of a server run without authentication."""
        return cls(kind="local", id="local", name="local")

    @classmethod
    def for_key(cls, name: str, tier: str | None = None) -> Principal:
        """A caller holding the API key stored under ``name``."""
        return cls(kind="key", id=f"key:{name}", name=name, tier=tier)

    @classmethod
    def for_iam(cls, arn: str, tier: str | None = None) -> Principal:
        """A caller AWS IAM authenticated (the Function URL's SigV4 check)."""
        return cls(kind="iam", id=f"iam:{arn}", name=arn, tier=tier)

    @classmethod
    def for_jwt(cls, issuer: str, subject: str, name: str, tier: str | None) -> Principal:
        """A caller whose JWT ``issuer`` signed for ``subject`` (checked by agentloop.oidc)."""
        return cls(
            kind="jwt",
            id=f"jwt:{jwt_digest(issuer, subject)}",
            name=name,
            tier=tier,
            issuer=issuer,
            subject=subject,
        )


def jwt_digest(issuer: str, subject: str) -> str:
    """The short stable digest a JWT caller's id is made of."""
    joined = f"{issuer}|{subject}".encode()
    return hashlib.sha256(joined).hexdigest()[:JWT_ID_HEX_CHARS]
