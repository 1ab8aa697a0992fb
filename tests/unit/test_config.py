"""Config files: strict keys and types, sane combinations, clear messages."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from broker import config as broker_config
from nameserver import config as ns_config
from rocketspark.errors import ConfigError
from tests.helpers import docs_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_config_files_load() -> None:
    assert broker_config.load(ROOT / "conf" / "broker-a.toml").broker_name == "broker-a"
    assert broker_config.load(ROOT / "conf" / "broker-b.toml").listen_port == 10921
    assert ns_config.load(ROOT / "conf" / "nameserver.toml").listen_port == 9876


def test_an_unknown_key_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text('broker_name = "x"\nflush_modee = "sync"\n')
    with pytest.raises(ConfigError, match=r"unknown key.*flush_modee"):
        broker_config.load(path)


def test_a_value_of_the_wrong_type_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text('listen_port = "10911"\n')
    with pytest.raises(ConfigError, match="listen_port must be int"):
        broker_config.load(path)


def test_invalid_toml_is_reported_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("listen_port = = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        broker_config.load(path)


def test_a_missing_file_is_reported() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        broker_config.load("/no/such/file.toml")


def test_segments_must_hold_the_largest_message() -> None:
    with pytest.raises(ConfigError, match="segment_bytes"):
        broker_config.load(None, segment_bytes=1024 * 1024, max_message_bytes=4 * 1024 * 1024)


def test_flush_mode_is_checked() -> None:
    with pytest.raises(ConfigError, match='flush_mode must be "async" or "sync"'):
        broker_config.load(None, flush_mode="sometimes")


def test_command_line_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("listen_port = 1234\n")
    assert broker_config.load(path, listen_port=0).listen_port == 0


def test_the_shipped_nameserver_config_lists_every_key_with_its_default() -> None:
    shipped = tomllib.loads((ROOT / "conf" / "nameserver.toml").read_text())
    assert shipped == dataclasses.asdict(ns_config.NameServerConfig())


@pytest.mark.parametrize("name", ["broker-a", "broker-b"])
def test_the_shipped_broker_configs_list_every_key_with_its_default_unless_noted(name: str) -> None:
    shipped = tomllib.loads((ROOT / "conf" / f"{name}.toml").read_text())
    defaults = dataclasses.asdict(broker_config.BrokerConfig())
    assert set(shipped) == set(defaults)
    noted = {"broker_name", "listen_port", "data_dir", "nameservers"}  # each example broker's own
    assert {k: v for k, v in shipped.items() if k not in noted} == {k: v for k, v in defaults.items() if k not in noted}


def test_a_negative_subscription_cap_is_an_error() -> None:
    with pytest.raises(ConfigError, match="max_subscriptions_per_client -1 must be >= 0"):
        ns_config.NameServerConfig(max_subscriptions_per_client=-1)


def test_the_replica_group_example_configs_load_as_one_group_of_three() -> None:
    replicas = [broker_config.load(path) for path in sorted((ROOT / "conf" / "replica-group").glob("broker-*.toml"))]
    assert [(c.broker_name, c.replica_id, c.controller_mode) for c in replicas] == [
        ("broker-a", i, True) for i in range(3)
    ]
    assert len({c.data_dir for c in replicas}) == len({c.listen_port for c in replicas}) == 3
    assert ns_config.load(ROOT / "conf" / "replica-group" / "nameserver.toml").controller_enable


def test_in_sync_replicas_above_one_needs_controller_mode() -> None:
    with pytest.raises(ConfigError, match="in_sync_replicas = 2 needs replicas: set controller_mode = true"):
        broker_config.BrokerConfig(in_sync_replicas=2)


def _table_keys(heading: str) -> set[str]:
    """Every `key` named in the configuration reference's table headed ``| heading | default | meaning |``."""
    lines = docs_text("reference/configuration.md").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading} |"))
    keys: set[str] = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        keys.update(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1] + line.split("|")[3]))
    return keys


@pytest.mark.parametrize(
    ("heading", "config"), [("broker key", broker_config.BrokerConfig), ("nameserver key", ns_config.NameServerConfig)]
)
def test_the_docs_tables_list_every_key(heading: str, config: type) -> None:
    """Each server's own keys in its table, the security keys both share in theirs."""
    missing = {f.name for f in dataclasses.fields(config)} - _table_keys(heading) - _table_keys("security key")
    assert not missing, f"the configuration reference's '{heading}' table lacks {sorted(missing)}"


def test_a_broker_will_not_register_an_address_its_nameservers_clients_cannot_reach() -> None:
    remote = ["10.1.2.3:9876"]
    with pytest.raises(ConfigError, match=r'listen_host "0\.0\.0\.0" .* set advertised_host'):
        broker_config.BrokerConfig(listen_host="0.0.0.0", nameservers=remote)
    with pytest.raises(ConfigError, match=r'loopback address "127\.0\.0\.1" .* Set advertised_host'):
        broker_config.BrokerConfig(nameservers=remote)
    with pytest.raises(ConfigError, match=r'advertised_host "0\.0\.0\.0" is every interface'):
        broker_config.BrokerConfig(advertised_host="0.0.0.0")
    reachable = broker_config.BrokerConfig(listen_host="0.0.0.0", advertised_host="10.1.2.4", nameservers=remote)
    assert reachable.advertised_address == "10.1.2.4"
    assert broker_config.BrokerConfig(listen_host="10.1.2.4", nameservers=remote).advertised_address == "10.1.2.4"
    local = broker_config.BrokerConfig(listen_host="0.0.0.0", nameservers=["127.0.0.1:9876"])
    assert local.advertised_address == "127.0.0.1"  # everything on this host: reachable on loopback
