"""String patterns for pydantic fields, checked with Python's ``re`` instead of pydantic's own.

``Field(pattern=...)`` compiles with pydantic-core's Rust regex engine, and the first pattern a
process compiles costs it about 0.3 MB for as long as it lives (``make bench``'s memory figure);
Python's ``re`` is loaded anyway. ``Annotated[str, Pattern(r"^...$")]`` checks the same thing
with it, fails with pydantic's own error (``string_pattern_mismatch``, "String should match
pattern ..."), and states the pattern in the JSON Schema as ``pattern=`` would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema


@dataclass(frozen=True)
class Pattern:
    """A regular expression a string must match somewhere (anchor it with ``^`` and ``$``)."""

    regex: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        # In Python's re a final "$" also matches before a final newline; in the JSON Schema's
        # (and pydantic's) dialect it does not: "\Z" is the same rule in Python's.
        ends = self.regex.endswith("$") and not self.regex.endswith("\\$")
        compiled = re.compile(self.regex[:-1] + r"\Z" if ends else self.regex)

        def check(value: str) -> str:
            if compiled.search(value) is None:
                raise PydanticCustomError(
                    "string_pattern_mismatch",
                    "String should match pattern '{pattern}'",
                    {"pattern": self.regex},
                )
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        stated = handler(schema)
        stated["pattern"] = self.regex
        return stated
