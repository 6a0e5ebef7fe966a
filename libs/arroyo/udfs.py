"""Python UDFs: reading a UDF file, checking signatures, registering the functions with Spark.

No Arroyo service runs a user's UDF code. The file is read without running it
(``arroyo.udf_static``); what Spark registers is a wrapper that, in Spark's Python worker
processes, runs the file's module the first time it is called there (``function``). The
pipeline's driver and the compiler only plan with the types the file's annotations declare.

A UDF file is plain Python using ``arroyo_udf.udf`` / ``udaf``. It may declare pip dependencies
in an inline script metadata block (PEP 723)::

    # /// script
    # dependencies = ["humanize==4.9.0"]
    # ///

They are installed once into a directory of their own (keyed by the list, under
``~/.cache/arroyo/udf-deps``), never into the engine's environment, and that directory is put on
the path of the driver and of Spark's Python workers.

How each kind runs:

- ``@udf`` on a function: an Arrow UDF, called once per Arrow batch, mapping the function over
  its rows as plain Python values.
- ``@udf`` on an ``async def``: a pandas UDF; each batch's calls run on an event loop with at most
  ``concurrency`` in flight and ``timeout`` seconds each, results in input order.
- ``@udaf``: the planner rewrites ``f(x)`` to ``f(collect_list(x))`` inside the aggregate, and
  the function is called once per group (or window) with its lists of values.

A call that raises fails the job with an error naming the UDF and its input.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import sys
import tomllib
import types
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arroyo import udf_static
from arroyo.errors import Diagnostic, PlanningError
from arroyo.sql.functions import UdfSignature
from arroyo.udf_static import UdfType, UdfTypeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

UDF_ERROR = "UDF '"
# The line that begins a saved UDF's section of a pipeline's UDF file (``with_saved``).
SAVED_MARK = "# arroyo: saved UDF "
_DEPS_CACHE = Path.home() / ".cache" / "arroyo" / "udf-deps"
_SCRIPT_BLOCK = re.compile(r"(?m)^# /// script\s*$\n(?P<body>(?:^#(?: .*)?$\n)+?)^# ///\s*$")


@dataclass(frozen=True)
class UdfCode:
    """Where a UDF's code is: the section of the file that defines it, run as a module of its
    own only where the function is called, in Spark's Python workers (``function``)."""

    where: str  # the section's name in errors: the file's, or "saved UDF <name>"
    start: int  # the section's first line in the whole file
    text: str
    module: str
    name: str


@dataclass
class UdfDef:
    name: str
    code: UdfCode
    kind: str  # udf | async | udaf
    args: list[UdfType]
    returns: UdfType
    concurrency: int = 16
    timeout: float = 30.0
    line: int = 0


@dataclass
class UdfLibrary:
    """The UDFs of one file, ready to register."""

    source: str
    path: str
    udfs: dict[str, UdfDef] = field(default_factory=dict)
    deps_dir: Path | None = None

    @property
    def signatures(self) -> dict[str, UdfSignature]:
        """Each UDF's name, and what a call of it needs: whether it is an aggregate, and the
        types its arguments are cast to (a list argument's item type, for an aggregate)."""
        return {
            name: UdfSignature(
                u.kind == "udaf",
                tuple(a.spark[len("ARRAY<") : -1] if u.kind == "udaf" else a.spark for a in u.args),
            )
            for name, u in self.udfs.items()
        }


def dependencies(source: str) -> list[str]:
    """The ``dependencies`` of the file's ``# /// script`` blocks (PEP 723): one per section
    (see ``with_saved``), in order, each requirement once."""
    found: list[str] = []
    for match in _SCRIPT_BLOCK.finditer(source):
        body = "\n".join(
            line[2:] if line.startswith("# ") else "" for line in match["body"].splitlines()
        )
        deps = tomllib.loads(body).get("dependencies", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise UdfTypeError("'dependencies' must be a list of requirement strings")
        found += [d for d in deps if d not in found]
    return found


def with_saved(own: str, saved: dict[str, str], query: str | None = None) -> str:
    """A pipeline's UDF file with the saved UDFs (name: definition) after its own, each in a
    section of its own that ``load`` runs as a module of its own: a saved UDF's names never
    replace the pipeline's, and the pipeline's own lines keep their numbers. A UDF the
    pipeline defines itself is the pipeline's, not the saved one of that name. With
    ``query``, only the saved UDFs whose names it calls (a name followed by ``(``, in any
    case): one that fails to load, or whose dependencies conflict, touches no other query."""
    if query is not None:
        saved = {
            name: definition
            for name, definition in saved.items()
            if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", query, re.IGNORECASE)
        }
    sections = [own.rstrip("\n")] if own.strip() else [""]
    sections += [
        f"{SAVED_MARK}{name}\n{definition.rstrip(chr(10))}" for name, definition in saved.items()
    ]
    return "\n".join(sections) + "\n"


def _sections(source: str, path: str) -> list[tuple[str, int, str]]:
    """The file's sections as (path, first line, text): the pipeline's own, then each saved
    UDF's (``with_saved``)."""
    found: list[tuple[str, int, str]] = []
    lines: list[str] = []
    name, start = path, 1
    # Split at "\n" alone, as Python's compiler counts lines (str.splitlines also splits at
    # form feeds and other separators, which would shift every section after one).
    for number, text in enumerate(source.split("\n"), 1):
        if text.startswith(SAVED_MARK):
            found.append((name, start, "".join(lines)))
            name, start, lines = f"saved UDF {text[len(SAVED_MARK) :].strip()}", number, []
        lines.append(text + "\n")
    found.append((name, start, "".join(lines)))
    return found


def install_dependencies(deps: list[str]) -> Path | None:
    """Install ``deps`` into their own directory (once) and return it."""
    if not deps:
        return None
    key = hashlib.sha256("\n".join(sorted(deps)).encode()).hexdigest()[:16]
    target = _DEPS_CACHE / key
    if (target / ".complete").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), *deps],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise UdfTypeError(f"installing {', '.join(deps)} failed: {result.stderr.strip()[-500:]}")
    (target / ".complete").write_text("")
    return target


def load(source: str, path: str = "<udfs>", *, install: bool = False) -> UdfLibrary:
    """Read a UDF file's functions and types without running it (``arroyo.udf_static``);
    errors are diagnostics. With ``install``, its dependencies are installed too, as a run
    needs them and the compiler does not (pip may run a package's build code)."""
    try:
        deps = dependencies(source)
    except (UdfTypeError, tomllib.TOMLDecodeError) as err:
        raise _udf_error(path, 1, f"dependencies: {err}") from err
    library = UdfLibrary(source, path)
    diagnostics: list[Diagnostic] = []
    for index, (where, start, text) in enumerate(_sections(source, path)):
        module = "arroyo_user_udfs" if index == 0 else f"arroyo_saved_{index}"
        try:
            # Padded so that each section's lines keep their numbers in the whole file.
            found, problems = udf_static.read("\n" * (start - 1) + text, where)
        except SyntaxError as err:
            raise _udf_error(where, err.lineno or start, f"SyntaxError: {err}") from err
        diagnostics += [_udf_error(where, p.line, p.message).diagnostics[0] for p in problems]
        for f in found:
            # Spark's function names are case-insensitive: a name taken in any case is taken.
            if f.name.lower() in {n.lower() for n in library.udfs}:
                continue
            code = UdfCode(where, start, text, module, f.name)
            library.udfs[f.name] = UdfDef(
                f.name, code, f.kind, f.args, f.returns, f.concurrency, f.timeout, f.line
            )
    if diagnostics:
        raise PlanningError(diagnostics)
    if install:
        try:
            library.deps_dir = install_dependencies(deps)
        except UdfTypeError as err:
            raise _udf_error(path, 1, f"dependencies: {err}") from err
    return library


# Each section's module, once per process: (module, its text) -> its namespace, or the error
# that running it raised.
_MODULES: dict[tuple[str, str], dict[str, Any] | RuntimeError] = {}


def function(code: UdfCode) -> Callable[..., Any]:
    """The UDF's function, running its section as a module the first time this process asks
    (Spark's Python workers do; no Arroyo service does). A section that fails to run fails
    every call of its UDFs, naming the UDF, the line and the error."""
    key = (code.module, code.text)
    namespace = _MODULES.get(key)
    if namespace is None:
        module = types.ModuleType(code.module)
        module.__file__ = code.where
        try:
            exec(compile("\n" * (code.start - 1) + code.text, code.where, "exec"), module.__dict__)
            namespace = module.__dict__
        except Exception as err:
            line = getattr(err, "lineno", None) or _traceback_line(err, code.where)
            namespace = RuntimeError(
                f"{UDF_ERROR}{code.name}' could not be loaded: {code.where}:{line}: "
                f"{type(err).__name__}: {err}"
            )
        _MODULES[key] = namespace
    if isinstance(namespace, RuntimeError):
        raise namespace
    return typing.cast(Callable[..., Any], namespace[code.name])


def _traceback_line(err: BaseException, path: str) -> int:
    tb = err.__traceback__
    line = 1
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _udf_error(path: str, line: int, message: str) -> PlanningError:
    return PlanningError([Diagnostic("bad_udf", f"{path}:{line}: {message}", None)])


# -- registration ----------------------------------------------------------------------------


def register(spark: SparkSession, library: UdfLibrary) -> None:
    """Register every UDF of ``library`` with ``spark`` under the name the planner's rewrite
    calls (``arroyo.sql.functions.udf_function_name``)."""
    from pyspark.sql import functions as F

    from arroyo.sql.functions import udf_function_name

    if library.deps_dir is not None:
        archive = _zip_dir(library.deps_dir)
        spark.sparkContext.addPyFile(str(archive))
    for name, u in library.udfs.items():
        if u.kind == "async":
            wrapper = _async_udf(u)
        elif u.kind == "udaf":
            wrapper = F.udf(_aggregate_call(u), u.returns.spark, useArrow=True)
        elif not u.args:
            # An Arrow batch of no columns has no length to map over: Spark calls it per row.
            wrapper = F.udf(_scalar_call(u), u.returns.spark, useArrow=True)
        else:
            wrapper = _vectorised_udf(u)
        spark.udf.register(udf_function_name(name), wrapper)


def _zip_dir(directory: Path) -> Path:
    import shutil

    archive = directory.with_suffix(".zip")
    if not archive.exists():
        shutil.make_archive(str(directory), "zip", directory)
    return archive


def _failure(name: str, args: tuple[Any, ...], err: BaseException) -> RuntimeError:
    shown = ", ".join(repr(a) for a in args)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return RuntimeError(
        f"{UDF_ERROR}{name}' failed on input ({shown}): {type(err).__name__}: {err}"
    )


def _plain(value: Any) -> Any:
    """Arrow and pandas values as the plain Python values the annotations promise."""
    if value is None:
        return None
    if hasattr(value, "tolist") and not isinstance(value, bytes | str):
        return value.tolist()
    if hasattr(value, "to_pydatetime"):
        return value.to_pydatetime()
    return value


def _scalar_call(u: UdfDef) -> Callable[..., Any]:
    """A UDF of no arguments, which Spark calls per row (see ``register``)."""
    code, name = u.code, u.name
    return lambda: _call(function(code), name, ())


def _vectorised_udf(u: UdfDef) -> Any:
    """A scalar UDF as an Arrow UDF: one Python call per Arrow batch, which maps the user's
    function over the batch's rows as plain Python values.

    Spark's Arrow-optimised ``udf`` does the same conversions but calls back into Python per
    row, and our per-row wrapper (strict nulls, the error naming the input) doubled that; here
    the wrapper runs once per batch, and per row only when a strict argument has nulls or a call
    has failed and the failing row must be found to name it (the batch's rows before it are
    called again then, which a function with side effects would notice). Timestamps, top-level
    ones, arrive as naive UTC datetimes (the session's time zone is UTC)."""
    from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import _parse_datatype_string

    code, name = u.code, u.name
    strict = [i for i, a in enumerate(u.args) if not a.nullable]
    returns = to_arrow_type(_parse_datatype_string(u.returns.spark))
    naive = [a.spark == "TIMESTAMP" for a in u.args]

    def run(*arrays: Any) -> Any:
        func = function(code)
        columns = [
            _naive_utc(a) if is_ts else a.to_pylist()
            for a, is_ts in zip(arrays, naive, strict=True)
        ]
        if any(arrays[i].null_count for i in strict):
            skip = [any(columns[i][row] is None for i in strict) for row in range(len(arrays[0]))]
            rows = zip(*columns, strict=True)
            results = [None if s else _call(func, name, r) for s, r in zip(skip, rows, strict=True)]
        else:
            try:
                results = list(map(func, *columns))
            except Exception:
                # Find the row that fails, to name it in the error.
                results = [_call(func, name, r) for r in zip(*columns, strict=True)]
        try:
            return _as_arrow(results, returns)
        except _NotOfTypeError as err:
            raise _bad_result(u, returns, columns, results) from err

    with warnings.catch_warnings():
        # It prefers type hints, which cannot describe varargs.
        warnings.simplefilter("ignore", UserWarning)
        return arrow_udf(run, u.returns.spark, ArrowUDFType.SCALAR)


def _as_arrow(results: list[Any], returns: Any) -> Any:
    """The results as an Arrow array of the declared type. Converting straight to the type
    would truncate (1.5 becomes 1 for ``-> int``); inferring, then a safe cast, refuses that."""
    import pyarrow as pa

    try:
        return pa.array(results).cast(returns, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as err:
        raise _NotOfTypeError(str(err)) from err


class _NotOfTypeError(ValueError):
    pass


def _bad_result(u: UdfDef, returns: Any, columns: list[list[Any]], results: list[Any]) -> Exception:
    """The error for a result that is not of the declared type, naming the first such row."""

    for row, result in enumerate(results):
        try:
            _as_arrow([result], returns)
        except _NotOfTypeError as err:
            args = tuple(c[row] for c in columns)
            return _failure(
                u.name, args, TypeError(f"returned {result!r}, not {u.returns.spark}: {err}")
            )
    return RuntimeError(f"{UDF_ERROR}{u.name}' returned values not of type {u.returns.spark}")


def _naive_utc(array: Any) -> list[Any]:
    """Timestamps as naive UTC datetimes, as Spark's row-at-a-time UDFs hand them over."""
    return [None if v is None else v.replace(tzinfo=None) for v in array.to_pylist()]


def _call(func: Callable[..., Any], name: str, args: tuple[Any, ...]) -> Any:
    try:
        return func(*args)
    except Exception as err:
        raise _failure(name, args, err) from err


def _aggregate_call(u: UdfDef) -> Callable[..., Any]:
    """Called with one list per argument (several arguments come zipped in structs)."""
    code, name, width = u.code, u.name, len(u.args)

    def call(values: Any) -> Any:
        func = function(code)
        rows = list(values or [])
        if width == 1:
            columns: tuple[Any, ...] = (rows,)
        else:
            columns = tuple([r[i] for r in rows] for i in range(width))
        try:
            return func(*columns)
        except Exception as err:
            raise _failure(name, columns, err) from err

    return call


def _async_udf(u: UdfDef) -> Any:
    import pandas as pd  # type: ignore[import-untyped]
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    code, name, strict = u.code, u.name, [not a.nullable for a in u.args]
    concurrency, timeout = u.concurrency, u.timeout

    def run(*columns: Any) -> Any:
        func = function(code)
        rows = list(zip(*[[_plain(v) for v in c.tolist()] for c in columns], strict=True))

        async def main() -> list[Any]:
            gate = asyncio.Semaphore(concurrency)

            async def one(args: tuple[Any, ...]) -> Any:
                if any(a is None and s for a, s in zip(args, strict, strict=True)):
                    return None
                async with gate:
                    try:
                        return await asyncio.wait_for(func(*args), timeout)
                    except TimeoutError as err:
                        raise _failure(
                            name, args, TimeoutError(f"no result in {timeout} s")
                        ) from err
                    except Exception as err:
                        raise _failure(name, args, err) from err

            return list(await asyncio.gather(*(one(r) for r in rows)))

        return pd.Series(asyncio.run(main()), dtype=object)

    # The signature (varargs) cannot be inferred from hints: say it is a scalar pandas UDF.
    with warnings.catch_warnings():
        # It prefers type hints, which cannot describe varargs.
        warnings.simplefilter("ignore", UserWarning)
        return pandas_udf(run, u.returns.spark, PythonEvalType.SQL_SCALAR_PANDAS_UDF)
