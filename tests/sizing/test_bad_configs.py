"""Issue 23 part 8: configs gpuwatch must refuse by name (exit 2), never with a traceback,
a hang or a silent absurdity: deep nesting, an endless file, absurd sizes, and a reader
of `--json` that goes away."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.cli import main
from gpuwatch.cli.size import add_size_parser, run_size
from gpuwatch.cli.stdout import EXIT_BROKEN_PIPE
from gpuwatch.sizing.bounded_json import BoundedJsonError, nesting_depth, read_json
from gpuwatch.sizing.models import ModelCatalogEntry, builtin_model_entries
from gpuwatch.sizing.size_bounds import SIZE_BOUNDS

CONFIGS = Path(__file__).parent / "configs"
LLAMA_8B = CONFIGS / "llama-3.1-8b.json"


def size(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gpuwatch")
    add_size_parser(parser.add_subparsers(dest="command", required=True))
    code = run_size(parser.parse_args(["size", *argv]))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = size(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err  # one line, no traceback
    return err


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


# --- the bounded read -------------------------------------------------------------------


def test_nesting_depth_ignores_brackets_in_strings() -> None:
    assert nesting_depth(b'{"a": [1, {"b": "[[[{{{"}]}') == 3
    assert nesting_depth(b'"\\"[[["') == 0
    assert nesting_depth(b"1") == 0


def test_deep_nesting_is_refused_before_parsing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Python's parser raised RecursionError at about 1,000 levels."""
    path = tmp_path / "config.json"
    path.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    err = refused(capsys, "--config-json", str(path))
    assert "nested 100,001 levels deep, more than the 64" in err


def test_a_config_at_the_depth_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "nested.json"
    path.write_text("[" * 64 + "]" * 64)
    assert isinstance(read_json(path), list)
    path.write_text("[" * 65 + "]" * 65)
    with pytest.raises(BoundedJsonError, match="65 levels"):
        read_json(path)


def test_a_regular_file_over_the_cap_is_refused_from_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"pad": "x" * 2000}))
    with pytest.raises(BoundedJsonError, match="more than the 1,000 a config may have"):
        read_json(path, max_bytes=1000)
    assert isinstance(read_json(path, max_bytes=10_000), dict)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("{", "not JSON"),
        ('{"a": ' + "9" * 5000 + "}", "not JSON"),  # int() refuses 4,300+ digits: ValueError
    ],
)
def test_bad_json_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    assert message in refused(capsys, "--config-json", str(path))


def test_not_utf8_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": "\xff"}')
    assert "not UTF-8" in refused(capsys, "--config-json", str(path))


def test_a_directory_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "is a directory" in refused(capsys, "--config-json", str(tmp_path))


def test_a_fifo_without_a_writer_reads_as_empty(tmp_path: Path) -> None:
    """Opened non-blocking: no wait for a writer that never comes."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BoundedJsonError, match="empty"):
        read_json(fifo)


def test_dev_zero_is_refused_quickly() -> None:
    """`--config-json /dev/zero` read until memory ran out; now 16 MiB and one byte."""
    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "size", "--config-json", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_env(),
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "gpuwatch size: --config-json /dev/zero: more than the 16,777,216 bytes a config may have\n"
    )


# --- absurd sizes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("hidden_size", 10**30, "hidden_size 1,000,000,000,000,000,000,000,000,000,000 is above"),
        ("num_hidden_layers", 10**18, "num_hidden_layers (layers) 1,000,000,000,000,000,000"),
        ("vocab_size", 2**23, "vocab_size 8,388,608 is above 4,194,304"),
        ("intermediate_size", 2**21, "intermediate_size 2,097,152 is above 1,048,576"),
    ],
)
def test_absurd_sizes_in_a_config_json_are_refused_by_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, value: int, message: str
) -> None:
    """Before: hidden_size 1e30 printed 1.4e59 parameters; num_hidden_layers 1e18 passed."""
    config = json.loads(LLAMA_8B.read_text())
    config[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    err = refused(capsys, "--config-json", str(path))
    assert message in err
    assert "largest published" in err


def test_a_huge_layer_count_with_a_window_pattern_is_refused_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Gemma's per-layer attention list would have had 1e18 entries: the key is checked
    on the raw JSON before anything is built from it."""
    config = json.loads((CONFIGS / "gemma-3-27b.json").read_text())
    config["text_config"]["num_hidden_layers"] = 10**18
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert "num_hidden_layers (layers)" in refused(capsys, "--config-json", str(path))


def test_sizes_that_multiply_past_the_parameter_bound_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each size within its bound, the product not: 1,024 layers of a 131,072-wide model."""
    config = json.loads(LLAMA_8B.read_text())
    config.update(num_hidden_layers=1024, hidden_size=131_072, intermediate_size=2**20)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert "parameters " in refused(capsys, "--config-json", str(path))


def test_a_catalog_entry_gets_the_same_bounds() -> None:
    entry = {"name": "m", "parameters": 7 * 10**9, "hidden_size": 4096, "attention_heads": 32}
    ModelCatalogEntry.model_validate({**entry, "layers": 1024})
    with pytest.raises(ValueError, match=r"layers 1,025 is above 1,024"):
        ModelCatalogEntry.model_validate({**entry, "layers": 1025})


def test_the_bounds_admit_every_built_in_model() -> None:
    """The bounds have margin over the catalog's largest models."""
    for entry in builtin_model_entries():
        for field, bound in SIZE_BOUNDS.items():
            value = getattr(entry, field)
            assert value is None or value * 4 <= bound.maximum, (entry.name, field)


def test_a_bare_count_gets_the_parameter_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--params: parameters" in refused(capsys, "--params", "1e30")
    code, _, _ = size(capsys, "--params", "10T", "--json")
    assert code == 0


# --- a reader that goes away ------------------------------------------------------------


def test_json_of_a_config_json_into_a_closing_pipe_ends_quietly() -> None:
    """`gpuwatch size --config-json ... --json | head -c 100`: exit 141 as a shell's
    SIGPIPE, no BrokenPipeError traceback. The pipe is shrunk to one page so the
    document (about 10 KB) cannot all be written before the reader closes."""
    with subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", "size", "--config-json", str(LLAMA_8B), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
        assert proc.stdout.read(100).startswith(b"{")
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == ""


def test_an_absurd_catalog_model_in_the_agent_config_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        "[[sizing.models]]\n"
        'name = "huge"\n'
        "parameters = 7000000000\n"
        "layers = 1000000000000000000\n"
        "hidden_size = 4096\n"
        "attention_heads = 32\n"
    )
    assert main(["size", "huge", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "sizing.models.0: layers 1,000,000,000,000,000,000 is above 1,024" in err
    assert "Traceback" not in err
