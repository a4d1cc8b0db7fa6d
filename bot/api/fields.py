"""The field types of /api/v1 requests: the closed sets, the bounds and the text rules.

Each is stated twice from one place: as a validator (a value past it is a 422 naming the field,
before any row is read or written) and in the JSON schema the OpenAPI document shows. Where our
validator's sentence says more than a schema keyword's would (NUL in text, a blank prompt, an
override of a genesis that cannot have one), the keyword is only documented (`Documented`) and
the validator enforces it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from fastapi import Path
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from bot.triggers.spec import NAME, TEMPLATE_CHARS
from scheduler import bounds
from scheduler.front import TOP_UP_RANGES, validate_overrides
from templates import error_text

ClassChoice = Literal["priority", "spot", "default"]
GenesisName = Literal["command", "slack", "github_issue", "github_label", "schedule", "ao_event", "api", "unknown"]
TriggerKind = Literal["slack", "github_issue", "github_label", "schedule", "ao_event"]
Place = Literal["top_of_spot"]
StatusName = Literal["waiting", "running", "needs_input", "done", "failed", "blocked", "archived"]
# Checked by `scheduler.rules.genesis.validate_overrides`, whose refusal says why the others cannot be.
OverridableGenesis = Literal["command", "api", "unknown"]


class Request(BaseModel):
    """A request body. Strict: `0` is not false and `"5"` is not 5, as the document's types say;
    but 5.0 is the whole number 5 in a field that takes whole numbers, as JSON Schema has it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {key: whole(value) if key in _whole_number_fields(cls) else value for key, value in data.items()}


@cache
def _whole_number_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of `model` that take an int and no float (int, int | None, Annotated alike)."""
    return frozenset(name for name, info in model.model_fields.items() if _base_types(info.annotation) & {int} and
                     not _base_types(info.annotation) & {float})


def _base_types(annotation: Any) -> set[Any]:
    if get_origin(annotation) is Annotated:
        return _base_types(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return {base for arg in get_args(annotation) for base in _base_types(arg)}
    return {annotation}


class Change(Request):
    """A PATCH body: at least one field, or it is a 422 saying which fields there are."""

    @model_validator(mode="before")
    @classmethod
    def _not_empty(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data:
            raise PydanticCustomError(
                "nothing_to_change", error_text("api/nothing_to_change", fields=list(cls.model_fields))
            )
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        document = handler(schema)
        handler.resolve_ref_schema(document)["minProperties"] = 1
        return document


def never_null(*names: str) -> Callable[[dict[str, Any]], None]:
    """A model's `json_schema_extra` showing `names` without their null: optional, but a null
    there is refused by a check of the server's (declaring them `X | SkipJsonSchema[None]`
    would instead make pydantic name union members in its errors)."""

    def drop_null(schema: dict[str, Any]) -> None:
        for name in names:
            field = schema["properties"][name]
            kept = [option for option in field.pop("anyOf", []) if option != {"type": "null"}]
            if len(kept) == 1:
                field.update(kept[0])

    return drop_null


def exclusive(first: str, second: str) -> dict[str, Any]:
    """The schema of "not both `first` and `second`" (null counts as absent, as the server reads it)."""
    given = {"not": {"type": "null"}}
    return {"not": {"required": [first, second], "properties": {first: given, second: given}}}


# --------------------------------------------------------------------------- bounds
# The shared bounds (`scheduler.bounds`) as field types: a value past them is a 422 naming the
# field, before any row is read or written. Text rules are stated in the document as patterns
# (`Documented`) and checked by the validators, whose errors say more than a pattern's would.
# A lone surrogate cannot be sent as UTF-8 at all, so only NUL needs saying.
STORABLE = r"^[^\x00]*$"
NOT_BLANK = r"^[^\x00]*[^\x00\s][^\x00]*$"


class Documented:
    """Adds keywords (`pattern`, `enum`) to a field's JSON schema without pydantic enforcing
    them: a validator of ours does, with a sentence that says more."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        document = handler(schema)
        document.update(self.keywords)
        return document


def _storable(value: str) -> str:
    problem = bounds.text_problem(value)
    if problem is not None:
        raise PydanticCustomError("unstorable_text", problem)
    return value


def _not_blank(value: str) -> str:
    if bounds.is_blank(value):
        raise PydanticCustomError("blank_text", error_text("api/blank_text"))
    return value


def _storable_tree(value: dict[str, Any]) -> dict[str, Any]:
    problem = bounds.tree_problem(value)
    if problem is not None:
        raise PydanticCustomError("unstorable_json", problem)
    return value


def _overridable(value: dict[str, Any]) -> dict[str, Any]:
    # Every key, one whose value is null (remove) too, must be a genesis that can be overridden.
    # `validate_overrides` raises InvalidInput, which pydantic lets through: the API answers it
    # as the scheduler worded it, naming why slack or github sessions cannot be overridden.
    validate_overrides(value)
    return value


def whole(value: Any) -> Any:
    """JSON's 5.0 as the integer 5 (JSON Schema counts it an integer); anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Text = Annotated[str, AfterValidator(_storable), Documented(pattern=STORABLE)]
Prompt = Annotated[
    str, Field(min_length=1), AfterValidator(_storable), AfterValidator(_not_blank), Documented(pattern=NOT_BLANK)
]
TriggerName = Annotated[
    str, Field(min_length=1, max_length=100), AfterValidator(_storable), Documented(pattern=NAME.pattern)
]
Repository = Annotated[str, AfterValidator(_storable), Documented(pattern=bounds.REPOSITORY_PATTERN)]
Template = Annotated[
    str, Field(min_length=1, max_length=TEMPLATE_CHARS), AfterValidator(_storable), Documented(pattern=NOT_BLANK)
]
Overrides = Annotated[
    dict[Annotated[str, Documented(enum=list(get_args(OverridableGenesis)))], Literal["priority", "spot"] | None],
    AfterValidator(_overridable),
]
JsonObject = Annotated[
    dict[str, Any],
    AfterValidator(_storable_tree),
    Field(description=f"Keys and strings hold no NUL; numbers are finite; at most {bounds.MAX_DEPTH} levels deep"),
]
RowId = Annotated[int, Field(ge=1, le=bounds.MAX_ID)]
Precedence = Annotated[int, Field(ge=-bounds.MAX_PRECEDENCE, le=bounds.MAX_PRECEDENCE)]
Capacity = Annotated[int, Field(ge=1, le=bounds.MAX_CAPACITY)]
Multiplier = Annotated[float, Field(gt=0, le=bounds.MAX_MULTIPLIER, allow_inf_nan=False)]
CostCap = Annotated[float, Field(gt=0, le=bounds.MAX_COST_CAP_USD, allow_inf_nan=False)]
MaxSessions = Annotated[int, Field(ge=1, le=bounds.MAX_SESSIONS)]
TopUpCeiling = Annotated[int, Field(ge=TOP_UP_RANGES["top_up_ceiling"][0], le=TOP_UP_RANGES["top_up_ceiling"][1])]
TopUpStretch = Annotated[
    int, Field(ge=TOP_UP_RANGES["top_up_stretch_minutes"][0], le=TOP_UP_RANGES["top_up_stretch_minutes"][1])
]
TopUpCooldown = Annotated[
    int, Field(ge=TOP_UP_RANGES["top_up_cooldown_minutes"][0], le=TOP_UP_RANGES["top_up_cooldown_minutes"][1])
]
SessionId = Annotated[int, Path(ge=1, le=bounds.MAX_ID, description="A session id")]
TriggerId = Annotated[int, Path(ge=1, le=bounds.MAX_ID, description="A trigger id")]
