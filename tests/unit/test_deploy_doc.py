"""docs/deploy.md keeps step with what is deployed: template.yaml and the chat app's routes.

Each of its tables (resources, parameters with their defaults, outputs, routes) must name
exactly what the template and the app have, so adding, renaming or removing one without
updating the doc fails here, naming what differs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.routing import Route

import chat_app
from tests.cloudformation import load_template
from tests.helpers import ROOT

DOC = ROOT / "docs" / "deploy.md"
CODE = re.compile(r"`([^`]+)`")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def table_under(heading: str) -> list[list[str]]:
    """The body rows of the first table after ``heading`` (and before the next heading)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    assert heading in lines, f"docs/deploy.md has no heading {heading!r}"
    rows: list[list[str]] = []
    for line in lines[lines.index(heading) + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, f"no table under {heading!r}"
    return rows[2:]  # past the header and its --- line


def first_column(heading: str) -> list[str]:
    """The names in the first cells: every code span (one cell may name two)."""
    return [name for row in table_under(heading) for name in CODE.findall(row[0])]


def assert_same(documented: list[str], actual: set[str], what: str) -> None:
    assert len(documented) == len(set(documented)), f"{what} listed twice in docs/deploy.md"
    missing, stale = sorted(actual - set(documented)), sorted(set(documented) - actual)
    assert not missing, f"docs/deploy.md does not document these {what}: {missing}"
    assert not stale, f"docs/deploy.md documents {what} that do not exist: {stale}"


def test_every_resource_is_in_the_resource_table(template: dict[str, Any]) -> None:
    assert len(template["Resources"]) >= 27  # guards the guard: the template was read
    assert_same(first_column("## Resources"), set(template["Resources"]), "resources")


def test_every_parameter_is_in_the_parameter_table_with_its_default(
    template: dict[str, Any],
) -> None:
    parameters: dict[str, Any] = template["Parameters"]
    assert_same(first_column("### Parameters"), set(parameters), "parameters")
    for row in table_under("### Parameters"):
        name = CODE.findall(row[0])[0]
        default = str(parameters[name].get("Default", ""))
        expected = f"`{default}`" if default else "empty"
        assert row[1] == expected, f"{name}: the template's default is {expected}, not {row[1]}"


def test_every_output_is_in_the_output_table(template: dict[str, Any]) -> None:
    assert_same(first_column("### Outputs"), set(template["Outputs"]), "outputs")


def test_every_route_of_the_app_is_in_the_route_table() -> None:
    routes = {
        f"{method} {route.path}"
        for route in chat_app.app.routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"  # Starlette adds HEAD to every GET
    }
    assert {"POST /chat", "GET /healthz"} <= routes  # guards the guard
    assert_same(first_column("### Routes"), routes, "routes")


def test_the_parameter_groups_name_every_parameter(template: dict[str, Any]) -> None:
    """``sam deploy --guided`` and the console ask in these groups; the doc follows them."""
    interface = template["Metadata"]["AWS::CloudFormation::Interface"]
    grouped = [name for group in interface["ParameterGroups"] for name in group["Parameters"]]
    assert grouped == first_column("### Parameters")
