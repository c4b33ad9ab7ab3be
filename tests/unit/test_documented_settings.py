"""Every ``AGENTLOOP_*`` variable the code reads is documented where an operator looks for it.

A setting nobody can find is a setting nobody can use (or turn off). Names come from the
source (literal ``AGENTLOOP_...`` strings) and from the settings models whose ``from_env``
builds names from field names; each must appear in README.md's configuration table or in the
docs it links for that area (docs/tools.md for tools and the sandbox, docs/deploy.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from agentloop.config import AgentConfig
from agentloop.sandbox.models import SandboxLimits
from agentloop.sandbox.settings import ENV_PREFIX as SANDBOX_PREFIX
from agentloop.sandbox.settings import SandboxSettings
from agentloop.tools.scrape import ScrapeSettings

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "layers" / "agent" / "agentloop", ROOT / "functions")
DOCS = (ROOT / "README.md", ROOT / "docs" / "tools.md", ROOT / "docs" / "deploy.md")
NAME = re.compile(r"AGENTLOOP_[A-Z0-9_]+")
# The docs shorten a pair: "`AGENTLOOP_MAX_ITERATIONS` / `_CAP`" (appended) and
# "`AGENTLOOP_SANDBOX_HOST_CLEANUP`, `_HOST_OWN_UID`" (replacing the first name's tail).
SHORTHAND = re.compile(r"`(AGENTLOOP_[A-Z0-9_]+)`\s*[/,]\s*`(_[A-Z0-9_]+)`")


def names_in_source() -> set[str]:
    """Literal names in the code; a bare prefix (``AGENTLOOP_SANDBOX_``) is not a variable."""
    found: set[str] = set()
    for root in SOURCES:
        for path in root.rglob("*"):
            if path.suffix in (".py", ".sh") and "egg-info" not in str(path):
                found.update(NAME.findall(path.read_text(encoding="utf-8")))
    return {name for name in found if not name.endswith("_")}


def names_from_models() -> set[str]:
    """The names ``from_env`` builds from field names (``AGENTLOOP_<PREFIX><FIELD>``)."""
    names = {f"AGENTLOOP_{field.upper()}" for field in AgentConfig.model_fields}
    sandbox_fields = [f for f in SandboxSettings.model_fields if f != "limits"]
    names |= {
        f"{SANDBOX_PREFIX}{f.upper()}" for f in [*sandbox_fields, *SandboxLimits.model_fields]
    }
    scrape_fields = [f for f in ScrapeSettings.model_fields if f != "allow_loopback"]
    names |= {f"AGENTLOOP_SCRAPE_{f.upper()}" for f in scrape_fields}
    return names


def documented_names(text: str) -> set[str]:
    names = set(NAME.findall(text))
    for first, suffix in SHORTHAND.findall(text):
        names.add(first + suffix)
        parts = first.split("_")
        # AGENTLOOP_<AREA>_ stays: a shorthand never replaces the area.
        names.update("_".join(parts[:keep]) + suffix for keep in range(2, len(parts)))
    return names


def readme_configuration_table() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def test_the_scans_find_what_they_should() -> None:
    """Guards the guard: a broken pattern or path would make the main test pass vacuously."""
    source = names_in_source()
    assert {"AGENTLOOP_METRICS", "AGENTLOOP_SECRET_ID", "AGENTLOOP_DUCKDUCKGO_URL"} <= source
    assert {"AGENTLOOP_MAX_ITERATIONS_CAP", "AGENTLOOP_SANDBOX_MEMORY_MB"} <= names_from_models()
    assert "AGENTLOOP_MAX_ITERATIONS_CAP" in documented_names(readme_configuration_table())


def test_every_setting_is_documented() -> None:
    documented: set[str] = set()
    for doc in DOCS:
        documented |= documented_names(doc.read_text(encoding="utf-8"))
    missing = sorted((names_in_source() | names_from_models()) - documented)
    assert not missing, (
        f"add these to README.md's configuration table (or the linked docs): {missing}"
    )


def test_the_chat_apps_own_settings_are_in_the_readme_table() -> None:
    """What the app's ``AppSettings`` reads (directly, or through auth, secret_store,
    host_check and ``RequestLimits``) is server configuration: the README's table says it all."""
    package = ROOT / "layers" / "agent" / "agentloop"
    app_names = {
        "AGENTLOOP_BODY_TIMEOUT_S",
        "AGENTLOOP_DUCKDUCKGO_URL",
    }  # the issue names the latter
    for module in ("app_settings", "auth", "secret_store", "host_check"):
        text = (package / f"{module}.py").read_text(encoding="utf-8")
        app_names |= {name for name in NAME.findall(text) if not name.endswith("_")}
    assert "AGENTLOOP_METRICS" in app_names
    missing = sorted(app_names - documented_names(readme_configuration_table()))
    assert not missing, f"add these to README.md's configuration table: {missing}"
