"""``python -m agentloop secret ...``: one entry of the deployed secret changed, the rest kept.

Run through the command's entry point (``agentloop.cli.main``) against moto's Secrets
Manager, with a secret shaped as the template creates it: provider keys, token hashes and the
generated ``AGENTLOOP_SIGNING_KEY``. The commands the docs give are taken from the docs.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from typing import Any

import pytest

from agentloop.auth import AuthError, BearerAuth, hash_token, token_hashes_from_secret
from agentloop.cli import main
from agentloop.secret_cli import (
    SecretChanged,
    SecretClient,
    SecretCommandError,
    with_entry,
    without_entry,
    without_token,
)
from tests.helpers import ROOT

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")

STACK = "agentloop"
NAME = f"{STACK}/agentloop"
SIGNING_KEY = "Q7hW2mLp9xRt4vNc8bYz3kFs6dGj1aHe5uKo0iPq"  # as GenerateSecretString makes one
OLD_HASH = hash_token("al_the-first-client")


@pytest.fixture(autouse=True)
def aws(mocked_aws: None) -> None:
    """Every test here talks to moto."""


@pytest.fixture
def sm() -> Any:
    return boto3.client("secretsmanager", region_name="us-east-1")


@pytest.fixture
def arn(sm: Any) -> str:
    """The secret as a deployed stack holds it once a key and a token were put in."""
    value = {
        "GROQ_API_KEY": "gsk_old",
        "OPENAI_API_KEY": "",
        "auth_token_sha256": [OLD_HASH],
        "AGENTLOOP_SIGNING_KEY": SIGNING_KEY,
    }
    return str(sm.create_secret(Name=NAME, SecretString=json.dumps(value))["ARN"])


def stored(sm: Any) -> dict[str, Any]:
    return dict(json.loads(sm.get_secret_value(SecretId=NAME)["SecretString"]))


def run(
    argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """The command's entry point, with ``stdin`` piped in (not a terminal: no prompt)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def documented(command: str) -> list[tuple[str, list[str]]]:
    """Every ``python -m agentloop secret <command>`` line of the README and docs/deploy.md,
    as the arguments after ``-m agentloop``, and the file it is in."""
    found: list[tuple[str, list[str]]] = []
    for doc in ("README.md", "docs/deploy.md"):
        for line in (ROOT / doc).read_text().splitlines():
            if not re.search(rf"-m agentloop secret {command}\b", line):
                continue
            words = shlex.split(line.split("|")[-1], comments=True)
            args = words[words.index("agentloop") + 1 :]
            found.append((doc, [_fill(word) for word in args]))
    return found


def _fill(word: str) -> str:
    """The docs' placeholders as this test's stack has them."""
    return word.replace("$SECRET_ARN", NAME).replace("<stack>", STACK).rstrip("`")


# ---- the documented way to change a provider key ----------------------------------------------


def test_the_documented_key_change_keeps_every_other_entry(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = documented("set")
    assert {doc for doc, _ in commands} == {"README.md", "docs/deploy.md"}
    for doc, argv in commands:
        if "GROQ_API_KEY" not in argv:
            continue
        code, out, err = run(argv, "gsk_new-from-" + doc + "\n", monkeypatch, capsys)

        assert code == 0, err
        assert stored(sm) == {
            "GROQ_API_KEY": "gsk_new-from-" + doc,
            "OPENAI_API_KEY": "",
            "auth_token_sha256": [OLD_HASH],
            "AGENTLOOP_SIGNING_KEY": SIGNING_KEY,
        }
        assert "gsk_new" not in out + err  # the value is never echoed
        assert "GROQ_API_KEY set in" in out


def test_set_writes_one_new_current_version(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sm.get_secret_value(SecretId=NAME)["VersionId"]

    code, out, _ = run(
        ["secret", "set", "--secret-id", arn, "OPENAI_API_KEY"], "sk-x", monkeypatch, capsys
    )

    assert code == 0
    stages = sm.describe_secret(SecretId=NAME)["VersionIdsToStages"]
    assert stages[before] == ["AWSPREVIOUS"]
    current = [v for v, labels in stages.items() if "AWSCURRENT" in labels]
    assert len(current) == 1
    assert current[0] in out
    assert stored(sm)["OPENAI_API_KEY"] == "sk-x"


def test_set_takes_the_value_from_a_named_variable(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_TAVILY", "tvly-123")

    code, _, err = run(
        ["secret", "set", "--secret-id", NAME, "TAVILY_API_KEY", "--from-env", "MY_TAVILY"],
        "",
        monkeypatch,
        capsys,
    )

    assert code == 0, err
    assert stored(sm)["TAVILY_API_KEY"] == "tvly-123"
    assert stored(sm)["AGENTLOOP_SIGNING_KEY"] == SIGNING_KEY


def test_a_value_on_the_command_line_is_refused(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(
            ["secret", "set", "--secret-id", NAME, "GROQ_API_KEY", "gsk_argv"],
            "",
            monkeypatch,
            capsys,
        )

    assert exited.value.code == 2
    assert stored(sm)["GROQ_API_KEY"] == "gsk_old"
    printed = capsys.readouterr()
    assert "gsk_argv" not in printed.err + printed.out, "the refusal does not repeat the value"


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        (["set", "GROQ_API_KEY"], "", "no value given for GROQ_API_KEY"),
        (["set", "GROQ_API_KEY"], "a\nb\n", "more than one line"),
        (["set", "auth_token_sha256"], "x", "use `secret add-token`"),
        (["set", "AGENTLOOP_SIGNING_KEY"], "short", "at least 16 characters"),
        (["set", "GROQ-KEY"], "x", "is not an entry name"),
        (["unset", "AGENTLOOP_SIGNING_KEY"], "", "is not removed by this command"),
        (["unset", "NOT_THERE"], "", "has no entry NOT_THERE"),
        (["remove-token", "abc"], "", "at least 8 hex digits"),
        (["remove-token", "00000000"], "", "no token hash starts with 00000000"),
    ],
)
def test_refusals_change_nothing(
    sm: Any,
    arn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    stdin: str,
    message: str,
) -> None:
    before = sm.get_secret_value(SecretId=NAME)

    code, _, err = run(
        ["secret", argv[0], "--secret-id", NAME, *argv[1:]], stdin, monkeypatch, capsys
    )

    assert code == 1
    assert message in err
    after = sm.get_secret_value(SecretId=NAME)
    assert (after["VersionId"], after["SecretString"]) == (
        before["VersionId"],
        before["SecretString"],
    )


def test_a_secret_that_is_not_a_json_object_is_never_overwritten(
    sm: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sm.create_secret(Name=NAME, SecretString="gsk_plain-text")

    code, _, err = run(
        ["secret", "set", "--secret-id", NAME, "GROQ_API_KEY"], "x", monkeypatch, capsys
    )

    assert code == 1
    assert "does not hold a JSON object" in err
    assert "gsk_plain" not in err
    assert sm.get_secret_value(SecretId=NAME)["SecretString"] == "gsk_plain-text"


def test_a_missing_secret_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["secret", "list", "--secret-id", "nope/agentloop"], "", monkeypatch, capsys)

    assert code == 1
    assert "'nope/agentloop'" in err
    assert "ResourceNotFoundException" in err


# ---- a write never overwrites someone else's ------------------------------------------------


def test_a_write_after_someone_elses_is_refused(sm: Any, arn: str) -> None:
    client = SecretClient(NAME, sm)
    read = client.read()
    theirs = {**read.entries, "OPENAI_API_KEY": "sk-theirs"}
    sm.put_secret_value(SecretId=NAME, SecretString=json.dumps(theirs))  # e.g. the console

    with pytest.raises(SecretChanged, match="run the command again"):
        client.write(read, with_entry(read.entries, "GROQ_API_KEY", "gsk_mine"))

    assert stored(sm) == theirs
    again = client.read()  # the rerun the message asks for
    client.write(again, with_entry(again.entries, "GROQ_API_KEY", "gsk_mine"))
    assert stored(sm) == {**theirs, "GROQ_API_KEY": "gsk_mine"}


def test_two_commands_that_read_the_same_version_cannot_both_write(sm: Any, arn: str) -> None:
    """The interleaving the current-version check cannot see: both checked, then both put."""
    first, second = SecretClient(NAME, sm), SecretClient(NAME, sm)
    read_1, read_2 = first.read(), second.read()
    first.ensure_current(read_1)
    second.ensure_current(read_2)

    first.put(read_1, with_entry(read_1.entries, "GROQ_API_KEY", "gsk_first"))
    with pytest.raises(SecretChanged):
        second.put(read_2, with_entry(read_2.entries, "OPENAI_API_KEY", "sk-second"))

    assert stored(sm)["GROQ_API_KEY"] == "gsk_first"
    assert stored(sm)["OPENAI_API_KEY"] == ""


# ---- tokens ----------------------------------------------------------------------------------


def test_add_token_stores_the_hash_of_the_token_it_prints(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = documented("add-token")
    assert {doc for doc, _ in commands} == {"README.md", "docs/deploy.md"}
    code, out, err = run(commands[0][1], "", monkeypatch, capsys)

    assert code == 0, err
    labelled = dict(line.split(":", 1) for line in out.splitlines())
    token, digest = labelled["token"].strip(), labelled["sha256"].strip()
    assert digest == hash_token(token)
    assert labelled["id"].strip() == digest[:8]
    assert stored(sm)["auth_token_sha256"] == [OLD_HASH, digest]
    assert stored(sm)["AGENTLOOP_SIGNING_KEY"] == SIGNING_KEY
    assert "not shown again" in err
    # what the deployed function does with it: the printed token is accepted, a made-up one not
    auth = BearerAuth(token_hashes_from_secret(NAME, max_age_s=0))
    assert auth.check(f"Bearer {token}") == digest[:8]
    with pytest.raises(AuthError):
        auth.check("Bearer al_made-up")


def test_remove_token_by_its_id_keeps_the_others(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["secret", "add-token", "--secret-id", NAME], "", monkeypatch, capsys)
    new_hash = stored(sm)["auth_token_sha256"][1]

    code, out, _ = run(
        ["secret", "remove-token", "--secret-id", NAME, OLD_HASH[:8]], "", monkeypatch, capsys
    )

    assert code == 0
    assert f"token {OLD_HASH[:8]} removed" in out
    assert "(1 left)" in out
    assert stored(sm)["auth_token_sha256"] == [new_hash]
    assert stored(sm)["AGENTLOOP_SIGNING_KEY"] == SIGNING_KEY


def test_list_shows_names_and_token_ids_never_values(
    sm: Any, arn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["secret", "list", "--secret-id", NAME], "", monkeypatch, capsys)

    assert code == 0
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines()[1:]}
    assert rows == {
        "AGENTLOOP_SIGNING_KEY": "set",
        "GROQ_API_KEY": "set",
        "OPENAI_API_KEY": "empty",
        "auth_token_sha256": f"1 token hash(es): {OLD_HASH[:8]}",
    }
    assert SIGNING_KEY not in out
    assert "gsk_old" not in out
    assert OLD_HASH not in out


def test_the_token_helper_labels_what_it_prints() -> None:
    """``python -m agentloop token``: the one helper both docs give, run as they run it."""
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "token"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    labelled = dict(line.split(":", 1) for line in done.stdout.splitlines())
    assert set(labelled) == {"token", "sha256", "id"}
    assert hash_token(labelled["token"].strip()) == labelled["sha256"].strip()
    assert "AGENTLOOP_AUTH_TOKEN_SHA256" in done.stderr


# ---- the changes themselves ------------------------------------------------------------------


def test_changes_keep_unknown_entries_and_the_string_form_of_hashes() -> None:
    entries = {"X": {"nested": 1}, "auth_token_sha256": f"{OLD_HASH}, {'ab' * 32}"}

    assert with_entry(entries, "GROQ_API_KEY", "g") == {**entries, "GROQ_API_KEY": "g"}
    assert without_entry({**entries, "GROQ_API_KEY": "g"}, "GROQ_API_KEY") == entries
    kept, removed = without_token(entries, "abababab")
    assert removed == "ab" * 32
    assert kept == {"X": {"nested": 1}, "auth_token_sha256": [OLD_HASH]}
    with pytest.raises(SecretCommandError, match="2 token hashes start with"):
        without_token({"auth_token_sha256": ["ab" * 32, "ab" * 31 + "cd"]}, "abababab")
