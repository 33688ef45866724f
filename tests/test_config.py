"""gpuwatch.config: TOML files, GPUWATCH_<SECTION>__<KEY> overrides, validation, rendering.

Every invalid case is one fixture under tests/configs/invalid/ (a TOML file) or
tests/configs/invalid/env/ (variables, and the file they apply to) whose `# expect:` lines
are the errors it must give: dotted path, a fragment of the reason, and the file or
variable blamed; `# expect-on-host:` lines are the errors only the host checks find.
Environment overrides are passed as `environ=`; only the command-line tests read
os.environ, with the GPUWATCH_ variables removed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import typing
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from pydantic import BaseModel

from gpuwatch.cli import main
from gpuwatch.cli.host_checks import check_config
from gpuwatch.config import (
    DEFAULT_PORT,
    AgentConfig,
    Config,
    ConfigError,
    ExporterConfig,
    LoggingConfig,
    apply_env_overrides,
    config_warnings,
    load_config,
    render_config,
)
from gpuwatch.core.values import parse_listen_address
from gpuwatch.tokens import TokenSourceConfig

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
VALID_DIR = TESTS / "configs" / "valid"
INVALID_DIR = TESTS / "configs" / "invalid"
EXAMPLE = REPO_ROOT / "config.example.toml"

ENV_DIR = INVALID_DIR / "env"
FILE = "<file>"
"""In an expectation, the config file's own path (its errors, or the blamed source)."""


@dataclass(frozen=True)
class Expected:
    """One `# expect:` line of a fixture: an error line that must be reported."""

    path: str
    fragment: str
    source: str | None
    on_host: bool  # reported only by the host checks (`check-config`, `run`)

    def matches(self, line: str) -> bool:
        return (
            line.startswith(f"{self.path}: ")
            and self.fragment in line
            and (self.source is None or line.endswith(f" [{self.source}]"))
        )


@dataclass(frozen=True)
class Case:
    """One invalid fixture: a config file and/or environment variables, and its errors."""

    name: str
    file: Path | None
    environ: dict[str, str]
    expected: tuple[Expected, ...]


_EXPECT = re.compile(r"^# expect(?P<host>-on-host)?: (?P<path>\S*): (?P<rest>.*)$")


def _expectations(text: str, file: Path | None) -> tuple[Expected, ...]:
    found = []
    for line in text.splitlines():
        match = _EXPECT.match(line)
        if match is None:
            continue
        rest, source = match["rest"], None
        tail = re.search(r" \[([^\]]+)\]$", rest)
        if tail:
            rest, source = rest[: tail.start()], tail.group(1)
        path = match["path"]
        if file is not None:
            path = path.replace(FILE, str(file))
            source = None if source is None else source.replace(FILE, str(file))
        found.append(Expected(path, rest, source, match["host"] is not None))
    return tuple(found)


def _file_case(path: Path) -> Case:
    expected = _expectations(path.read_text(encoding="utf-8"), path)
    # a field error of a file is blamed on the file
    expected = tuple(
        e if e.source is not None or e.path == str(path) else replace(e, source=str(path))
        for e in expected
    )
    return Case(path.name, path, {}, expected)


def _env_case(path: Path) -> Case:
    text = path.read_text(encoding="utf-8")
    file_line = re.search(r"^# file: (\S+)$", text, flags=re.MULTILINE)
    file = (path.parent / file_line.group(1)).resolve() if file_line else None
    environ = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    return Case(f"env/{path.name}", file, environ, _expectations(text, file))


INVALID_FILES = sorted(INVALID_DIR.glob("*.toml"))
CASES = [
    *(_file_case(p) for p in INVALID_FILES),
    *(_env_case(p) for p in sorted(ENV_DIR.glob("*.env"))),
]
VALID_FILES = sorted(VALID_DIR.glob("*.toml"))


def _load_errors(path: Path | None, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={} if environ is None else environ)
    errors = info.value.errors
    assert errors, "a ConfigError must carry at least one error line"
    assert str(info.value) == "\n".join(errors)
    return errors


def _starts_with_path(line: str, path: str) -> bool:
    return line.startswith(f"{path}: ")


# --- fixture files ---------------------------------------------------------------------


def test_the_corpus_is_large_and_every_fixture_expects_something() -> None:
    assert len(CASES) >= 60, len(CASES)
    assert len([c for c in CASES if c.environ]) >= 15
    for case in CASES:
        assert case.expected, f"{case.name} has no `# expect:` line"


def test_there_are_valid_fixtures() -> None:
    assert len(VALID_FILES) >= 3


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda p: p.name)
def test_valid_file_loads(path: Path) -> None:
    config = load_config(path, environ={})
    assert isinstance(config, Config)


def _unmatched(expected: tuple[Expected, ...], errors: list[str]) -> list[Expected]:
    return [e for e in expected if not any(e.matches(line) for line in errors)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_invalid_fixture_reports_exactly_its_errors(case: Case) -> None:
    """Validation gives the fixture's field errors; the host checks add the others; every
    error is reported in one pass and nothing else is."""
    field_errors = [e for e in case.expected if not e.on_host]
    if field_errors:
        errors = _load_errors(case.file, case.environ)
        assert not _unmatched(tuple(field_errors), errors), errors
        assert len(errors) == len(field_errors), errors
    else:
        load_config(case.file, environ=case.environ)  # only the host sees what is wrong
    with pytest.raises(ConfigError) as info:
        check_config(case.file, environ=case.environ)
    errors = info.value.errors
    assert not _unmatched(case.expected, errors), errors
    assert len(errors) == len(case.expected), errors


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.file and not c.environ], ids=lambda c: c.name
)
def test_check_config_command_prints_every_error_and_exits_2(
    case: Case, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("GPUWATCH_"):
            monkeypatch.delenv(name)
    assert case.file is not None
    code = main(["check-config", str(case.file)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    with pytest.raises(ConfigError) as info:
        check_config(case.file, environ={}, default_history=True)
    assert err.splitlines() == [f"gpuwatch: {e}" for e in info.value.errors]
    assert "Traceback" not in err


def test_full_file_sets_every_value() -> None:
    config = load_config(VALID_DIR / "full.toml", environ={})
    assert config.agent.interval_seconds == 2.5
    assert config.agent.slow_interval_seconds == 30.0
    assert config.agent.state_dir == Path("/srv/gpuwatch/state")
    assert config.agent.hostname == "gpu-node-7"
    assert config.agent.per_process_metrics is True
    assert config.agent.nvml_retry_max_seconds == 120.0
    assert config.exporter.listen == "[::1]:19842"
    assert config.exporter.dcgm_compat is True
    assert config.exporter.tls_cert_file == Path("/etc/gpuwatch/tls.crt")
    assert config.exporter.tls_key_file == Path("/etc/gpuwatch/tls.key")
    assert config.exporter.basic_auth_username == "prometheus"
    assert config.exporter.basic_auth_password_file == Path("/etc/gpuwatch/metrics-password")
    assert config.logging.level == "debug"
    assert config.logging.format == "json"


def test_empty_file_and_no_file_give_defaults() -> None:
    assert load_config(VALID_DIR / "empty.toml", environ={}) == Config()
    assert load_config(None, environ={}) == Config()


def test_integers_are_accepted_for_floats() -> None:
    config = load_config(VALID_DIR / "integers_for_floats.toml", environ={})
    assert config.agent.interval_seconds == 5.0
    assert config.agent.slow_interval_seconds == 60.0


def test_partial_section_keeps_other_defaults() -> None:
    config = load_config(VALID_DIR / "minimal.toml", environ={})
    assert config.exporter.listen == "127.0.0.1:9842"
    assert config.exporter.dcgm_compat is False
    assert config.agent == AgentConfig()
    assert config.logging == LoggingConfig()


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    errors = _load_errors(missing)
    assert errors == [f"{missing}: no such file"]


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[agent]\nhostname = "caf\xe9"\n')
    assert _load_errors(path) == [f"{path}: not UTF-8 text"]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    errors = _load_errors(tmp_path)
    assert len(errors) == 1
    assert _starts_with_path(errors[0], str(tmp_path)), errors


def test_every_error_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "two_bad.toml"
    path.write_text(
        '[agent]\ninterval_seconds = 0\n[logging]\nlevel = "verbose"\n', encoding="utf-8"
    )
    errors = _load_errors(path)
    assert len(errors) == 2, errors
    assert any(_starts_with_path(e, "agent.interval_seconds") for e in errors), errors
    assert any(_starts_with_path(e, "logging.level") for e in errors), errors


def test_errors_from_file_and_environment_are_all_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[exporter]\nlisten = "nowhere"\nbogus = 1\n', encoding="utf-8")
    errors = _load_errors(path, {"GPUWATCH_AGENT__INTERVAL_SECONDS": "0"})
    assert len(errors) == 3, errors
    for expected in ("exporter.listen", "exporter.bogus", "agent.interval_seconds"):
        assert any(_starts_with_path(e, expected) for e in errors), (expected, errors)


def test_errors_from_an_env_override_name_the_variable() -> None:
    errors = _load_errors(None, {"GPUWATCH_LOGGING__LEVEL": "loud"})
    assert len(errors) == 1
    assert _starts_with_path(errors[0], "logging.level")
    assert errors[0].endswith("[GPUWATCH_LOGGING__LEVEL]")


# --- environment overrides -------------------------------------------------------------


def test_env_overrides_without_file() -> None:
    config = load_config(
        None,
        environ={
            "GPUWATCH_EXPORTER__LISTEN": "127.0.0.1:9000",
            "GPUWATCH_AGENT__INTERVAL_SECONDS": "5",
            "GPUWATCH_EXPORTER__DCGM_COMPAT": "true",
            "GPUWATCH_AGENT__HOSTNAME": "node-1",
            "GPUWATCH_AGENT__STATE_DIR": "/tmp/gpuwatch-state",
            "GPUWATCH_LOGGING__FORMAT": '"json"',
        },
    )
    assert config.exporter.listen == "127.0.0.1:9000"
    assert config.agent.interval_seconds == 5.0
    assert config.exporter.dcgm_compat is True
    assert config.agent.hostname == "node-1"
    assert config.agent.state_dir == Path("/tmp/gpuwatch-state")
    assert config.logging.format == "json"


def test_env_override_wins_over_file_and_keeps_other_file_values(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[exporter]\nlisten = "127.0.0.1:1111"\ndcgm_compat = true\n'
        "[agent]\ninterval_seconds = 2.0\n",
        encoding="utf-8",
    )
    config = load_config(
        path,
        environ={"GPUWATCH_EXPORTER__LISTEN": "127.0.0.1:2222", "GPUWATCH_AGENT__HOSTNAME": "h"},
    )
    assert config.exporter.listen == "127.0.0.1:2222"
    assert config.exporter.dcgm_compat is True
    assert config.agent.interval_seconds == 2.0
    assert config.agent.hostname == "h"


def test_env_override_names_are_case_insensitive_after_prefix() -> None:
    config = load_config(None, environ={"GPUWATCH_Logging__Level": "debug"})
    assert config.logging.level == "debug"


def test_env_override_completes_a_pair_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[exporter]\ntls_cert_file = "/c.pem"\n', encoding="utf-8")
    config = load_config(path, environ={"GPUWATCH_EXPORTER__TLS_KEY_FILE": "/k.pem"})
    assert config.exporter.tls_key_file == Path("/k.pem")


def test_variables_gpuwatch_reads_elsewhere_and_others_are_no_overrides() -> None:
    environ = {
        "GPUWATCH_SLACK_WEBHOOK_URL": "https://hooks.slack.example/services/T/B/X",
        "GPUWATCH_REPORT_PROMETHEUS_URL": "http://prometheus:9090",  # the chart's CronJob
        "OTHER__THING": "1",
        "EXPORTER__LISTEN": "nowhere",
        "gpuwatch_agent_interval_seconds": "abc",  # not the prefix: not gpuwatch's
    }
    assert load_config(None, environ=environ) == Config()
    assert apply_env_overrides({}, environ) == {}


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("GPUWATCH_AGENT_INTERVAL_SECONDS", "GPUWATCH_AGENT__INTERVAL_SECONDS"),
        ("GPUWATCH_LOGGING_LEVEL", "GPUWATCH_LOGGING__LEVEL"),
        ("GPUWATCH_ALERTS_SLACK_COOLDOWN_SECONDS", "GPUWATCH_ALERTS__SLACK__COOLDOWN_SECONDS"),
        ("GPUWATCH_SLACK_WEBHOOK", "GPUWATCH_SLACK_WEBHOOK_URL"),
        ("GPUWATCH_SLACK_WEBHOOK_URI", "GPUWATCH_SLACK_WEBHOOK_URL"),
        ("GPUWATCH_REPORT_PROMETHEUS", "GPUWATCH_REPORT_PROMETHEUS_URL"),
        ("GPUWATCH_CONFIG", None),
        ("GPUWATCH_", None),
    ],
)
def test_a_gpuwatch_variable_that_names_nothing_is_an_error(name: str, meant: str | None) -> None:
    errors = _load_errors(None, {name: "abc"})
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{name}: no such setting"), errors
    assert errors[0].endswith(f" [{name}]"), errors
    if meant is None:
        assert "did you mean" not in errors[0]
    else:
        assert f"did you mean {meant}?" in errors[0], errors


def test_kubernetes_service_link_variables_are_no_errors() -> None:
    """A Service called `gpuwatch` (the chart's, released as `gpuwatch`) or `gpuwatch-x`
    gives every pod of its namespace these variables (enableServiceLinks defaults on)."""
    environ: dict[str, str] = {}
    for service in ("GPUWATCH", "GPUWATCH_CANARY"):
        environ |= {
            f"{service}_SERVICE_HOST": "10.96.0.12",
            f"{service}_SERVICE_PORT": "9842",
            f"{service}_SERVICE_PORT_METRICS": "9842",
            f"{service}_PORT": "tcp://10.96.0.12:9842",
            f"{service}_PORT_9842_TCP": "tcp://10.96.0.12:9842",
            f"{service}_PORT_9842_TCP_PROTO": "tcp",
            f"{service}_PORT_9842_TCP_PORT": "9842",
            f"{service}_PORT_9842_TCP_ADDR": "10.96.0.12",
        }
    assert load_config(None, environ=environ) == Config()


@pytest.mark.parametrize("name", ["GPUWATCH_PORT", "GPUWATCH_EXPORTER_PORT"])
def test_a_port_variable_that_is_no_service_link_is_an_error(name: str) -> None:
    errors = _load_errors(None, {name: "9842"})
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"{name}: no such setting"), errors


def test_a_misspelt_override_option_names_the_real_one() -> None:
    errors = _load_errors(None, {"GPUWATCH_EXPORTER__LISTN": "127.0.0.1:9000"})
    assert "did you mean GPUWATCH_EXPORTER__LISTEN?" in errors[0], errors
    errors = _load_errors(None, {"GPUWATCH_AGENTS__HOSTNAME": "h"})
    assert "did you mean GPUWATCH_AGENT__HOSTNAME?" in errors[0], errors


@pytest.mark.parametrize("command", [["check-config", "--no-host-checks"], ["run", "--config"]])
def test_cli_exits_2_on_a_variable_that_names_nothing(
    command: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "gpuwatch.toml"
    path.write_text(f'[agent]\nstate_dir = "{tmp_path / "state"}"\n', encoding="utf-8")
    monkeypatch.setenv("GPUWATCH_AGENT_INTERVAL_SECONDS", "abc")
    monkeypatch.setenv("GPUWATCH_SLACK_WEBHOOK_URL", "https://hooks.slack.example/services/T/B/X")
    assert main([*command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "gpuwatch: GPUWATCH_AGENT_INTERVAL_SECONDS: no such setting (overrides are "
        "GPUWATCH_<SECTION>__<OPTION>, two underscores between the parts); did you mean "
        "GPUWATCH_AGENT__INTERVAL_SECONDS? [GPUWATCH_AGENT_INTERVAL_SECONDS]"
    ]
    assert "hooks.slack.example" not in err
    monkeypatch.delenv("GPUWATCH_AGENT_INTERVAL_SECONDS")
    monkeypatch.setenv("GPUWATCH_AGENT__INTERVAL_SECONDS", "abc")  # the intended one
    assert main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert "agent.interval_seconds: " in err
    assert err.rstrip().endswith("[GPUWATCH_AGENT__INTERVAL_SECONDS]")


def test_env_override_with_unknown_key_is_an_error_with_its_path() -> None:
    errors = _load_errors(None, {"GPUWATCH_EXPORTER__LISTN": "127.0.0.1:9000"})
    assert len(errors) == 1, errors
    assert _starts_with_path(errors[0], "exporter.listn"), errors
    assert "unknown option" in errors[0]


def test_env_override_with_unknown_section_is_an_error_with_its_path() -> None:
    errors = _load_errors(None, {"GPUWATCH_REPORTS__SLACK_CHANNEL": "#gpu"})
    assert len(errors) == 1, errors
    assert _starts_with_path(errors[0], "reports"), errors


def test_env_override_with_invalid_value_is_an_error_with_its_path() -> None:
    errors = _load_errors(None, {"GPUWATCH_EXPORTER__LISTEN": "0.0.0.0:70000"})
    assert len(errors) == 1, errors
    assert _starts_with_path(errors[0], "exporter.listen"), errors


def test_apply_env_overrides_values_are_text_unless_they_start_like_toml() -> None:
    merged = apply_env_overrides(
        {},
        {
            "GPUWATCH_A__INT": "3",
            "GPUWATCH_A__FLOAT": "2.5",
            "GPUWATCH_A__BOOL": "false",
            "GPUWATCH_A__QUOTED": '"hello"',
            "GPUWATCH_A__BARE": "hello world",
            "GPUWATCH_A__ADDR": "[::1]:9842",
            "GPUWATCH_A__EMPTY": "",
        },
    )
    assert merged == {  # pydantic turns "3", "2.5", "false" into what a field wants
        "a": {
            "int": "3",
            "float": "2.5",
            "bool": "false",
            "quoted": "hello",
            "bare": "hello world",
            "addr": "[::1]:9842",
            "empty": "",
        }
    }


def test_apply_env_overrides_does_not_mutate_its_input() -> None:
    data = {"exporter": {"listen": "127.0.0.1:1"}, "agent": {"nested": {"x": 1}}}
    snapshot = {"exporter": {"listen": "127.0.0.1:1"}, "agent": {"nested": {"x": 1}}}
    merged = apply_env_overrides(
        data,
        {
            "GPUWATCH_EXPORTER__LISTEN": "127.0.0.1:2",
            "GPUWATCH_AGENT__NESTED__Y": "2",
        },
    )
    assert data == snapshot
    assert merged == {
        "exporter": {"listen": "127.0.0.1:2"},
        "agent": {"nested": {"x": 1, "y": "2"}},
    }


# --- rendering -------------------------------------------------------------------------


def _round_trip(config: Config) -> Config:
    text = render_config(config)
    return Config.model_validate(tomllib.loads(text))


def test_render_round_trips_defaults() -> None:
    assert _round_trip(Config()) == Config()


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda p: p.name)
def test_render_round_trips_valid_files(path: Path, tmp_path: Path) -> None:
    config = load_config(path, environ={})
    assert _round_trip(config) == config
    rendered = tmp_path / "rendered.toml"
    rendered.write_text(render_config(config), encoding="utf-8")
    assert load_config(rendered, environ={}) == config


def test_render_round_trips_quotes_and_backslashes() -> None:
    config = Config(
        agent=AgentConfig(hostname='node "7" \\ east', state_dir=Path("/srv/dir with space"))
    )
    assert _round_trip(config) == config


def test_render_round_trips_a_newline_in_a_string_value() -> None:
    # A label value may legally contain a newline; check-config prints the
    # effective config, which must itself be valid TOML.
    source = TokenSourceConfig(
        name="vllm", url="http://127.0.0.1:8000/metrics", label_matchers={"model": "a\nb"}
    )
    config = Config(token_sources=[source])
    text = render_config(config)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(
            "BUG config.py _toml_value: control characters (newline) are not escaped, "
            f"so render_config produces invalid TOML: {exc}"
        )
    assert Config.model_validate(data) == config


def test_render_comments_out_unset_options() -> None:
    text = render_config(Config())
    assert "# hostname is not set" in text
    assert "# tls_cert_file is not set" in text
    assert not re.search(r"^hostname\s*=", text, flags=re.MULTILINE)
    assert set(tomllib.loads(text)) == set(Config.model_fields)


# --- listen addresses and the default port ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.0.0.0:9842", ("0.0.0.0", 9842)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:65535", ("localhost", 65535)),
        ("gpu-node-1.example.com:80", ("gpu-node-1.example.com", 80)),
        ("[::1]:9842", ("::1", 9842)),
        ("[::]:9842", ("::", 9842)),
        ("[fe80::1]:1", ("fe80::1", 1)),
        (":9842", ("0.0.0.0", 9842)),
    ],
)
def test_parse_listen_address(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen_address(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", "0.0.0.0", "host:", "host:http", "host:-1", "host:70000", "[::1]", "9842", "host: 80"],
)
def test_parse_listen_address_rejects(value: str) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|outside 0-65535"):
        parse_listen_address(value)


def test_default_port_clashes_with_no_other_gpu_exporter() -> None:
    assert DEFAULT_PORT not in {9400, 9835}  # dcgm-exporter, nvidia_gpu_exporter
    host, port = parse_listen_address(Config().exporter.listen)
    assert port == DEFAULT_PORT
    assert host == "0.0.0.0"


def test_sections_are_frozen() -> None:
    config = Config()
    with pytest.raises(ValueError, match="frozen"):
        config.exporter.listen = "127.0.0.1:1"
    assert ExporterConfig().listen == f"0.0.0.0:{DEFAULT_PORT}"


# --- the check-config command ----------------------------------------------------------


def test_check_config_reports_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two_bad.toml"
    path.write_text('[exporter]\nlisten = "x"\ndcgm_compat = "yes please"\n', encoding="utf-8")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert any(line.startswith("gpuwatch: exporter.listen: ") for line in err.splitlines()), err
    assert any(line.startswith("gpuwatch: exporter.dcgm_compat: ") for line in err.splitlines())


def test_check_config_missing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.toml"
    assert main(["check-config", str(missing)]) == 2
    assert capsys.readouterr().err == f"gpuwatch: {missing}: no such file\n"


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda p: p.name)
def test_check_config_valid_file_prints_effective_config(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --no-host-checks: full.toml names TLS files that exist on its host, not on this one
    code = main(["check-config", "--no-host-checks", str(path)])
    out, err = capsys.readouterr()
    assert code == 0
    warnings = config_warnings(load_config(path))  # full.toml: dcgm_naming = "4.9"
    assert err == "".join(f"gpuwatch: warning: {w}\n" for w in warnings)
    assert out == render_config(load_config(path))
    assert Config.model_validate(tomllib.loads(out)) == load_config(path)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is missing")
def test_check_config_passes_on_the_host_that_holds_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key, password = tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "password"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
            "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    password.write_text("s3cret\n", encoding="utf-8")
    path = tmp_path / "c.toml"
    path.write_text(
        f'[agent]\nstate_dir = "{tmp_path / "state"}"\n[billing]\npricing_api = true\n'
        f'[exporter]\nlisten = "[::1]:0"\ntls_cert_file = "{cert}"\ntls_key_file = "{key}"\n'
        f'basic_auth_username = "prometheus"\nbasic_auth_password_file = "{password}"\n',
        encoding="utf-8",
    )
    assert check_config(path, environ={}).exporter.listen == "[::1]:0"
    # the certificate and key must belong together
    other = tmp_path / "other.pem"
    other.write_text(cert.read_text(encoding="utf-8").replace("A", "B", 1), encoding="utf-8")
    path.write_text(path.read_text(encoding="utf-8").replace(str(cert), str(other)))
    with pytest.raises(ConfigError) as info:
        check_config(path, environ={})
    assert len(info.value.errors) == 1
    assert info.value.errors[0].startswith("exporter.tls_cert_file: cannot load")
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize("enabled", ["true", None])
def test_check_config_refuses_a_state_dir_the_history_cannot_use(
    enabled: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path under a regular file cannot be created, root or not. With the history on,
    asked for (`true`) or by default (unset), that is an error naming the field."""
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    path = tmp_path / "c.toml"
    history = "" if enabled is None else f"[history]\nenabled = {enabled}\n"
    path.write_text(
        f'[agent]\nstate_dir = "{blocker / "state"}"\n[exporter]\nlisten = "127.0.0.1:0"\n'
        + history,
        encoding="utf-8",
    )
    assert main(["check-config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"gpuwatch: agent.state_dir: {blocker} is not a directory (needed by ")
    assert "history store" in err
    assert len(err.splitlines()) == 1
    if enabled is None:
        assert "set it to false" in err
        check_config(path, environ={})  # `run` starts, without history (one INFO line)
    text = path.read_text(encoding="utf-8").replace(history, "")
    path.write_text(text + "[history]\nenabled = false\n", encoding="utf-8")
    assert main(["check-config", str(path)]) == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_check_config_refuses_a_read_only_state_dir_even_as_root(tmp_path: Path) -> None:
    """Root passes permission bits, not a read-only mount: a real one, in a private mount
    namespace (`unshare --mount`)."""
    state = tmp_path / "ro" / "state"
    state.mkdir(parents=True)
    path = tmp_path / "c.toml"
    path.write_text(
        f'[agent]\nstate_dir = "{state}"\n[exporter]\nlisten = "127.0.0.1:0"\n'
        "[history]\nenabled = true\n",
        encoding="utf-8",
    )
    ro = state.parent
    script = (
        f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && "
        f"{sys.executable} -m gpuwatch check-config {path}"
    )
    result = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "mount:" in result.stderr:
        pytest.skip(f"no private read-only mount here: {result.stderr.strip()}")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"gpuwatch: agent.state_dir: cannot write to {state}: read-only file system "
        f"(needed by the history store) [{path}]\n"
    )
    assert main(["check-config", str(path)]) == 0  # outside the namespace it is writable


def test_check_config_no_host_checks_skips_only_the_host(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tls_missing = INVALID_DIR / "tls_files_missing.toml"
    assert main(["check-config", "--no-host-checks", str(tls_missing)]) == 0
    capsys.readouterr()
    bad_listen = INVALID_DIR / "listen_ipv4_octet_over_255.toml"
    assert main(["check-config", "--no-host-checks", str(bad_listen)]) == 2


def test_run_rejects_what_check_config_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    path = INVALID_DIR / "every_section_at_once.toml"
    assert main(["run", "--config", str(path)]) == 2
    run_err = capsys.readouterr().err
    assert main(["check-config", str(path)]) == 2
    assert capsys.readouterr().err == run_err
    assert len(run_err.splitlines()) == 5


def test_run_blames_a_bad_listen_option_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--listen", "gpuwatch-no-such-host.invalid:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuwatch: exporter.listen: gpuwatch-no-such-host.invalid does not ")
    assert err.endswith("[--listen]\n")


def test_check_config_without_file_argument_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check-config"])
    assert info.value.code == 2
    assert "file" in capsys.readouterr().err


# --- config.example.toml ---------------------------------------------------------------


def _model_of(annotation: object) -> tuple[type[BaseModel] | None, bool]:
    """(model, is_list) for a field annotated with a model or a list of models."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args:
        inner = args[0]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner, True
    return None, False


def _section_models(
    model: type[BaseModel] = Config, prefix: str = ""
) -> dict[str, tuple[type[BaseModel], bool]]:
    """Every section path -> (its model, whether it is an array of tables)."""
    models: dict[str, tuple[type[BaseModel], bool]] = {}
    for name, field in model.model_fields.items():
        inner, is_list = _model_of(field.annotation)
        if inner is None:
            continue
        path = f"{prefix}{name}"
        models[path] = (inner, is_list)
        if not is_list:
            models.update(_section_models(inner, path + "."))
    return models


def _scalar_fields(model: type[BaseModel]) -> set[str]:
    return {n for n, f in model.model_fields.items() if _model_of(f.annotation)[0] is None}


def _documented_options(text: str) -> dict[str, set[str]]:
    """Keys shown in each section, set (`key = ...`) or commented out (`# key = ...`).

    Array-of-table sections are documented commented out: `# [[workloads]]`.
    """
    found: dict[str, set[str]] = defaultdict(set)
    section: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        header = re.fullmatch(r"#?\s*\[\[?([A-Za-z0-9_.]+)\]\]?", stripped)
        if header:
            section = header.group(1)
            found[section]
            continue
        option = re.match(r"#?\s*([a-z_][a-z0-9_]*)\s*=", stripped)
        if option and section is not None:
            found[section].add(option.group(1))
    return found


def test_example_config_exists() -> None:
    assert EXAMPLE.is_file(), f"{EXAMPLE} is missing"


def test_example_config_loads_and_shows_the_defaults() -> None:
    config = load_config(EXAMPLE, environ={})
    assert config == Config(), "config.example.toml should show every option at its default"


def test_example_config_documents_every_option() -> None:
    models = _section_models()
    assert {"agent", "exporter", "logging"} <= set(models)
    documented = _documented_options(EXAMPLE.read_text(encoding="utf-8"))
    assert set(documented) == set(models), "sections of config.example.toml != Config's"
    for section, (model, _) in models.items():
        fields = _scalar_fields(model)
        missing = fields - documented[section]
        assert not missing, f"[{section}] options missing from config.example.toml: {missing}"
        stale = documented[section] - fields
        assert not stale, f"[{section}] of config.example.toml shows unknown options: {stale}"


def test_example_config_commented_options_are_the_unset_ones() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    active = tomllib.loads(text)
    for section, (model, is_list) in _section_models().items():
        if is_list:
            assert section.split(".")[0] not in active or not _lookup(active, section), section
            continue
        defaults = model()
        table = _lookup(active, section)
        for key in _scalar_fields(model):
            if getattr(defaults, key) is None:
                assert key not in table, (section, key)
            else:
                assert key in table, f"[{section}] {key} is not set"


def _lookup(data: dict[str, object], path: str) -> dict[str, object]:
    for part in path.split("."):
        value = data.get(part, {})
        data = value if isinstance(value, dict) else {}
    return data


def test_env_override_keeps_number_like_strings_as_strings() -> None:
    config = load_config(None, environ={"GPUWATCH_AGENT__HOSTNAME": "1234"})
    assert config.agent.hostname == "1234"
    config = load_config(None, environ={"GPUWATCH_AGENT__INTERVAL_SECONDS": "2.5"})
    assert config.agent.interval_seconds == 2.5


def test_infinite_values_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "inf.toml"
    path.write_text("[analysis]\nresolve_after_seconds = inf\n")
    errors = _load_errors(path, {})
    assert any(_starts_with_path(e, "analysis.resolve_after_seconds") for e in errors)


# --- every commented example of config.example.toml is valid ---------------------------

_COMMENTED_HEADER = re.compile(r"^# (\[\[?[a-z_.]+\]\]?)\s*$")
_COMMENTED_OPTION = re.compile(r"^# [a-z_][a-z0-9_]* = ")
_HEADER = re.compile(r"^\[\[?[a-z_.]+\]\]?\s*$")


def _commented_examples(lines: list[str]) -> list[tuple[int, list[int]]]:
    """(line of the commented header it belongs to, or -1; its option lines) per example:
    a run of `# key = value` lines, with the `# [header]` above it when that is commented."""
    examples: list[tuple[int, list[int]]] = []
    header = -1
    run: list[int] = []
    for i, line in enumerate([*lines, ""]):
        if _COMMENTED_OPTION.match(line):
            run.append(i)
            continue
        if run:
            examples.append((header, run))
            run = []
        if _HEADER.match(line):
            header = -1
        elif _COMMENTED_HEADER.match(line):
            header = i
    return examples


def _uncommented(lines: list[str], numbers: list[int]) -> str:
    out = list(lines)
    for n in numbers:
        out[n] = out[n].removeprefix("# ")
    return "\n".join(out) + "\n"


def test_the_example_has_commented_examples() -> None:
    examples = _commented_examples(EXAMPLE.read_text(encoding="utf-8").splitlines())
    assert len(examples) >= 10
    headers = {EXAMPLE.read_text(encoding="utf-8").splitlines()[h] for h, _ in examples}
    assert {"# [[workloads]]", "# [[token_sources]]", "# [[billing.static]]"} <= headers


@pytest.mark.parametrize(
    "example",
    _commented_examples(EXAMPLE.read_text(encoding="utf-8").splitlines()),
    ids=lambda e: f"line-{e[1][0] + 1}",
)
def test_every_commented_example_is_valid_uncommented(
    example: tuple[int, list[int]], tmp_path: Path
) -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    header, options = example
    path = tmp_path / "example.toml"
    path.write_text(_uncommented(lines, [*([header] if header >= 0 else []), *options]))
    try:
        config = load_config(path, environ={})
    except ConfigError as exc:
        pytest.fail(f"lines {options[0] + 1}-{options[-1] + 1} uncommented: {exc}")
    assert config != Config(), "uncommenting the example changed nothing"


def test_a_token_source_model_must_be_one_the_sizing_model_can_size(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    source = '[[token_sources]]\nname = "v"\nurl = "http://127.0.0.1:8000/metrics"\n'
    path.write_text(source + 'model = "llama-9"\n')
    errors = _load_errors(path)
    assert any(_starts_with_path(e, "token_sources.0.model") for e in errors), errors
    assert "unknown model 'llama-9'" in "\n".join(errors)
    path.write_text(source + 'config_json = "/nonexistent/config.json"\n')
    assert any(_starts_with_path(e, "token_sources.0.config_json") for e in _load_errors(path))
    path.write_text(source + 'model = "llama-3.1-8b"\nprecision = "awq-int4"\n')
    assert load_config(path, environ={}).token_sources[0].precision == "awq-int4"
