"""Strings, binary strings and hashes as DataFusion computes them.

Most string functions mean the same in Spark (sqlglot renames ``strpos``, ``btrim``,
``starts_with``... and makes ``concat`` skip NULLs as DataFusion does); the rest differ at the
edges: negative lengths of ``left``/``right``, positions before 1 in ``substr``, words split on
any non-alphanumeric character in ``initcap``, code points above 255 in ``chr``, lower-case
``to_hex``, ``encode``/``decode`` (base64 without padding, hex), and the SHA-2 family, which
answers BINARY in DataFusion (``md5`` alone answers hex text).
"""

from __future__ import annotations

from sqlglot import exp

from arroyo.sql.functions.core import Call, Rewrite, func, renamed, spark, template, typed

# The character of a Unicode code point (Spark's ``chr`` takes the code modulo 256).
_chr = template(
    "IF({0} BETWEEN 0 AND 255, chr({0}), decode(unhex(lpad(hex({0}), 8, '0')), 'utf-32'))",
    "string",
    arity=1,
)


# Upper case after any character that is not a letter or digit, lower case elsewhere.
_initcap = template(
    "element_at(transform(array(split({0}, '')), __c -> array_join(transform(__c, "
    "(__ch, __i) -> IF(__i = 0 OR NOT __c[__i - 1] RLIKE "
    "'[\\\\p{{IsAlphabetic}}\\\\p{{N}}]', upper(__ch), lower(__ch))), '')), 1)",
    "string",
    arity=1,
)


# A negative length leaves out that many characters at the end.
_left = template(
    "IF({1} < 0, substr({0}, 1, greatest(char_length({0}) + {1}, 0)), left({0}, {1}))",
    "string",
    arity=2,
)


# A negative length leaves out that many characters at the start.
_right = template("IF({1} < 0, substr({0}, 1 - {1}), right({0}, {1}))", "string", arity=2)


def _substr(call: Call) -> exp.Expr:
    """Characters from position ``start`` (1-based) for ``length``: positions before 1 count
    toward the length (Postgres and DataFusion), where Spark reads a negative start from the
    end of the string."""
    call.arity(2, 3)
    start = call.args[1]
    literal = start.this if isinstance(start, exp.Literal) and not start.is_string else None
    if literal is not None and str(literal).isdigit() and int(str(literal)) >= 1:
        parts = [call.arg(0), call.arg(1)] + ([call.arg(2)] if len(call.args) == 3 else [])
        return typed(func("substr", *parts), "string")
    if len(call.args) == 2:
        return typed(spark("substr({0}, greatest({1}, 1))", call.arg(0), call.arg(1)), "string")
    return typed(
        spark(
            "substr({0}, greatest({1}, 1), greatest({1} + {2} - greatest({1}, 1), 0))",
            call.arg(0),
            call.arg(1),
            call.arg(2),
        ),
        "string",
    )


# Lower-case hex digits (two's complement for negative numbers, as Spark's ``hex``).
_to_hex = template("lower(hex({0}))", "string", arity=1)


def _format(call: Call) -> str:
    name = call.literal(1, "format").lower()
    if name not in ("base64", "hex"):
        raise call.fail(f"unknown format '{name}': use 'base64' or 'hex'", call.args[1])
    return name


def _encode(call: Call) -> exp.Expr:
    """Text of binary data: base64 without padding (as DataFusion writes it) or lower-case hex."""
    call.arity(2)
    if _format(call) == "hex":
        return typed(spark("lower(hex({0}))", call.arg(0)), "string")
    # Spark breaks lines every 76 characters and pads with '='; DataFusion does neither.
    return typed(spark("translate(base64({0}), '\\r\\n=', '')", call.arg(0)), "string")


def _decode(call: Call) -> exp.Expr:
    call.arity(2)
    spark_name = "unhex" if _format(call) == "hex" else "unbase64"
    return typed(func(spark_name, call.arg(0)), "binary")


_DIGESTS = {"sha224": 224, "sha256": 256, "sha384": 384, "sha512": 512}


def _sha_of(value: exp.Expr, bits: int) -> exp.Expr:
    return typed(spark("unhex(sha2({0}, {1}))", value, bits), "binary")


def _sha(bits: int) -> Rewrite:
    """The digest as BINARY, as DataFusion answers it (Spark's ``sha2`` answers hex text)."""

    def rewrite(call: Call) -> exp.Expr:
        call.arity(1)
        return _sha_of(call.arg(0), bits)

    return rewrite


def _digest(call: Call) -> exp.Expr:
    """``digest(x, algorithm)``: the digest as BINARY."""
    call.arity(2)
    algorithm = call.literal(1, "algorithm").lower()
    if algorithm == "md5":
        return typed(spark("unhex(md5({0}))", call.arg(0)), "binary")
    if algorithm in _DIGESTS:
        return _sha_of(call.arg(0), _DIGESTS[algorithm])
    if algorithm in ("blake2s", "blake2b", "blake3"):
        raise call.fail(
            f"Spark has no {algorithm} digest; use digest(x, 'sha256') (or another SHA-2 or md5)",
            call.args[1],
        )
    raise call.fail(
        f"unknown algorithm '{algorithm}': use md5, sha224, sha256, sha384 or sha512",
        call.args[1],
    )


REWRITES: dict[str, Rewrite] = {
    "chr": _chr,
    "initcap": _initcap,
    "left": _left,
    "right": _right,
    "substr": _substr,
    "to_hex": _to_hex,
    "substr_index": renamed("substring_index"),
    "encode": _encode,
    "decode": _decode,
    "digest": _digest,
    **{name: _sha(bits) for name, bits in _DIGESTS.items()},
}
