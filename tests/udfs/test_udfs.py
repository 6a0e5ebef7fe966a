"""Python UDFs end to end: loaded from a file, planned, run on Spark over a bounded input."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.udfs import UdfLibrary, dependencies, load, with_saved
from tests.sql.harness import INPUTS, read_output

HERE = Path(__file__).parent
EVENTS = [json.loads(line) for line in (INPUTS / "events.json").read_text().splitlines()]

SOURCE = f"""
CREATE TABLE events (id BIGINT NOT NULL, "user" TEXT, amount DOUBLE, ts TIMESTAMP NOT NULL,
                     tags TEXT[], WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{INPUTS / "events.json"}', format = 'json',
      type = 'source');
"""


@pytest.fixture(scope="module")
def library() -> UdfLibrary:
    return load((HERE / "example_udfs.py").read_text(), "example_udfs.py")


def run(
    spark: SparkSession, tmp_path: Path, library: UdfLibrary | None, select: str
) -> list[dict[str, Any]]:
    out = tmp_path / "out.json"
    sql = (
        SOURCE
        + f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink');\n"
        + f"INSERT INTO out {select};"
    )
    program = spark_planner(spark, state_dir=tmp_path, udfs=library).plan(sql)
    runner = PipelineRunner(spark, program, tmp_path / "state")
    runner.start()
    assert runner.wait(timeout=300)
    return read_output(out)


@pytest.mark.spark
def test_scalar_udfs(spark: SparkSession, tmp_path: Path, library: UdfLibrary) -> None:
    rows = run(
        spark,
        tmp_path,
        library,
        'SELECT id, double(id) AS d, shout("user") AS s, plural(kind) AS p, minute_of(ts) AS m, '
        "tags(id) AS t, slow_square(id) AS sq FROM (SELECT *, 'click' AS kind FROM events)",
    )
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == [e["id"] for e in EVENTS]
    for e in EVENTS:
        minute = dt.datetime.fromisoformat(e["ts"]).minute
        assert by_id[e["id"]] == {
            "id": e["id"],
            "d": 2 * e["id"],
            "s": e["user"].upper() + "!",
            "p": "clicks",  # from the UDF file's own dependency, not the engine's environment
            "m": minute,
            "t": [f"t{i}" for i in range(e["id"] % 3)],
            "sq": e["id"] ** 2,
        }


@pytest.mark.spark
def test_scalar_udf_values_and_strict_nulls(
    spark: SparkSession, tmp_path: Path, library: UdfLibrary
) -> None:
    """Timestamps, bytes and arrays go in and out as Python values without shifting, and a
    NULL into an argument not annotated ``| None`` gives NULL without calling the function."""
    rows = run(
        spark,
        tmp_path,
        library,
        "SELECT id, double(CASE WHEN id % 2 = 0 THEN NULL ELSE id END) AS d, "
        'an_hour_later(ts) AS later, size(CAST("user" AS BYTEA)) AS n, total(tags) AS t, '
        'shout(CASE WHEN id % 3 = 0 THEN NULL ELSE "user" END) AS s FROM events',
    )
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == [e["id"] for e in EVENTS]
    for e in EVENTS:
        later = dt.datetime.fromisoformat(e["ts"]) + dt.timedelta(hours=1)
        assert by_id[e["id"]] == {
            "id": e["id"],
            "d": None if e["id"] % 2 == 0 else 2 * e["id"],
            "later": later.isoformat(),
            "n": len(e["user"]),
            "t": sum(len(t) for t in e["tags"]),
            "s": "NOBODY" if e["id"] % 3 == 0 else e["user"].upper() + "!",
        }


@pytest.mark.spark
def test_aggregate_udfs_per_window(
    spark: SparkSession, tmp_path: Path, library: UdfLibrary
) -> None:
    rows = run(
        spark,
        tmp_path,
        library,
        "SELECT window.start AS start, spread, w "
        "FROM (SELECT tumble(interval '1 minute') AS window, spread(amount) AS spread, "
        "weighted(amount, id) AS w FROM events GROUP BY window) AS t",
    )
    windows: dict[str, list[dict[str, Any]]] = {}
    for e in EVENTS:
        start = dt.datetime.fromisoformat(e["ts"]).replace(second=0).isoformat()
        windows.setdefault(start, []).append(e)
    expected = {}
    for start, members in windows.items():
        amounts = [m["amount"] for m in members]
        total = sum(m["id"] for m in members)
        w = sum(m["amount"] * m["id"] for m in members) / total if total else None
        expected[start] = (max(amounts) - min(amounts), w)
    got = {r["start"]: (r["spread"], r["w"]) for r in rows}
    assert got.keys() == expected.keys()
    for start, (spread, w) in expected.items():
        assert got[start][0] == pytest.approx(spread)
        assert got[start][1] == pytest.approx(w) if w is not None else got[start][1] is None


@pytest.mark.spark
def test_udf_arguments_are_cast_to_the_types_the_udf_declares(
    spark: SparkSession, tmp_path: Path, library: UdfLibrary
) -> None:
    """A DECIMAL into an ``int`` argument and into an aggregate's ``list[float]`` reaches the
    function as an int and floats, as Arroyo casts a UDF's arguments to its signature."""
    rows = run(
        spark,
        tmp_path,
        library,
        "SELECT window.start AS start, spread, d "
        "FROM (SELECT tumble(interval '1 minute') AS window, "
        "spread(CAST(amount AS DECIMAL(10, 2))) AS spread, "
        "max(double(CAST(id AS DECIMAL(20, 0)))) AS d FROM events GROUP BY window) AS t",
    )
    windows: dict[str, list[dict[str, Any]]] = {}
    for e in EVENTS:
        start = dt.datetime.fromisoformat(e["ts"]).replace(second=0).isoformat()
        windows.setdefault(start, []).append(e)
    got = {r["start"]: (r["spread"], r["d"]) for r in rows}
    assert got.keys() == windows.keys()
    for start, members in windows.items():
        amounts = [m["amount"] for m in members]
        assert got[start][0] == pytest.approx(max(amounts) - min(amounts))
        assert got[start][1] == 2 * max(m["id"] for m in members)


@pytest.mark.spark
def test_a_udf_called_with_the_wrong_number_of_arguments_is_a_diagnostic(
    spark: SparkSession, tmp_path: Path, library: UdfLibrary
) -> None:
    sql = SOURCE + "SELECT double(id, 2) FROM events;"
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path, udfs=library).plan(sql)
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "bad_function_call"
    assert "UDF 'double' takes 1 argument(s) (BIGINT), but is given 2" in diagnostic.message
    assert diagnostic.span is not None and diagnostic.span.column == 8, diagnostic.render()


@pytest.mark.spark
def test_a_raising_udf_fails_the_job_naming_it_and_the_input(
    spark: SparkSession, tmp_path: Path
) -> None:
    udfs = tmp_path / "bad.py"
    udfs.write_text(
        "from arroyo_udf import udf\n\n@udf\ndef inverse(x: int) -> float:\n    return 1 / x\n"
    )
    library = load(udfs.read_text(), str(udfs))
    with pytest.raises(JobFailedError) as caught:
        run(spark, tmp_path, library, "SELECT inverse(id) AS r FROM events")
    assert caught.value.code == "job_failed"
    # Naming the UDF, the input and the error is the behaviour under test.
    assert "UDF 'inverse' failed on input (0)" in caught.value.message
    assert "ZeroDivisionError" in caught.value.message


@pytest.mark.spark
def test_a_udf_returning_the_wrong_type_fails_naming_it_and_the_input(
    spark: SparkSession, tmp_path: Path
) -> None:
    udfs = tmp_path / "bad.py"
    udfs.write_text(
        "from arroyo_udf import udf\n\n@udf\ndef half(x: int) -> int:\n    return x / 2\n"
    )
    library = load(udfs.read_text(), str(udfs))
    with pytest.raises(JobFailedError) as caught:
        run(spark, tmp_path, library, "SELECT half(id) AS h FROM events WHERE id = 3")
    assert caught.value.code == "job_failed"
    # Naming the UDF, the input and the wrong value is the behaviour under test.
    assert "UDF 'half' failed on input (3)" in caught.value.message
    assert "returned 1.5, not BIGINT" in caught.value.message


# Module-level code that leaves a mark of the process that ran it.
MARKING = (
    "import os\nimport pathlib\n\nfrom arroyo_udf import udf\n\n"
    "pathlib.Path({marker!r}).write_text(str(os.getpid()))\n\n\n"
    "@udf\ndef plus_one(x: int) -> int:\n    return x + 1\n"
)


@pytest.mark.spark
def test_udf_code_runs_only_in_sparks_python_workers(spark: SparkSession, tmp_path: Path) -> None:
    """Reading and planning with a UDF file runs none of it (the compiler does both); the run
    does, in Spark's Python worker processes, not in this one, which is the pipeline's driver."""
    marker = tmp_path / "ran-in"
    library = load(MARKING.format(marker=str(marker)), "udfs.py")
    assert library.udfs["plus_one"].args[0].spark == "BIGINT"
    sql = SOURCE + "SELECT plus_one(id) FROM events;"
    spark_planner(spark, state_dir=tmp_path, udfs=library).plan(sql)
    assert not marker.exists()
    rows = run(spark, tmp_path, library, "SELECT id, plus_one(id) AS p FROM events")
    assert sorted((r["id"], r["p"]) for r in rows) == sorted((e["id"], e["id"] + 1) for e in EVENTS)
    assert marker.exists()
    assert int(marker.read_text()) != os.getpid()


@pytest.mark.spark
def test_a_udf_file_that_fails_to_run_fails_the_job_naming_the_udf_and_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    text = (
        "from arroyo_udf import udf\n\nRATE = 1 / 0\n\n\n@udf\ndef f(x: int) -> int:\n"
        "    return x\n"
    )
    library = load(text, "udfs.py")
    with pytest.raises(JobFailedError) as caught:
        run(spark, tmp_path, library, "SELECT f(id) AS r FROM events")
    assert "UDF 'f' could not be loaded: udfs.py:3: ZeroDivisionError" in caught.value.message


def test_udf_types_are_read_through_the_files_imports() -> None:
    text = (
        "import datetime as dt\nimport typing\nfrom typing import List, Optional\n\n"
        "import arroyo_udf as au\nfrom arroyo_udf import udaf as aggregate\n\n\n"
        "@au.udf(concurrency=2, timeout=1.5)\nasync def a(x: Optional[str], y: 'dt.datetime') "
        "-> typing.Union[int, None]:\n    return 1\n\n\n"
        "@aggregate\ndef b(xs: List[float]) -> 'list[int | None]':\n    return []\n\n\n"
        "def not_a_udf(x):\n    return x\n"
    )
    library = load(text, "udfs.py")
    a, b = library.udfs["a"], library.udfs["b"]
    assert (a.kind, a.concurrency, a.timeout, a.line) == ("async", 2, 1.5, 9)
    assert [(t.spark, t.nullable) for t in a.args] == [("STRING", True), ("TIMESTAMP", False)]
    assert (a.returns.spark, a.returns.nullable) == ("BIGINT", True)
    assert (b.kind, b.args[0].spark, b.returns.spark) == ("udaf", "ARRAY<DOUBLE>", "ARRAY<BIGINT>")
    assert sorted(library.udfs) == ["a", "b"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("@udf\ndef f(x) -> int:\n    return 1\n", "argument 'x' has no type annotation"),
        ("@udf\ndef f(x: int):\n    return 1\n", "no return type annotation"),
        ("@udf\ndef f(x: dict) -> int:\n    return 1\n", "unsupported type dict"),
        ("@udf\ndef f(*xs: int) -> int:\n    return 1\n", "only plain positional arguments"),
        ("@udaf\ndef f(x: int) -> int:\n    return 1\n", "argument 1 must be a list"),
        ("@udf\ndef f(x: int) -> int\n", "SyntaxError"),
        ("Num = int\n\n@udf\ndef f(x: Num) -> int:\n    return 1\n", "an alias is not followed"),
        ("@udf(concurrency=N)\ndef f(x: int) -> int:\n    return 1\n", "must be a literal number"),
    ],
)
def test_bad_udf_files_are_diagnostics(source: str, message: str) -> None:
    text = "from arroyo_udf import udaf, udf\n\n" + source
    with pytest.raises(PlanningError) as caught:
        load(text, "u.py")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "bad_udf"
    # One code for every problem of a UDF file: which problem, and where, the message says.
    assert diagnostic.message.startswith("u.py:")
    assert message in diagnostic.message


@pytest.mark.spark
def test_validate_with_udfs_names_unknown_functions(spark: SparkSession, tmp_path: Path) -> None:
    sql = SOURCE + "SELECT no_such_udf(id) FROM events;"
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    assert caught.value.diagnostics[0].code == "unknown_function"


SAVED_SCALE = (
    "from arroyo_udf import udf\n\nFACTOR = 10\n\n\n@udf\ndef scale(x: int) -> int:\n"
    "    return FACTOR * x\n"
)
# Defines a `FACTOR` of its own and a UDF named as a saved one: the pipeline's win both.
OWN = (
    "from arroyo_udf import udf\n\nFACTOR = 3\n\n\n@udf\ndef triple(x: int) -> int:\n"
    "    return FACTOR * x\n"
)


@pytest.mark.spark
def test_saved_udfs_run_beside_the_pipelines_own_without_touching_its_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Saved UDFs join a pipeline's UDF file as sections run as modules of their own: each
    keeps its own globals, the pipeline's own UDF wins a name it shares with a saved one, and
    the run loads the file as the compiler did."""
    shadowed = "from arroyo_udf import udf\n\n@udf\ndef triple(x: int) -> int:\n    return 0\n"
    text = with_saved(OWN, {"scale": SAVED_SCALE, "triple": shadowed})
    library = load(text, "udfs.py")
    assert sorted(library.udfs) == ["scale", "triple"]
    assert library.udfs["triple"].line == 6  # the pipeline's own, at its own line
    rows = run(spark, tmp_path, library, "SELECT id, scale(id) AS s, triple(id) AS t FROM events")
    assert sorted((r["id"], r["s"], r["t"]) for r in rows) == [
        (e["id"], 10 * e["id"], 3 * e["id"]) for e in sorted(EVENTS, key=lambda e: e["id"])
    ]


def test_a_saved_udfs_error_names_it_and_its_line_in_the_whole_file() -> None:
    broken = "from arroyo_udf import udf\n\n@udf\ndef f(x) -> int:\n    return 1\n"
    with pytest.raises(PlanningError) as caught:
        load(with_saved(OWN, {"f": broken}), "udfs.py")
    [diagnostic] = caught.value.diagnostics
    # OWN is 8 lines, the section's mark the 9th: `@udf` over `def f` is the 12th.
    assert diagnostic.message.startswith("saved UDF f:12: UDF 'f':")
    assert "argument 'x' has no type annotation" in diagnostic.message


def test_only_the_saved_udfs_a_query_calls_join_its_file_in_any_case() -> None:
    saved = {"scale": SAVED_SCALE, "Triple": SAVED_SCALE.replace("scale", "Triple")}
    text = with_saved(OWN, saved, "SELECT SCALE (x), triple(x), rescale(x), t.scale FROM t")
    assert "saved UDF scale" in text and "saved UDF Triple" in text
    library = load(text, "udfs.py")
    # The pipeline's own `triple` wins over the saved `Triple`: to Spark they are one name.
    assert sorted(library.udfs) == ["scale", "triple"]
    assert library.udfs["triple"].line == 6
    assert with_saved(OWN, saved, "SELECT rescale(x), t.scale FROM t") == OWN


def test_dependencies_of_every_section_are_installed_together() -> None:
    block = '# /// script\n# dependencies = ["{}"]\n# ///\n'
    text = with_saved(block.format("a==1"), {"b": block.format("b==2") + "X = 1\n"})
    assert dependencies(text) == ["a==1", "b==2"]
