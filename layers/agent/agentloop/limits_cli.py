"""Operator commands for per-principal limits: ``python -m agentloop limits ...``.

- ``limits show <principal-id> [--tier T] [--json]``: the principal's overrides, and each
  limit that applies with what is used (runs in flight included), remaining and its reset;
- ``limits set <principal-id> --usd-per-day 5 ...``: change some overrides (the others stay);
  ``none`` lifts a limit for that principal (``0`` forbids it all);
- ``limits clear <principal-id>``: remove every override (the tier's limits apply again).

The store is ``AGENTLOOP_STORE``'s (the server's); the defaults and tiers
``AGENTLOOP_LIMITS``'s. Overrides are kept in the store, so they hold on every instance
from the next request on. The quota and the store are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from agentloop.quota import LimitUsage, Quota

# quota.limits.LIMIT_NAMES, written out here so building the CLI's parser imports nothing of
# the quota (a test keeps the two equal).
LIMIT_OPTIONS = (
    "usd_per_day",
    "usd_per_month",
    "tokens_per_day",
    "concurrent_runs",
    "requests_per_minute",
)
_PRINCIPAL_ID = re.compile(r"[!-~]{1,256}")
"""Printable ASCII without spaces: every principal id the server makes (``key:alice``,
``jwt:<hex>``, an IAM ARN) has this form."""


class LimitsCommandError(Exception):
    """A refusal or failure the operator can act on."""


def add_commands(commands: Any) -> None:
    """``limits show|set|clear`` on the main parser's subcommands."""
    limits = commands.add_parser("limits", help="per-principal limits: show, set, clear")
    actions = limits.add_subparsers(dest="limits_command", required=True)
    show = actions.add_parser("show", help="a principal's limits, usage and overrides")
    show.add_argument("principal", type=_principal_id, help="e.g. key:alice")
    show.add_argument("--tier", help="the tier its requests carry (default: none)")
    show.add_argument("--json", action="store_true", help="print JSON")
    put = actions.add_parser("set", help="change a principal's overrides")
    put.add_argument("principal", type=_principal_id)
    for name in LIMIT_OPTIONS:
        flag = "--" + name.replace("_", "-")
        put.add_argument(
            flag, dest=name, type=_limit_value, default=argparse.SUPPRESS, help="a number, or none"
        )
    clear = actions.add_parser("clear", help="remove a principal's overrides")
    clear.add_argument("principal", type=_principal_id)


def _principal_id(text: str) -> str:
    if not _PRINCIPAL_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            "a principal id is 1-256 printable characters without spaces, e.g. key:alice"
        )
    return text


def _limit_value(text: str) -> float | None:
    """A limit's new value: a number, or ``none`` (no such limit for this principal)."""
    if text.strip().lower() in ("none", "null"):
        return None
    try:
        return float(text) if "." in text or "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or none, got {text!r}") from None


def run(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run one ``limits`` command: 0 done, 1 the store failed, 2 a bad value or setting.
    Output goes to ``out`` and ``err`` (default: stdout and stderr as they are now)."""
    from agentloop.config import ConfigurationError
    from agentloop.quota.limits import LimitValueError
    from agentloop.store import StoreError

    env = os.environ if environ is None else environ
    out, err = out or sys.stdout, err or sys.stderr
    try:
        quota = _quota(env)
        try:
            asyncio.run(_command(args, quota, env, out))
        finally:
            asyncio.run(quota.store.close())
    except (ConfigurationError, LimitValueError, LimitsCommandError) as exc:
        print(f"error: {exc}", file=err)
        return 2
    except StoreError as exc:
        print(f"error: the store failed: {exc}", file=err)
        return 1
    return 0


def _quota(env: Mapping[str, str]) -> Quota:
    """The server's quota on its store; with ``AGENTLOOP_LIMITS`` unset, no defaults (the
    overrides can still be read and written)."""
    from agentloop.quota import LimitsConfig, Quota, limits_from_env
    from agentloop.store import store_from_env

    config = limits_from_env(env) or LimitsConfig()
    return Quota(config, store_from_env(env), time.time)


async def _command(
    args: argparse.Namespace, quota: Quota, env: Mapping[str, str], out: TextIO
) -> None:
    from agentloop.quota import ENV

    if args.limits_command == "set":
        changes = {n: getattr(args, n) for n in LIMIT_OPTIONS if hasattr(args, n)}
        if not changes:
            raise LimitsCommandError("nothing to set: give at least one --<limit> option")
        overrides = {**await _overrides(quota, args.principal), **changes}
        await quota.set_limits(args.principal, overrides)
        out.write(f"{args.principal}: overrides {json.dumps(overrides)}\n")
    elif args.limits_command == "clear":
        await quota.set_limits(args.principal, {})
        out.write(f"{args.principal}: no overrides\n")
    else:
        await _show(quota, args, out)
    if not env.get(ENV, "").strip():
        out.write(f"note: {ENV} is unset, so the server checks no limits at all\n")


async def _overrides(quota: Quota, principal_id: str) -> dict[str, Any]:
    from agentloop.quota.state import LIMITS_KEY, partition

    record = await quota.store.get(partition(principal_id), LIMITS_KEY)
    return dict(record.data) if record is not None else {}


async def _show(quota: Quota, args: argparse.Namespace, out: TextIO) -> None:
    from agentloop.principal import Principal

    who = Principal(kind="key", id=args.principal, name=args.principal, tier=args.tier)
    usage = await quota.usage(who)
    overrides = await _overrides(quota, args.principal)
    if args.json:
        limits = {name: _usage_json(u) for name, u in usage.items()}
        shown = {"principal": args.principal, "overrides": overrides, "limits": limits}
        out.write(json.dumps(shown) + "\n")
        return
    tier = args.tier or "none"
    out.write(f"{args.principal} (tier: {tier}), overrides: {json.dumps(overrides)}\n")
    if not usage:
        out.write("no limits apply\n")
    for name, u in usage.items():
        reset = "as runs end" if u.reset_at is None else _when(u.reset_at)
        line = f"{u.used:g} used of {u.limit:g}, {u.remaining:g} left, resets {reset}"
        out.write(f"  {name:<20} {line}\n")


def _usage_json(u: LimitUsage) -> dict[str, Any]:
    return {"limit": u.limit, "used": u.used, "remaining": u.remaining, "reset_at": u.reset_at}


def _when(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
