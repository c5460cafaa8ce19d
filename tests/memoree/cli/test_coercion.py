"""The CLI's plain typer parameters convert without pydantic, as typer would convert them, and
parameters with ranges keep typer's own checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from typer.testing import CliRunner

from memoree.cli.coercion import install


def sample_app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def show(
        words: list[str] = typer.Argument(...),
        count: int = typer.Option(3, "--count"),
        ratio: float = typer.Option(0.5, "--ratio"),
        where: Optional[Path] = typer.Option(None, "--where"),
        seqs: Optional[list[int]] = typer.Option(None, "--seq"),
        loud: bool = typer.Option(False, "--loud", envvar="SAMPLE_LOUD"),
        bounded: int = typer.Option(1, "--bounded", min=1, max=9),
    ) -> None:
        typer.echo(json.dumps({"words": words, "count": count, "ratio": ratio, "where": str(where) if where else None,
                               "where_type": type(where).__name__, "seqs": seqs, "loud": loud, "bounded": bounded}))

    return app


def invoke(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    assert install()
    result = CliRunner().invoke(sample_app(), list(argv), env=env)
    if result.exit_code:  # the error box wraps its text: compare words
        return result.exit_code, " ".join(result.output.replace("│", " ").split())
    return result.exit_code, result.output


class TestLeanCoercion:
    def test_plain_values_convert_to_their_annotations(self) -> None:
        """Strings, ints, floats, paths, repeated ints and an env-var bool arrive typed."""
        code, output = invoke("a", "b", "--count", " 7 ", "--ratio", "2.5", "--where", "x/y", "--seq", "4", "--seq", "5",
                              env={"SAMPLE_LOUD": "yes"})
        assert (0, {"words": ["a", "b"], "count": 7, "ratio": 2.5, "where": "x/y", "where_type": "PosixPath",
                    "seqs": [4, 5], "loud": True, "bounded": 1}) == (code, json.loads(output))

    def test_defaults_pass_through(self) -> None:
        """Omitted options keep their defaults (None stays None)."""
        code, output = invoke("a")
        assert (0, None, None, 3) == (code, json.loads(output)["where"], json.loads(output)["seqs"],
                                      json.loads(output)["count"])

    def test_a_bad_number_is_a_usage_error_naming_the_option(self) -> None:
        """A value that is not an integer exits 2 with typer's 'Invalid value' message."""
        code, output = invoke("a", "--count", "1.5")
        assert 2 == code and "Invalid value for '--count'" in output and "'1.5' is not a valid integer" in output

    def test_a_bad_boolean_word_is_refused(self) -> None:
        """An env-var bool that is no boolean word is a usage error, not False."""
        code, output = invoke("a", env={"SAMPLE_LOUD": "maybe"})
        assert 2 == code and "'maybe' is not a valid boolean" in output

    def test_ranged_options_keep_typer_checks(self) -> None:
        """An option with min/max is left to typer, which still refuses a value out of range."""
        assert 0 == invoke("a", "--bounded", "9")[0]
        assert 2 == invoke("a", "--bounded", "10")[0]

    def test_installing_twice_wraps_once(self) -> None:
        """install is idempotent: the second call reports success and keeps the same factory."""
        import typer.core

        assert install()
        factory = typer.core.build_runtime_param
        assert install() and factory is typer.core.build_runtime_param
