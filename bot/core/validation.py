"""Data from outside (a playbook file, an action's parameters) checked into the core's own
plain frozen dataclasses: the dataclass is the one model, and this is how data becomes one.

Why this exists: a value the core uses over and over (a playbook kept in the user's
cache, an action's parameters) should need nothing to be read back, yet data that
arrives from a file or a click must be checked field by field, with every problem
named. So the models are dataclasses, their rules are said where their fields are
(`dataclasses.field(metadata=...)` with pydantic's own keywords: `pattern`,
`min_length`, `ge`, `description`...; `Check` and `OneOf` in an `Annotated` type for
rules of the project's own; `__post_init__` for a rule across fields), and pydantic
builds the validator from them (a `TypeAdapter`, made and imported the first time a
kind is checked). A value read back from the cache is not checked again: it was
when its file was read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, Union

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter

T = TypeVar("T")

# Every model's config: a key the dataclass does not have is an error, not ignored.
STRICT: Mapping[str, Any] = {"extra": "forbid"}


class Check:
    """A rule of the project's own on one field, in its type:
    `Annotated[str, Check(compiles)]`. `rule` returns the value or raises `ValueError`
    saying what is wrong, which is reported at the field's place."""

    def __init__(self, rule: Callable[[Any], Any]) -> None:
        self.rule = rule

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        from pydantic import AfterValidator

        return handler(Annotated[source, AfterValidator(self.rule)])


class OneOf:
    """A union told apart by the key each member alone has (`{"fact": ...}` is a
    `FactGuard`), in its type: `Annotated[A | B, OneOf({"a": A, "b": B}, "...")]`.
    Data with none of the keys gets `message`, not every member's complaints."""

    def __init__(self, members: Mapping[str, type], message: str) -> None:
        self.members = dict(members)
        self.message = message

    def kind_of(self, value: Any) -> str | None:
        if isinstance(value, Mapping):
            return next((key for key in self.members if key in value), None)
        return next((key for key, kind in self.members.items() if type(value) is kind), None)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        from pydantic import Discriminator, Tag

        tagged = tuple(Annotated[kind, Tag(key)] for key, kind in self.members.items())
        discriminator = Discriminator(
            self.kind_of, custom_error_type="unknown_kind", custom_error_message=self.message
        )
        return handler(Annotated[Union[tagged], discriminator])  # noqa: UP007


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(kind: type) -> TypeAdapter[Any]:
    """The validator of `kind`, built once (pydantic is imported with the first)."""
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter


def validate(kind: type[T], data: object) -> T:
    """`data` (mappings, lists and plain values, as YAML or JSON give them) as a `kind`;
    pydantic's `ValidationError` (a `ValueError`) lists every problem with its place."""
    value: T = _adapter(kind).validate_python(data)
    return value


def json_schema(kind: type) -> dict[str, Any]:
    """The JSON Schema of `kind`'s data (for editors and the docs)."""
    return _adapter(kind).json_schema()
