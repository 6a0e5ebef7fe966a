"""String, binary-string, hashing and regular-expression functions on Spark, against
DataFusion's answers (its function reference's examples where it gives them): ``concat`` skips
NULLs, the SHA-2 family answers BINARY, ``regexp_replace`` replaces the first match unless
given the flag ``g``."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.sql.functions import FunctionError
from tests.sql.functions_support import check, create_tables, evaluate_all, translated, values


def _digest(name: str) -> bytes:
    return hashlib.new(name, b"abc").digest()


# Rows (ordered by s): s = 'ab-12', 'cd-34', 'ef'.
CASES: list[tuple[str, Any]] = [
    ("ascii('a')", [97] * 3),
    ("bit_length('abc')", [24] * 3),
    ("btrim('  x  ')", ["x"] * 3),
    ("btrim('xxhixx', 'x')", ["hi"] * 3),
    ("trim('  x  ')", ["x"] * 3),
    ("length('héllo')", [5] * 3),
    ("char_length(s)", [5, 5, 2]),
    ("character_length('héllo')", [5] * 3),
    ("octet_length('héllo')", [6] * 3),
    ("concat(s, NULL, '!')", ["ab-12!", "cd-34!", "ef!"]),
    ("concat(NULL, NULL)", [""] * 3),
    ("concat_ws('/', s, NULL, 'z')", ["ab-12/z", "cd-34/z", "ef/z"]),
    ("chr(65)", ["A"] * 3),
    ("chr(128512)", ["\U0001f600"] * 3),
    ("ends_with(s, '12')", [True, False, False]),
    ("starts_with(s, 'cd')", [False, True, False]),
    ("initcap('hello wORLD-foo o''neil 1st')", ["Hello World-Foo O'Neil 1st"] * 3),
    ("instr(s, '-')", [3, 3, 0]),
    ("strpos(s, '34')", [0, 4, 0]),
    ("position('-' IN s)", [3, 3, 0]),
    ("left(s, 2)", ["ab", "cd", "ef"]),
    ("left(s, -2)", ["ab-", "cd-", ""]),
    ("right(s, 2)", ["12", "34", "ef"]),
    ("right(s, -2)", ["-12", "-34", ""]),
    ("lower('AbC')", ["abc"] * 3),
    ("upper(s)", ["AB-12", "CD-34", "EF"]),
    ("lpad('x', 3, 'ab')", ["abx"] * 3),
    ("lpad('hello', 2)", ["he"] * 3),
    ("rpad('x', 3)", ["x  "] * 3),
    ("ltrim('xxa', 'x')", ["a"] * 3),
    ("rtrim('axx', 'x')", ["a"] * 3),
    ("ltrim('  a ')", ["a "] * 3),
    ("repeat('ab', 3)", ["ababab"] * 3),
    ("replace(s, '-', '+')", ["ab+12", "cd+34", "ef"]),
    ("reverse('abc')", ["cba"] * 3),
    ("translate('abc', 'ab', 'xy')", ["xyc"] * 3),
    ("split_part(s, '-', 2)", ["12", "34", ""]),
    ("split_part('a-b-c', '-', -1)", ["c"] * 3),
    ("substr('alphabet', 3)", ["phabet"] * 3),
    ("substr('alphabet', 3, 2)", ["ph"] * 3),
    ("substr('alphabet', 0, 3)", ["al"] * 3),
    ("substr('alphabet', -1, 3)", ["a"] * 3),
    ("substring('alphabet' FROM 2 FOR 3)", ["lph"] * 3),
    ("to_hex(255)", ["ff"] * 3),
    ("to_hex(-1)", ["ffffffffffffffff"] * 3),
    ("length(uuid())", [36] * 3),
    ("overlay('Txxxxas' PLACING 'hom' FROM 2 FOR 4)", ["Thomas"] * 3),
    ("levenshtein('kitten', 'sitting')", [3] * 3),
    ("substr_index('www.apache.org', '.', 1)", ["www"] * 3),
    ("substr_index('www.apache.org', '.', -1)", ["org"] * 3),
    ("find_in_set('b', 'a,b,c,d')", [2] * 3),
    # binary strings: base64 without padding, lower-case hex; decode answers BINARY
    ("encode('hello', 'base64')", ["aGVsbG8"] * 3),
    ("encode('hello', 'hex')", ["68656c6c6f"] * 3),
    ("decode('aGVsbG8', 'base64')", [bytearray(b"hello")] * 3),
    ("decode('68656c6c6f', 'hex')", [bytearray(b"hello")] * 3),
    # hashes: md5 answers hex text, the SHA-2 family and digest BINARY
    ("md5('abc')", ["900150983cd24fb0d6963f7d28e17f72"] * 3),
    ("sha224('abc')", [bytearray(_digest("sha224"))] * 3),
    ("sha256('abc')", [bytearray(_digest("sha256"))] * 3),
    ("sha384('abc')", [bytearray(_digest("sha384"))] * 3),
    ("sha512('abc')", [bytearray(_digest("sha512"))] * 3),
    ("digest('abc', 'sha256')", [bytearray(_digest("sha256"))] * 3),
    ("digest('abc', 'md5')", [bytearray(_digest("md5"))] * 3),
    # regular expressions
    ("regexp_like(s, '^[a-z]+$')", [False, False, True]),
    ("regexp_like('Köln', '[a-zA-Z]ö[a-zA-Z]{2}')", [True] * 3),
    ("regexp_like('aBc', '(b|d)', 'i')", [True] * 3),
    ("regexp_match(s, '([a-z]+)-([0-9]+)')", [["ab", "12"], ["cd", "34"], None]),
    ("regexp_match('Köln', '[a-zA-Z]ö[a-zA-Z]{2}')", [["Köln"]] * 3),
    ("regexp_match('aBc', '(b|d)', 'i')", [["B"]] * 3),
    ("regexp_match('ab', '(?P<first>a)(b)')", [["a", "b"]] * 3),
    ("regexp_replace(s, '[0-9]', '#')", ["ab-#2", "cd-#4", "ef"]),
    ("regexp_replace(s, '[0-9]', '#', 'g')", ["ab-##", "cd-##", "ef"]),
    ("regexp_replace('foobarbaz', 'b(..)', 'X\\1Y', 'g')", ["fooXarYXazY"] * 3),
    ("regexp_replace('foobarbaz', 'b(..)', 'X\\1Y')", ["fooXarYbaz"] * 3),
    ("regexp_replace('aBc', '(b|d)', 'Ab\\1a', 'i')", ["aAbBac"] * 3),
    ("regexp_replace('a.b', '\\.', '$')", ["a$b"] * 3),
    ("regexp_replace(concat('x', chr(10), 'y'), '^y', 'z', 'm')", ["x\nz"] * 3),
    ("regexp_replace(concat('x', chr(10), 'y'), '^y', 'z')", ["x\ny"] * 3),
    ("regexp_count('abcabc', 'b')", [2] * 3),
]


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, Any]:
    create_tables(spark)
    return evaluate_all(spark, [c[0] for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0] for c in CASES])
def test_string_function(results: dict[str, Any], expression: str, expected: Any) -> None:
    check(values(results, expression), expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("digest(s, 'crc')", "unknown algorithm 'crc'"),
        ("digest(s, 'blake3')", "no blake3 digest"),
        ("encode(s, 'escape')", "unknown format 'escape'"),
        ("regexp_like(s, 'a', 'U')", "flag 'U' has no equivalent"),
        ("regexp_match(s, s)", "pattern must be a literal"),
        ("regexp_replace(s, 'a', s)", "replacement must be a literal"),
    ],
)
def test_unmappable_string_calls_are_refused(expression: str, message: str) -> None:
    with pytest.raises(FunctionError, match=message):
        translated(f"SELECT {expression} FROM t")
