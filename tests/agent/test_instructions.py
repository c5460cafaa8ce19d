"""Agent instructions: generated from the protocol types and shipped unchanged as the skill file."""

from __future__ import annotations

import msgspec

from memoree.service import discovery
from memoree.protocol.ops import OPS

REGENERATE = "python -m memoree.service.discovery --write-skill"


class TestInstructions:
    def test_shipped_skill_equals_the_generated_instructions(self) -> None:
        """memoree/skill/SKILL.md is exactly the generated skill text (regenerate with the documented command)."""
        shipped = discovery.SKILL_PATH.read_text("utf-8")
        assert discovery.skill_markdown() == shipped, f"SKILL.md is stale; run: {REGENERATE}"
        assert shipped.startswith("---\nname: memoree\n")

    def test_every_registered_op_is_listed_with_its_required_fields(self) -> None:
        """Each op in the registry has a line naming its required input fields, taken from its type."""
        text = discovery.instructions("markdown")["content"]
        lines = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("- `") and "input:" in line}
        assert set(OPS) == set(lines)
        for name, spec in OPS.items():
            for field in msgspec.structs.fields(spec.input_type):
                assert f"`{field.encode_name}`" in lines[name], (name, field.name)

    def test_caller_side_commands_are_not_operations(self) -> None:
        """remember, checkpoint, pending and the importers never appear among capabilities' operations."""
        operations = {entry["operation"] for entry in discovery.capabilities()["operations"]}
        assert not operations & {"remember", "checkpoint", "pending", "import", "mcp", "compiler"}
        assert set(OPS) == operations
