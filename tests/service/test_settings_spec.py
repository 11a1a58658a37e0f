"""Purgatory settings are declared once (``_service/config/settings_spec.py``); everything that
names them must agree with that declaration and with the proto's ``PurgatoryConfig``.

A field added to the proto that the server does not declare, or that the Python client,
the Node.js client, the CLI or docs/configuration.md lack, fails here.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from purgatory_client import InvalidArgumentError, PurgatoryClient, PurgatoryConfig
from purgatory_client import cli as client_cli
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service import ServerConfig
from purgatory_server._service.config.server_config import ConfigError, Limits, from_mapping
from purgatory_server._service.config.settings_spec import (
    PROTO_SETTINGS,
    SETTINGS,
    PurgatorySettings,
    Setting,
)
from purgatory_server._service.core.snapshots import PurgatoryStats
from purgatory_server._service.wire.convert import purgatory_to_proto, settings_from_proto

from tests.service.helpers import ServerThread

ROOT = Path(__file__).resolve().parents[2]
WIRE = pb.PurgatoryConfig.DESCRIPTOR.fields
WIRE_KIND = {
    FieldDescriptor.TYPE_BOOL: bool,
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_UINT64: int,
    FieldDescriptor.TYPE_STRING: str,
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _other(spec: Setting) -> int | bool | str:
    """A valid value that is not the setting's default."""
    if spec.kind is bool:
        return not spec.default
    if spec.kind is str:
        return sorted(spec.choices - {spec.default})[0]
    low, high = spec.bounds(None)
    assert isinstance(spec.default, int)
    return spec.default + 1 if spec.default < high else low


# ------------------------------------------------------------------ the declaration
def test_every_proto_field_is_declared_once_with_its_wire_type() -> None:
    assert [f.name for f in WIRE] == [s.name for s in PROTO_SETTINGS], (
        "proto PurgatoryConfig and settings_spec.PurgatorySettings disagree"
    )
    for f in WIRE:
        [spec] = [s for s in SETTINGS if s.name == f.name]
        assert WIRE_KIND[f.type] is spec.kind, f.name
        if f.type == FieldDescriptor.TYPE_UINT32:
            assert spec.bounds(Limits())[1] <= 2**32 - 1, f.name


def test_every_setting_has_a_doc_and_a_default_within_its_bounds() -> None:
    assert [f.name for f in dataclasses.fields(PurgatorySettings)] == [
        "name",
        *(s.name for s in SETTINGS),
    ]
    annotations = {f.name: f.type for f in dataclasses.fields(PurgatorySettings)}
    for spec in SETTINGS:
        assert spec.doc, spec.name
        assert annotations[spec.name] == spec.kind.__name__, spec.name  # parsed by type
        assert getattr(PurgatorySettings(), spec.name) == spec.default
    PurgatorySettings().validate(Limits())


@pytest.mark.parametrize("spec", [s for s in SETTINGS if s.kind is int], ids=lambda s: s.name)
def test_bounds_come_from_the_declaration_in_toml_and_create(spec: Setting) -> None:
    low, high = spec.bounds(Limits())
    for bad in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=spec.name):
            from_mapping({"defaults": {spec.name: bad}}).validate()
    from_mapping({"defaults": {spec.name: high}}).validate()


def test_mapping_to_and_from_the_wire_keeps_every_proto_setting() -> None:
    changed = PurgatorySettings(name="p", **{s.name: _other(s) for s in SETTINGS})
    config = purgatory_to_proto(PurgatoryStats("p", changed, 0, 0, 0, 1, 0)).config
    assert {f.name: getattr(config, f.name) for f in WIRE} == {
        s.name: getattr(changed, s.name) for s in PROTO_SETTINGS
    }
    back = settings_from_proto("p", config)
    for spec in SETTINGS:
        expected = getattr(changed, spec.name) if spec.in_proto else spec.default
        assert getattr(back, spec.name) == expected, spec.name


def test_zero_settings_of_a_request_take_the_server_defaults() -> None:
    defaults = PurgatorySettings(**{s.name: _other(s) for s in SETTINGS})
    filled = settings_from_proto("q", pb.PurgatoryConfig()).over(defaults)
    assert filled == dataclasses.replace(defaults, name="q")


# ------------------------------------------------------------------ the clients
def test_python_client_config_has_every_proto_field_with_its_type() -> None:
    hints = typing.get_type_hints(PurgatoryConfig)
    client_fields = dataclasses.fields(PurgatoryConfig)
    assert [f.name for f in client_fields] == [f.name for f in WIRE]
    for f in client_fields:
        assert hints[f.name] is WIRE_KIND[WIRE[[w.name for w in WIRE].index(f.name)].type]
        assert not f.default, f"{f.name}: zero (the server's default) must be the default"


def test_create_with_every_setting_through_the_client_and_server(tmp_path: Path) -> None:
    wanted = PurgatoryConfig(**{s.name: _other(s) for s in PROTO_SETTINGS})
    config = ServerConfig(listen="127.0.0.1:0", grace_s=0.5, data_dir=str(tmp_path))
    with ServerThread(config) as st, PurgatoryClient(st.target) as client:
        assert client.create_purgatory("every", wanted).config == wanted
        assert client.get_purgatory("every").config == wanted
        defaults = client.create_purgatory("zeros").config
        server_defaults = PurgatorySettings()
        for spec in PROTO_SETTINGS:
            assert getattr(defaults, spec.name) == getattr(server_defaults, spec.name)
        with pytest.raises(InvalidArgumentError, match=r"config\.wheel_size"):
            client.create_purgatory("bad", PurgatoryConfig(wheel_size=1))


def test_cli_create_has_an_option_for_every_config_field() -> None:
    parser = client_cli.build_parser()
    argv = ["purgatories", "create", "p"]
    expected: dict[str, Any] = {}
    for spec in PROTO_SETTINGS:
        if spec.name in client_cli.NO_CREATE_OPTION:
            continue
        value = _other(spec)
        option = "--" + spec.name.replace("_", "-")
        argv += [option] if spec.kind is bool else [option, str(value)]
        expected[spec.name] = value
    args = parser.parse_args(argv)
    config = client_cli._create_config(args)
    assert {k: getattr(config, k) for k in expected} == expected
    assert set(expected) | set(client_cli.NO_CREATE_OPTION) == {f.name for f in WIRE}


def test_node_client_maps_every_proto_field() -> None:
    models = (ROOT / "client/node/src/models.ts").read_text()
    convert = (ROOT / "client/node/src/convert.ts").read_text()
    [interface] = re.findall(r"export interface PurgatoryConfig \{(.*?)\}", models, re.S)
    [to_wire] = re.findall(r"function configToWire\(.*?\{(.*?)\n\}", convert, re.S)
    declared = re.findall(r"(\w+)\?:", interface)
    assert declared == [_camel(f.name) for f in WIRE]
    for f in WIRE:
        assert f"{_camel(f.name)}: c.{_camel(f.name)} ??" in to_wire, f.name


# ------------------------------------------------------------------ the docs
def test_configuration_docs_list_every_setting_with_its_default() -> None:
    text = (ROOT / "docs/configuration.md").read_text()
    section = text.split("## `[defaults]` and `[[purgatories]]`")[1].split("\n## ")[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M))
    assert list(rows) == [s.name for s in SETTINGS]
    for spec in SETTINGS:
        shown = rows[spec.name].strip()
        if spec.kind is bool:
            assert shown == str(spec.default).lower(), spec.name
        elif spec.kind is str:
            assert shown == f"`{spec.default!r}`".replace("'", '"'), spec.name
        else:
            assert int(shown) == spec.default, spec.name
