"""The JSON Schema of a tool's arguments as the model is sent it: pydantic's, less its titles."""

from __future__ import annotations

from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import CoreSchema


class UntitledJsonSchema(GenerateJsonSchema):
    """No ``title`` on the fields (pydantic makes one from each name): every call's prompt
    carries the tools' schemas, and a title only repeats the property's name."""

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        return False
