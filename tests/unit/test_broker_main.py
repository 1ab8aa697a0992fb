"""``python -m broker`` argument handling: where the nameserver list comes from, checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.__main__ import load_config, main, parse_args
from rocketspark.errors import InvalidAddressError


def test_nameservers_come_from_the_command_line_then_the_file_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text('nameservers = ["10.0.0.1:9876"]\nadvertised_host = "10.0.0.5"\n')  # reachable from them
    monkeypatch.setenv("ROCKETSPARK_NAMESRV", "10.0.0.9:9876; 10.0.0.8:9876")
    assert load_config(parse_args(["--conf", str(conf), "-n", "h1:1, h2:2"])).nameservers == ["h1:1", "h2:2"]
    assert load_config(parse_args(["--conf", str(conf)])).nameservers == ["10.0.0.1:9876"]
    assert load_config(parse_args(["--conf", str(conf)])).advertised_address == "10.0.0.5"
    conf.write_text('advertised_host = "10.0.0.5"\n')
    assert load_config(parse_args(["--conf", str(conf)])).nameservers == ["10.0.0.9:9876", "10.0.0.8:9876"]
    monkeypatch.delenv("ROCKETSPARK_NAMESRV")
    assert load_config(parse_args([])).nameservers == []  # allowed: the broker warns at start


def test_a_loopback_broker_with_nameservers_elsewhere_stops_naming_advertised_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data-dir", str(tmp_path / "data"), "-n", "10.0.0.1:9876", "--host", "0.0.0.0"]
    assert main(argv) == 2
    assert "set advertised_host" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # refused before anything was made


@pytest.mark.parametrize("where", ["command line", "file", "environment"])
def test_a_bad_nameserver_address_is_refused_naming_it(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text('nameservers = ["no-port"]\n' if where == "file" else "")
    argv = ["--conf", str(conf), "--data-dir", str(tmp_path / "data")]
    if where == "command line":
        argv += ["-n", "no-port"]
    if where == "environment":
        monkeypatch.setenv("ROCKETSPARK_NAMESRV", "no-port")
    with pytest.raises(InvalidAddressError):
        load_config(parse_args(argv))
    assert main(argv) == 2
    assert '"no-port" is not a valid address' in capsys.readouterr().err
