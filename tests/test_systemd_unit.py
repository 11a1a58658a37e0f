"""examples/systemd/purgatory.service: systemd accepts it and purgatory-server accepts
its command line (the configuration it names is the sample's shape)."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from purgatory_server.__main__ import parse_args

UNIT = Path(__file__).resolve().parent.parent / "examples" / "systemd" / "purgatory.service"


def _service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser["Service"]


def test_exec_start_is_a_command_line_the_server_accepts() -> None:
    binary, *args = shlex.split(_service()["ExecStart"])
    assert binary == "/opt/purgatory/bin/purgatory-server"
    parsed = parse_args(args)
    assert parsed.config == "/etc/purgatory/purgatory.toml"
    # Status 2 is the server's "bad configuration" (docs): no restart loop on it.
    assert _service()["RestartPreventExitStatus"] == "2"
    assert _service()["KillSignal"] == "SIGTERM"


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    # The unit as installed, its binary where this test's virtual environment has it.
    unit = tmp_path / "purgatory.service"
    bindir = str(Path(sys.executable).parent)
    unit.write_text(UNIT.read_text().replace("/opt/purgatory/bin", bindir))
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
