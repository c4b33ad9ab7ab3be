"""``template.yaml`` as data, for the tests that check what it deploys."""

from __future__ import annotations

from typing import Any

import yaml

from tests.helpers import ROOT


class CloudFormationLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags read as their long form (``!Ref x`` -> Ref)."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CloudFormationLoader.add_multi_constructor("!", _intrinsic)


def load_template() -> dict[str, Any]:
    """The project's ``template.yaml`` (a SafeLoader subclass: plain data only)."""
    loaded: dict[str, Any] = yaml.load(
        (ROOT / "template.yaml").read_text(), Loader=CloudFormationLoader
    )
    return loaded
