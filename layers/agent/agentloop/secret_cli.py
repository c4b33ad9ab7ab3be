"""Operator commands for the project secret: ``python -m agentloop secret ...`` and ``token``.

Secrets Manager's ``put-secret-value`` replaces the whole value, so writing only the entries
one has in mind drops the others, among them the ``AGENTLOOP_SIGNING_KEY`` the stack
generated (without it, a paused run cannot be continued on another instance). These commands
change one entry: they read the secret, change that entry, and write the whole object back,
and only if nobody wrote the secret in between: the version read must still be the current
one just before the write, and the new version's id is derived from it, so two of these
commands that read the same version cannot both write (Secrets Manager keeps one value per
version id). A change made with another tool in the instant between that check and the
write is the one case not caught. Refused, a command says so and asks for a rerun.

A value is read from stdin, from a prompt that does not echo, or from a named environment
variable; never from the command line, which shell history and ``ps`` keep. Nothing here
prints a stored value; ``token`` and ``secret add-token`` print the new token, once.
boto3 is imported only by the commands that call AWS.

API keys have names (``--name alice``): the stored entry is ``alice:<sha256>``, the caller is
the principal ``key:alice``, and ``secret remove-token --name alice`` revokes every key of that
name. A key stored without a name is named by its id (its hash's first 8 hex digits).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from agentloop.auth import SECRET_HASHES_KEY, TOKEN_HASHES_ENV, check_key_name, new_token
from agentloop.secret_store import PROVIDER_KEY_NAMES, SECRET_ID_ENV

SIGNING_KEY = "AGENTLOOP_SIGNING_KEY"
_NEXT_VERSION = uuid.UUID("5b0f8a52-3c1e-4d7a-9e51-6a0c2f4b8d17")
"""Namespace of the version ids this module writes: uuid5(this, the version replaced)."""
TOKEN_ID_LENGTH = 8
"""A token's id: the first hex digits of its hash; the name of a key stored without one
(``BearerAuth.check``), so its principal is ``key:<id>``. Not a secret."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_HEX = re.compile(r"[0-9a-f]+")


class SecretCommandError(Exception):
    """A refusal or failure the operator can act on; its message never holds a value."""


class SecretChanged(SecretCommandError):
    """The secret was written by someone else between this command's read and its write."""


@dataclass(frozen=True)
class Snapshot:
    """The secret as read: its ARN, the version read, and its JSON object."""

    arn: str
    version_id: str
    entries: dict[str, Any]


class SecretClient:
    """Reads the secret's current JSON object and writes a changed one back, if unchanged."""

    def __init__(self, secret_id: str, client: Any) -> None:
        self.secret_id = secret_id
        self._client = client

    @classmethod
    def connect(cls, secret_id: str, region: str | None = None) -> SecretClient:
        try:
            import boto3  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            raise SecretCommandError(
                "these commands need boto3: pip install boto3 (make dev installs it into .venv)"
            ) from None
        return cls(secret_id, boto3.client("secretsmanager", region_name=region))

    def read(self) -> Snapshot:
        response = self._call("get_secret_value", SecretId=self.secret_id)
        text = response.get("SecretString")
        if not isinstance(text, str):
            raise SecretCommandError(f"secret {self.secret_id!r} holds binary data, not JSON")
        try:
            entries = json.loads(text)
        except json.JSONDecodeError:
            entries = None
        if not isinstance(entries, dict):
            raise SecretCommandError(
                f"secret {self.secret_id!r} does not hold a JSON object; nothing was changed "
                "(this command never replaces a value it cannot read)"
            )
        return Snapshot(str(response["ARN"]), str(response["VersionId"]), entries)

    def write(self, read: Snapshot, entries: Mapping[str, Any]) -> str:
        """Store ``entries`` as the current value if ``read`` is still current; its version."""
        self.ensure_current(read)
        return self.put(read, entries)

    def ensure_current(self, read: Snapshot) -> None:
        """Refuse if another version became current since ``read`` (any writer, any tool)."""
        if self._current_version(read.arn) != read.version_id:
            raise SecretChanged(self._changed())

    def put(self, read: Snapshot, entries: Mapping[str, Any]) -> str:
        """Write ``entries`` as the version that follows ``read``: its id is derived from
        ``read.version_id``, and Secrets Manager keeps one value per id, so of two writers
        that read the same version only the first can write (the second gets
        ResourceExistsException), however their calls interleave."""
        try:
            response = self._client.put_secret_value(
                SecretId=read.arn,
                SecretString=json.dumps(entries),
                ClientRequestToken=str(uuid.uuid5(_NEXT_VERSION, read.version_id)),
            )
        except Exception as exc:
            if _error_code(exc) == "ResourceExistsException":
                raise SecretChanged(self._changed()) from None
            raise self._failure("put_secret_value", exc) from None
        return str(response["VersionId"])

    def _changed(self) -> str:
        return (
            f"secret {self.secret_id!r} was changed by someone else while this command ran; "
            "nothing was written: run the command again"
        )

    def _current_version(self, arn: str) -> str | None:
        stages = self._call("describe_secret", SecretId=arn).get("VersionIdsToStages", {})
        return next((v for v, labels in stages.items() if "AWSCURRENT" in labels), None)

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        """One Secrets Manager call; its errors become messages that name the secret."""
        try:
            return dict(getattr(self._client, operation)(**params))
        except Exception as exc:
            raise self._failure(operation, exc) from None

    def _failure(self, operation: str, exc: Exception) -> Exception:
        """botocore's errors as a message naming the secret (and never a value); others as
        they are."""
        from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
            BotoCoreError,
            ClientError,
        )

        if isinstance(exc, ClientError):
            message = str(exc.response.get("Error", {}).get("Message", ""))
            return SecretCommandError(
                f"{operation} on secret {self.secret_id!r} failed: {_error_code(exc)}: {message}"
            )
        if isinstance(exc, BotoCoreError):  # no credentials, no region, no connection
            return SecretCommandError(f"cannot reach Secrets Manager: {exc}")
        return exc


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    return str(error.get("Code", "")) or type(exc).__name__


# ---- the changes, as pure functions of the secret's object ----------------------------------


def with_entry(entries: Mapping[str, Any], name: str, value: str) -> dict[str, Any]:
    """The object with ``name`` set to ``value``; every other entry as it was."""
    _check_name(name)
    if name == SECRET_HASHES_KEY:
        raise SecretCommandError(
            f"{SECRET_HASHES_KEY} is a list of token hashes: use `secret add-token` "
            "and `secret remove-token`"
        )
    if name == SIGNING_KEY and len(value) < 16:
        raise SecretCommandError(f"{SIGNING_KEY} needs at least 16 characters")
    return {**entries, name: value}


def without_entry(entries: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The object without ``name``; refuses the entries the function cannot do without."""
    _check_name(name)
    if name in (SIGNING_KEY, SECRET_HASHES_KEY):
        raise SecretCommandError(
            f"{name} is not removed by this command (without it "
            + (
                "paused runs cannot be continued on another instance); to rotate it use "
                f"`secret set {SIGNING_KEY}`"
                if name == SIGNING_KEY
                else "no token is valid); use `secret remove-token`"
            )
        )
    if name not in entries:
        raise SecretCommandError(f"the secret has no entry {name}")
    return {key: value for key, value in entries.items() if key != name}


def token_hashes(entries: Mapping[str, Any]) -> list[str]:
    """``auth_token_sha256`` as a list, whichever of its two accepted forms it is stored in."""
    value = entries.get(SECRET_HASHES_KEY)
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise SecretCommandError(
        f"{SECRET_HASHES_KEY} in the secret is neither a list of strings nor one string: "
        "fix it by hand before using these commands"
    )


def key_entry(digest: str, name: str | None) -> str:
    """What is stored for a key: ``name:<sha256>``, or the bare hash of an unnamed one."""
    if name is None:
        return digest
    try:
        return f"{check_key_name(name)}:{digest}"
    except ValueError as exc:
        raise SecretCommandError(f"--name: {exc}") from None


def with_token_hash(entries: Mapping[str, Any], digest: str) -> dict[str, Any]:
    """The object with one more key entry (``digest``: a hash, or ``name:<hash>``)."""
    return {**entries, SECRET_HASHES_KEY: [*token_hashes(entries), digest]}


def entry_name(entry: str) -> str | None:
    """The name of a stored key entry (None for a bare hash)."""
    name, sep, _ = entry.strip().rpartition(":")
    return name if sep else None


def entry_hash(entry: str) -> str:
    """The hash part of a stored key entry, lowercase."""
    return entry.strip().rpartition(":")[2].lower()


def without_key_name(entries: Mapping[str, Any], name: str) -> tuple[dict[str, Any], int]:
    """The object without every key named ``name`` (its holder revoked), and how many."""
    hashes = token_hashes(entries)
    kept = [h for h in hashes if entry_name(h) != name]
    if len(kept) == len(hashes):
        raise SecretCommandError(f"no key is named {name[:64]!r} (`secret list` shows them)")
    return {**entries, SECRET_HASHES_KEY: kept}, len(hashes) - len(kept)


def without_token(entries: Mapping[str, Any], token_id: str) -> tuple[dict[str, Any], str]:
    """The object without the one hash that starts with ``token_id``, and that hash."""
    wanted = token_id.strip().lower()
    if len(wanted) < TOKEN_ID_LENGTH or not _HEX.fullmatch(wanted):
        raise SecretCommandError(
            f"name the token by its id: at least {TOKEN_ID_LENGTH} hex digits of its hash "
            "(`secret list` shows them), or by its key's name with --name"
        )
    hashes = token_hashes(entries)
    matches = [h for h in hashes if entry_hash(h).startswith(wanted)]
    if not matches:
        raise SecretCommandError(f"no token hash starts with {wanted}")
    if len(matches) > 1:
        raise SecretCommandError(f"{len(matches)} token hashes start with {wanted}: give more")
    kept = [h for h in hashes if h != matches[0]]
    return {**entries, SECRET_HASHES_KEY: kept}, entry_hash(matches[0])


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise SecretCommandError(
            f"{name[:40]!r} is not an entry name: letters, digits and _, not starting with a digit"
        )


def describe(entries: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Each entry's name and what it holds, without its value (hash ids are not secret)."""
    rows: list[tuple[str, str]] = []
    for name in sorted(entries):
        value = entries[name]
        if name == SECRET_HASHES_KEY:
            try:
                ids = [_key_label(h) for h in token_hashes(entries)]
            except SecretCommandError:
                rows.append((name, "malformed (neither a list of strings nor one string)"))
                continue
            listed = ": " + ", ".join(ids) if ids else ""
            rows.append((name, f"{len(ids)} token hash(es){listed}"))
        elif isinstance(value, str):
            rows.append((name, "set" if value.strip() else "empty"))
        else:
            rows.append((name, f"a JSON {type(value).__name__}"))
    return rows


def _key_label(entry: str) -> str:
    """``name:<id>`` for a named key, ``<id>`` for an unnamed one: never the whole hash."""
    name, key_id = entry_name(entry), entry_hash(entry)[:TOKEN_ID_LENGTH]
    return f"{name}:{key_id}" if name is not None else key_id


# ---- the command line -----------------------------------------------------------------------


def add_commands(commands: Any) -> None:
    """Register ``secret`` and ``token`` on ``python -m agentloop``'s subcommands."""
    token = commands.add_parser(
        "token", help="make a bearer token and its sha256 (nothing is stored)"
    )
    token.add_argument("--name", help="the key's name: prints the entry to store, name:sha256")
    token.set_defaults(run=_run_token)

    secret = commands.add_parser(
        "secret",
        help="change one entry of the deployed secret, keeping the others",
        description=(
            "Read the project's Secrets Manager secret, change one entry and write it back; "
            "refused if someone else wrote the secret meanwhile. Values are read from stdin "
            "or a prompt, never from the command line."
        ),
    )
    # Which secret: an option of every action, so it may follow the action's name.
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--secret-id",
        default=os.environ.get(SECRET_ID_ENV),
        help="the secret's name (<stack>/agentloop) or ARN (the stack's SecretArn output); "
        f"default: {SECRET_ID_ENV}",
    )
    where.add_argument("--region", help="its region (default: the AWS CLI's)")
    actions = secret.add_subparsers(dest="action", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help, parents=[where])
        return parser

    action("list", "entry names and whether each is set (never the values)")
    set_ = action("set", "set one entry; the value is read from stdin or a prompt")
    set_.add_argument("name", help="e.g. GROQ_API_KEY, OPENAI_API_KEY, TAVILY_API_KEY")
    set_.add_argument("--from-env", metavar="VAR", help="take the value from this variable")
    set_.add_argument("value", nargs="?", help=argparse.SUPPRESS, action=_RefuseArgvValue)
    action("unset", "remove one entry").add_argument("name")
    add = action("add-token", "make a bearer token, add its sha256, print the token once")
    add.add_argument("--name", help="whose key it is (e.g. alice): the caller is key:<name>")
    remove = action("remove-token", "remove a token's hash, by its id or its key's name")
    remove.add_argument(
        "token_id", nargs="?", help="the first 8+ hex digits of its hash (see list)"
    )
    remove.add_argument("--name", help="remove every key of this name (revoke its holder)")
    secret.set_defaults(run=_run_secret)


class _RefuseArgvValue(argparse.Action):
    """A value given on the command line is refused without being repeated (argparse's own
    "unrecognized arguments" error would print it back)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values is not None:  # an absent optional positional arrives as its default, None
            parser.error(
                "a value is never taken from the command line (shell history and ps keep "
                "it): give it on stdin, at the prompt, or with --from-env VAR"
            )


def run(args: argparse.Namespace) -> int:
    """Run the ``token`` or ``secret`` command parsed by :func:`add_commands`."""
    try:
        code: int = args.run(args, sys.stdin, sys.stdout, sys.stderr)
    except SecretCommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return code


def _run_token(args: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    token, digest = new_token()
    entry = key_entry(digest, args.name)
    _print_token(token, digest, out, args.name)
    print(
        f"Store the {'entry' if args.name else 'sha256'} (deployed: `python -m agentloop secret "
        f"add-token` makes a token and stores it; locally: {TOKEN_HASHES_ENV}); give the token "
        "to the client.",
        file=err,
    )
    if args.name:
        print(f"entry:  {entry}", file=out)
    return 0


def _print_token(token: str, digest: str, out: TextIO, name: str | None = None) -> None:
    print(f"token:  {token}", file=out)
    print(f"sha256: {digest}", file=out)
    print(f"id:     {digest[:TOKEN_ID_LENGTH]}", file=out)
    if name:
        print(f"name:   {name}", file=out)


def _run_secret(args: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    if not args.secret_id or not args.secret_id.strip():
        raise SecretCommandError(
            f"name the secret: --secret-id <stack>/agentloop (or set {SECRET_ID_ENV})"
        )
    # The value is read before any AWS call: a missing one costs no round trip.
    value = read_value(args.name, args.from_env, stdin, err) if args.action == "set" else ""
    client = SecretClient.connect(args.secret_id.strip(), args.region)
    current = client.read()
    where = f"secret {current.arn}"
    if args.action == "list":
        print(where, file=out)
        rows = describe(current.entries)
        width = max((len(name) for name, _ in rows), default=0)
        for name, what in rows:
            print(f"  {name:<{width}}  {what}", file=out)
        return 0
    if args.action == "set":
        changed = with_entry(current.entries, args.name, value)
        version = client.write(current, changed)
        print(f"{args.name} set in {where} (version {version}); other entries kept", file=out)
        _advise_on_set(args.name, err)
        return 0
    if args.action == "unset":
        version = client.write(current, without_entry(current.entries, args.name))
        print(f"{args.name} removed from {where} (version {version})", file=out)
        return 0
    if args.action == "add-token":
        token, digest = new_token()
        changed = with_token_hash(current.entries, key_entry(digest, args.name))
        client.write(current, changed)  # the token is printed only once its hash is stored
        _print_token(token, digest, out, args.name)
        count = len(changed[SECRET_HASHES_KEY])
        print(
            f"Its sha256 was added to {SECRET_HASHES_KEY} in {where} ({count} now). Give the "
            "token to the client: it is stored nowhere and is not shown again. It is accepted "
            "within 5 minutes (the function caches the secret).",
            file=err,
        )
        return 0
    changed, removed = _removal(current.entries, args)
    client.write(current, changed)
    left = len(changed[SECRET_HASHES_KEY])
    print(f"{removed} removed from {where} ({left} left)", file=out)
    if left == 0:
        print("warning: no token hashes are left: every bearer request will get 401", file=err)
    return 0


def _removal(entries: Mapping[str, Any], args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """``remove-token``'s change: one key by its id, or every key of ``--name``."""
    if (args.token_id is None) == (args.name is None):
        raise SecretCommandError("name the token by its id, or its key's name with --name")
    if args.name is not None:
        changed, count = without_key_name(entries, args.name)
        return changed, f"{count} key(s) named {args.name}"
    changed, removed = without_token(entries, args.token_id)
    return changed, f"token {removed[:TOKEN_ID_LENGTH]}"


def read_value(
    name: str,
    from_env: str | None,
    stdin: TextIO,
    err: TextIO,
    environ: Mapping[str, str] = os.environ,
) -> str:
    """The value for ``name``: from a variable, a prompt without echo, or stdin's first line."""
    if from_env is not None:
        value = environ.get(from_env, "").strip()
        if not value:
            raise SecretCommandError(f"--from-env {from_env}: the variable is not set or empty")
        return value
    if stdin.isatty():
        value = getpass.getpass(f"{name} (not shown): ", stream=err).strip()
    else:
        lines = stdin.read().strip().splitlines()
        if len(lines) > 1:
            raise SecretCommandError("stdin holds more than one line: give the value alone")
        value = lines[0].strip() if lines else ""
    if not value:
        raise SecretCommandError(f"no value given for {name} (to remove it: `secret unset {name}`)")
    return value


def _advise_on_set(name: str, err: TextIO) -> None:
    if name == SIGNING_KEY:
        print(
            "note: paused runs whose resume token was signed with the old key can no longer "
            "be continued",
            file=err,
        )
    elif name in PROVIDER_KEY_NAMES:
        print(
            "note: the functions read provider keys when an instance starts; to use the new "
            "value at once, start fresh instances (docs/deploy.md, 'When changes take effect')",
            file=err,
        )
    else:
        print(
            f"note: {name} is not one of the keys the functions copy into their environment "
            f"({', '.join(PROVIDER_KEY_NAMES)}); a header of AGENTLOOP_MCP_SERVERS can name it",
            file=err,
        )
