"""gpuwatch.status.names on literals."""

from __future__ import annotations

import pytest

from gpuwatch.core.text import flatten as terminal_safe
from gpuwatch.status.names import short_gpu_name, short_process_name


@pytest.mark.parametrize(
    ("command", "short"),
    [
        ("python3 train.py --config configs/llama3-8b-sft.yaml", "train.py"),
        ("/opt/conda/bin/python -m ipykernel_launcher -f /root/kernel.json", "ipykernel_launcher"),
        (
            "python3 -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B",
            "vllm…api_server",
        ),
        ("python -mtorch.distributed.run --nproc-per-node 8 t.py", "torch.distributed.run"),
        ("python -m deepspeed.launcher.launcher_helper --x 1", "deepspeed…launcher_helper"),
        ("python3.11 -u -X dev /srv/app/serve.py", "serve.py"),
        ("python3 -c 'import torch'", "python3"),
        ("python3", "python3"),
        ("tritonserver --model-repository=/models", "tritonserver"),
        ("/usr/lib/xorg/Xorg", "Xorg"),
        ("/usr/bin/python3", "python3"),
        ("bash /opt/run.sh --fast", "run.sh"),
        ("", "?"),
        ("   ", "?"),
        ("/", "/"),
    ],
)
def test_short_process_name(command: str, short: str) -> None:
    assert short_process_name(command) == short


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain name", "plain name"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("title\x1b]0;pwned\x07", "title\\x1b]0;pwned\\x07"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("bidi \u202eevil", "bidi \\u202eevil"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("tab\there", "tab\\there"),
        ("line\u2028sep", "line\\u2028sep"),
        ("bad \udcff byte", "bad \\udcff byte"),
        ("Ünïcödé ✓ 日本", "Ünïcödé ✓ 日本"),
        ("[bold]markup[/bold] :smile:", "[bold]markup[/bold] :smile:"),
    ],
)
def test_terminal_safe_makes_control_characters_visible(text: str, shown: str) -> None:
    assert terminal_safe(text) == shown


def test_short_gpu_name() -> None:
    assert short_gpu_name("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"
    assert short_gpu_name("NVIDIA GeForce RTX 4090") == "GeForce RTX 4090"
    assert short_gpu_name("Tesla V100") == "Tesla V100"
    assert short_gpu_name("") == "?"
