"""The package's public names: each resolves to the object its module defines, however imported."""

from importlib import import_module

import devicepipe


def test_every_export_is_the_object_not_a_submodule():
    modules = set(devicepipe._EXPORTS.values())
    for module in modules:
        import_module(module)  # importing a submodule sets it as an attribute of the package
    for name, module in devicepipe._EXPORTS.items():
        assert getattr(devicepipe, name) is getattr(import_module(module), name), name


def test_durations_read_as_a_person_writes_them():
    from devicepipe.units import format_duration, parse_duration

    assert [format_duration(s) for s in (4.2, 1800, 4500, 216000)] == ["4.20 s", "30.0 min", "1.25 h", "2.50 d"]
    assert parse_duration(format_duration(4500).replace(" ", "")) == 4500
