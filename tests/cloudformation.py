"""``template.yaml`` as data, for the tests that check what it deploys."""

from __future__ import annotations

import copy
import functools
import re
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
    """The project's ``template.yaml`` (a SafeLoader subclass: plain data only): a copy of
    its parse, which is made once per version of the file (parsing takes ~75 ms, and the
    DynamoDB tests read it for every table they make)."""
    text = (ROOT / "template.yaml").read_text()
    return copy.deepcopy(_parse(text))


@functools.lru_cache(maxsize=2)
def _parse(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load(text, Loader=CloudFormationLoader)
    return loaded


class Stack:
    """The template with parameter values: conditions and values as CloudFormation sees them
    (the few intrinsics the template uses, evaluated as CloudFormation does); ``physical``:
    what ``Ref`` gives for created resources and pseudo parameters."""

    def __init__(
        self, template: dict[str, Any], physical: dict[str, Any], **parameters: str
    ) -> None:
        self.template = template
        self.physical = physical
        defaults = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
        unknown = set(parameters) - set(defaults)
        assert not unknown, f"no such parameters: {unknown}"
        self.parameters = {**defaults, **parameters}

    def condition(self, name: str) -> bool:
        return bool(self.value(self.template["Conditions"][name]))

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.value(item) for item in node]
        if not isinstance(node, dict) or len(node) != 1:
            return node
        [(function, argument)] = node.items()
        if function == "Ref":
            if argument in self.parameters:
                return self.parameters[argument]
            assert argument in self.physical or argument in self.template["Resources"], argument
            return self.physical.get(argument, f"<{argument}>")
        if function == "Condition":
            return self.condition(argument)
        if function == "Fn::If":
            name, when_true, when_false = argument
            return self.value(when_true if self.condition(name) else when_false)
        if function == "Fn::Equals":
            left, right = self.value(argument)
            return left == right
        if function == "Fn::Not":
            return not self.value(argument[0])
        if function == "Fn::And":
            return all(self.value(argument))
        if function == "Fn::Sub":
            return re.sub(r"\$\{([^}]+)\}", lambda m: str(self.value({"Ref": m[1]})), argument)
        raise AssertionError(f"the test does not evaluate {function}")

    def created(self) -> set[str]:
        """The resources this stack would have."""
        return {
            name
            for name, resource in self.template["Resources"].items()
            if "Condition" not in resource or self.condition(resource["Condition"])
        }

    def chat_environment(self) -> dict[str, str]:
        """The chat function's variables, an empty value left out (the app reads it as unset)."""
        variables = self.template["Resources"]["ChatFunction"]["Properties"]["Environment"]
        resolved = {name: self.value(v) for name, v in variables["Variables"].items()}
        return {name: str(v) for name, v in resolved.items() if v not in ("", None)}

    def rule_failures(self) -> list[str]:
        """The descriptions of the template's rule assertions these parameters break."""
        failures = []
        for rule in self.template.get("Rules", {}).values():
            if "RuleCondition" in rule and not self.value(rule["RuleCondition"]):
                continue
            failures += [
                a["AssertDescription"] for a in rule["Assertions"] if not self.value(a["Assert"])
            ]
        return failures
