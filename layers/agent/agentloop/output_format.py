"""The final answer's required shape (a request's ``response_format``), told and checked.

The format is told to the model twice: as the provider's own ``response_format`` on every
call (providers that honour it constrain their output) and as a line of the system prompt
(providers that do not, and OpenAI's ``json_object``, which wants the word JSON in the
prompt). Either way the answer is checked here before the run ends: the loop gives the
model one chance to mend an answer that fails, then ends the run with an
``invalid_output`` error rather than hand a client text it cannot parse.

``jsonschema`` is imported on the first ``json_schema`` check only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentloop.models import ResponseFormat

MAX_SCHEMA_CHARS = 50_000
"""A schema is shown to the model in the system prompt: bounded like a message."""


class OutputFormatError(ValueError):
    """The response format cannot be used (a schema that is not a valid JSON Schema)."""


@dataclass(frozen=True)
class OutputFormat:
    """A ``json_object`` or ``json_schema`` response format, ready for the loop."""

    format: ResponseFormat

    @classmethod
    def of(cls, response_format: ResponseFormat | None) -> OutputFormat | None:
        """The format to enforce, or None for plain text; OutputFormatError for a bad schema."""
        if response_format is None or response_format.type == "text":
            return None
        output = cls(response_format)
        schema = output.schema
        if schema is not None:
            if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
                raise OutputFormatError(
                    f"the JSON Schema is over {MAX_SCHEMA_CHARS} characters long"
                )
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                raise OutputFormatError(f"not a valid JSON Schema: {exc.message}") from exc
        return output

    @property
    def schema(self) -> dict[str, Any] | None:
        spec = self.format.json_schema
        return spec.schema_ if spec is not None else None

    def wire(self) -> dict[str, Any]:
        """The provider's ``response_format`` field."""
        return self.format.model_dump(by_alias=True, exclude_none=True)

    def instruction(self) -> str:
        """The system prompt's line saying what the final answer must be."""
        if self.schema is None:
            return (
                "Your final answer must be one JSON object and nothing else: no prose, "
                "no code fences."
            )
        return (
            "Your final answer must be one JSON value and nothing else (no prose, no code "
            "fences) that matches this JSON Schema:\n" + json.dumps(self.schema, ensure_ascii=False)
        )

    def problem(self, text: str) -> str | None:
        """Why ``text`` is not an acceptable answer, or None when it is."""
        try:
            value = json.loads(text)
        except ValueError as exc:
            return f"the answer is not valid JSON ({exc})"
        schema = self.schema
        if schema is None:
            return None if isinstance(value, dict) else "the answer is not a JSON object"
        from jsonschema import Draft202012Validator

        error = next(iter(Draft202012Validator(schema).iter_errors(value)), None)
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "the top level"
        return f"the answer does not match the schema at {where}: {error.message}"[:1000]
