# A UDF file as users write it (loaded by the tests, not imported).
# /// script
# dependencies = ["inflection==0.5.1"]
# ///
import asyncio
from datetime import datetime, timedelta

import inflection

from arroyo_udf import udaf, udf


@udf
def double(x: int) -> int:
    return x * 2


@udf
def shout(name: str | None) -> str:
    return "NOBODY" if name is None else name.upper() + "!"


@udf
def plural(word: str) -> str:
    return inflection.pluralize(word)


@udf
def minute_of(ts: datetime) -> int:
    return ts.minute


@udf
def an_hour_later(ts: datetime) -> datetime:
    return ts + timedelta(hours=1)


@udf
def size(data: bytes) -> int:
    return len(data)


@udf
def total(values: list[str]) -> int:
    return sum(len(v) for v in values)


@udf
def tags(n: int) -> list[str]:
    return [f"t{i}" for i in range(n % 3)]


@udf(concurrency=4, timeout=5.0)
async def slow_square(x: int) -> int:
    await asyncio.sleep(0.01 * (x % 3))
    return x * x


@udaf
def spread(values: list[float]) -> float:
    return max(values) - min(values)


@udaf
def weighted(values: list[float], weights: list[int]) -> float:
    return sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)
