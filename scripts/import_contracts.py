"""import-linter contract types of pitcrew's own, for what the built-in ones cannot say.

Why this exists: the core may use the standard library and a short list of third-party
packages (regexes, YAML, templates, validation) and nothing else. A `forbidden` contract
names what is refused, so a dependency added tomorrow would pass it; this contract names
what is allowed, so it cannot. `make check` runs it with the others (`lint-imports`
finds this module from the repository root, the directory it runs in).
"""

from __future__ import annotations

import sys
from typing import Any

import grimp
from importlinter import Contract, ContractCheck, fields, output


class ThirdPartyAllowlistContract(Contract):
    """The source packages import the standard library, their own root package and the
    allowed third-party packages only.

    Options: `source_modules` (packages checked, with their descendants) and
    `allowed_modules` (top-level names of the third-party packages they may import).
    """

    type_name = "third_party_allowlist"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        allowed = {str(name) for name in self.allowed_modules}  # type: ignore[attr-defined]
        roots = {module.root_package_name for module in self.source_modules}  # type: ignore[attr-defined]
        refused: list[dict[str, Any]] = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            for importer in sorted({source.name, *graph.find_descendants(source.name)}):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    top = imported.split(".")[0]
                    if top in roots or top in sys.stdlib_module_names or top in allowed:
                        continue
                    details = graph.get_import_details(importer=importer, imported=imported)
                    lines = sorted(detail["line_number"] for detail in details)
                    refused.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not refused, metadata={"refused": refused})

    def render_broken_contract(self, check: ContractCheck) -> None:
        allowed = ", ".join(sorted(str(name) for name in self.allowed_modules))  # type: ignore[attr-defined]
        for item in check.metadata["refused"]:
            lines = ", ".join(f"l.{line}" for line in item["lines"])
            output.print_error(
                f"{item['importer']} imports {item['imported']}, which is neither the "
                f"standard library nor one of: {allowed} ({lines})",
                bold=False,
            )
            output.new_line()
