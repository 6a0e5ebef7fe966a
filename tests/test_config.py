"""arroyo.config: defaults, then arroyo.toml in the working directory, then --config, then
ARROYO__SECTION__KEY variables, then command-line overrides; a bad layer is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from arroyo.config import Config, ConfigError, load_config
from arroyo.errors import ErrorDomain

NO_ENV: dict[str, str] = {}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_defaults_without_any_layer(tmp_path: Path) -> None:
    config = load_config(environ=NO_ENV, cwd=tmp_path)
    assert config == Config()
    assert (config.api.port, config.api.admin_port) == (5115, 5125)
    assert (config.controller.port, config.compiler.port, config.node.port) == (5116, 5117, 5118)
    assert config.controller.dial() == "127.0.0.1:5116"
    assert (config.logging.level, config.logging.json_logs) == ("info", False)
    assert config.tracing.exporter == "none"


def test_arroyo_toml_in_the_working_directory(tmp_path: Path) -> None:
    write(
        tmp_path / "arroyo.toml",
        'data_dir = "/srv/arroyo"\n[controller]\nport = 6000\n[logging]\njson = true\n',
    )
    config = load_config(environ=NO_ENV, cwd=tmp_path)
    assert config.data_dir == Path("/srv/arroyo")
    assert config.controller.port == 6000
    # Keys the file does not name keep their defaults, in the same section too.
    assert config.controller.admin_port == 5126
    assert config.logging.json_logs is True


def test_config_file_wins_over_arroyo_toml(tmp_path: Path) -> None:
    write(tmp_path / "arroyo.toml", "[controller]\nport = 6000\nadmin_port = 6001\n")
    given = write(tmp_path / "prod.toml", "[controller]\nport = 7000\n")
    config = load_config(given, environ=NO_ENV, cwd=tmp_path)
    assert (config.controller.port, config.controller.admin_port) == (7000, 6001)


def test_environment_wins_over_files(tmp_path: Path) -> None:
    given = write(tmp_path / "prod.toml", '[database]\nurl = "sqlite:///from-file.db"\n')
    environ = {
        "ARROYO__DATABASE__URL": "postgresql://arroyo@db/arroyo",
        "ARROYO__CONTROLLER__HEARTBEAT_TIMEOUT_S": "2.5",
        "ARROYO__LOGGING__JSON": "true",
        "ARROYO__DATA_DIR": "/var/lib/arroyo",
        "UNRELATED": "ignored",
    }
    config = load_config(given, environ=environ, cwd=tmp_path)
    assert config.database.url == "postgresql://arroyo@db/arroyo"
    assert config.controller.heartbeat_timeout_s == 2.5
    assert config.logging.json_logs is True
    assert config.data_dir == Path("/var/lib/arroyo")


def test_command_line_overrides_win_over_the_environment(tmp_path: Path) -> None:
    config = load_config(
        environ={"ARROYO__NODE__TASK_SLOTS": "4"},
        cwd=tmp_path,
        overrides={"node.task_slots": 8, "node.node_id": "n1"},
    )
    assert (config.node.task_slots, config.node.node_id) == (8, "n1")


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        ("cwd", "arroyo.toml: controller.prot: unknown key"),
        ("file", "prod.toml: controller.prot: unknown key"),
        ("environment", "environment: controller.prot: unknown key"),
        ("command line", "command line: controller.prot: unknown key"),
    ],
)
def test_an_unknown_key_is_refused_naming_its_layer(
    tmp_path: Path, layer: str, expected: str
) -> None:
    typo = "[controller]\nprot = 1\n"
    config_file = None
    environ: dict[str, str] = {}
    overrides = None
    if layer == "cwd":
        write(tmp_path / "arroyo.toml", typo)
    elif layer == "file":
        config_file = write(tmp_path / "prod.toml", typo)
    elif layer == "environment":
        environ = {"ARROYO__CONTROLLER__PROT": "1"}
    else:
        overrides = {"controller.prot": 1}
    with pytest.raises(ConfigError) as caught:
        load_config(config_file, environ=environ, cwd=tmp_path, overrides=overrides)
    assert caught.value.code == "bad_config"
    assert caught.value.domain == ErrorDomain.USER
    assert str(caught.value).endswith(expected)


def test_an_unknown_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"ARROYO__DATABSE__URL": "x"}, cwd=tmp_path)
    assert caught.value.code == "bad_config"
    # Naming the layer and the key is the behaviour under test.
    assert str(caught.value) == "environment: databse: unknown key"


def test_a_bad_value_is_refused_naming_its_layer(tmp_path: Path) -> None:
    # Naming the layer and the key is the behaviour under test.
    with pytest.raises(ConfigError, match=r"^environment: api\.port: .*integer") as caught:
        load_config(environ={"ARROYO__API__PORT": "fifty"}, cwd=tmp_path)
    assert caught.value.code == "bad_config"
    write(tmp_path / "arroyo.toml", '[logging]\nlevel = "loud"\n')
    with pytest.raises(ConfigError, match=r"arroyo\.toml: logging\.level: ") as caught:
        load_config(environ=NO_ENV, cwd=tmp_path)
    assert caught.value.code == "bad_config"


def test_a_key_both_value_and_section_is_refused(tmp_path: Path) -> None:
    for environ in (
        {"ARROYO__API": "x", "ARROYO__API__PORT": "1"},
        {"ARROYO__API__PORT": "1", "ARROYO__API": "x"},
    ):
        with pytest.raises(ConfigError) as caught:
            load_config(environ=environ, cwd=tmp_path)
        assert caught.value.code == "bad_config"
        # Naming the layer and the key is the behaviour under test.
        assert str(caught.value).startswith("environment: api is both a value and a section")


@pytest.mark.parametrize("where", ["cwd", "file"])
def test_bad_toml_is_refused_naming_the_file(tmp_path: Path, where: str) -> None:
    broken = "[controller\nport = 1\n"
    if where == "cwd":
        path = write(tmp_path / "arroyo.toml", broken)
        config_file = None
    else:
        path = config_file = write(tmp_path / "prod.toml", broken)
    with pytest.raises(ConfigError) as caught:
        load_config(config_file, environ=NO_ENV, cwd=tmp_path)
    assert str(caught.value).startswith(f"{path}: ")
    assert caught.value.code == "bad_config"


def test_a_missing_config_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "absent.toml", environ=NO_ENV, cwd=tmp_path)
    assert caught.value.code == "bad_config"


def test_a_relative_sqlite_path_is_under_data_dir(tmp_path: Path) -> None:
    config = load_config(environ={"ARROYO__DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    assert config.database_url() == f"sqlite:///{tmp_path}/arroyo.db"
    absolute = load_config(environ={"ARROYO__DATABASE__URL": "sqlite:////tmp/x.db"}, cwd=tmp_path)
    assert absolute.database_url() == "sqlite:////tmp/x.db"
    postgres = load_config(environ={"ARROYO__DATABASE__URL": "postgresql://h/db"}, cwd=tmp_path)
    assert postgres.database_url() == "postgresql://h/db"


def test_an_address_overrides_what_others_dial(tmp_path: Path) -> None:
    config = load_config(
        environ={"ARROYO__NODE__BIND_HOST": "0.0.0.0", "ARROYO__NODE__ADDRESS": "node-1:5118"},
        cwd=tmp_path,
    )
    assert config.node.dial() == "node-1:5118"


def test_a_file_checkpoint_url_is_the_directory_it_names(tmp_path: Path) -> None:
    env = {"ARROYO__CHECKPOINT_URL": "file:///srv/arroyo%20state/checkpoints"}
    assert load_config(environ=env, cwd=tmp_path).checkpoint_url == (
        "/srv/arroyo state/checkpoints"
    )
    env = {"ARROYO__CHECKPOINT_URL": "s3://bucket/checkpoints"}
    assert load_config(environ=env, cwd=tmp_path).checkpoint_url == "s3://bucket/checkpoints"
    with pytest.raises(ConfigError) as refused:
        load_config(environ={"ARROYO__CHECKPOINT_URL": "file:relative"}, cwd=tmp_path)
    assert "checkpoint_url" in str(refused.value) and "file:///path" in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        load_config(environ={"ARROYO__CHECKPOINT_URL": "file://data/ckpt"}, cwd=tmp_path)
    assert "host 'data'" in str(refused.value)
