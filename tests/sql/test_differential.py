"""The windowed golden outputs, recomputed by an independent engine (DuckDB) from the same
inputs: the golden files are checked, not just trusted from our own output."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from typing import Any

import duckdb
import pytest

from tests.sql.harness import GOLDEN, INPUTS


def _golden(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLDEN / f"{name}.json").read_text().splitlines()]


def _events() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()
    db.execute(f"CREATE TABLE events AS SELECT * FROM read_json_auto('{INPUTS / 'events.json'}')")
    return db


def _ts(value: Any) -> str:
    return str(value).replace(" ", "T")


def test_tumble_count_matches_duckdb() -> None:
    rows = (
        _events()
        .execute("""
        SELECT time_bucket(INTERVAL 1 MINUTE, ts::TIMESTAMP) AS start, "user", count(*),
               round(sum(amount), 2)
        FROM events GROUP BY ALL""")
        .fetchall()
    )
    expected = Counter((_ts(s), u, c, t) for s, u, c, t in rows)
    got = Counter(
        (r["window"]["start"], r["user"], r["events"], r["total"]) for r in _golden("tumble_count")
    )
    assert got == expected


def test_hop_window_matches_duckdb() -> None:
    db = _events()
    rows = db.execute("""
        WITH starts AS (
            SELECT DISTINCT time_bucket(INTERVAL 30 SECOND, ts::TIMESTAMP) - INTERVAL 30 SECOND * k
                   AS start
            FROM events, range(4) AS r(k))
        SELECT start, count(*), max(amount) FROM starts JOIN events
          ON ts::TIMESTAMP >= start AND ts::TIMESTAMP < start + INTERVAL 2 MINUTE
        GROUP BY start""").fetchall()
    expected = Counter((_ts(s), c, m) for s, c, m in rows)
    got = Counter((r["window"]["start"], r["c"], r["biggest"]) for r in _golden("hop_window"))
    assert got == expected


def test_session_window_matches_a_direct_computation() -> None:
    rows = (
        _events()
        .execute("""
        SELECT kind, ts::TIMESTAMP FROM events WHERE "user" = 'alice' ORDER BY kind, ts""")
        .fetchall()
    )
    sessions: list[tuple[str, Any, Any, int]] = []
    for kind, ts in rows:
        last = sessions[-1] if sessions else None
        # A session stays open until gap after its last event, and an event at exactly that
        # moment still joins it (Spark merges touching session windows).
        if last and last[0] == kind and (ts - last[2]).total_seconds() <= 20:
            sessions[-1] = (kind, last[1], ts, last[3] + 1)
        else:
            sessions.append((kind, ts, ts, 1))
    expected = Counter((k, _ts(start), c, _ts(last)) for k, start, last, c in sessions)
    got = Counter(
        (r["kind"], r["window"]["start"], r["c"], _minus_seconds(r["window"]["end"], 20))
        for r in _golden("session_window")
    )
    assert got == expected


def _minus_seconds(iso: str, seconds: int) -> str:
    return (dt.datetime.fromisoformat(iso) - dt.timedelta(seconds=seconds)).isoformat()


def test_busiest_users_per_hop_window_match_duckdb() -> None:
    """windowed_local_join (Nexmark q5's shape), which the engine runs per micro-batch."""
    rows = (
        _events()
        .execute("""
        WITH starts AS (
            SELECT DISTINCT time_bucket(INTERVAL 30 SECOND, ts::TIMESTAMP) - INTERVAL 30 SECOND * k
                   AS start
            FROM events, range(4) AS r(k)),
        counts AS (
            SELECT start, "user", count(*) AS c FROM starts JOIN events
              ON ts::TIMESTAMP >= start AND ts::TIMESTAMP < start + INTERVAL 2 MINUTE
            GROUP BY ALL)
        SELECT start, "user", c FROM counts
        WHERE c >= (SELECT max(c) FROM counts AS m WHERE m.start = counts.start)""")
        .fetchall()
    )
    expected = Counter((_ts(s), u, c) for s, u, c in rows)
    got = Counter((r["start"], r["user"], r["c"]) for r in _golden("windowed_local_join"))
    assert got == expected


@pytest.mark.parametrize(("case", "extreme"), [("top", "max"), ("bottom", "min")])
def test_rows_holding_each_windows_extreme_match_duckdb(case: str, extreme: str) -> None:
    """windowed_top_rows and windowed_bottom_rows (Nexmark q7's shape), which the engine runs
    over an aggregate that keeps only each window's extreme rows: every distinct row at the
    extreme, ties included."""
    rows = (
        _events()
        .execute(f"""
        WITH seen AS (
            SELECT DISTINCT time_bucket(INTERVAL 30 SECOND, ts::TIMESTAMP) AS start, "user",
                   kind, device.version AS version
            FROM events)
        SELECT start, "user", kind, version FROM seen
        WHERE version = (SELECT {extreme}(version) FROM seen AS m WHERE m.start = seen.start)""")
        .fetchall()
    )
    expected = Counter((_ts(s), u, k, v) for s, u, k, v in rows)
    golden = _golden(f"windowed_{case}_rows")
    got = Counter((r["start"], r["user"], r["kind"], r["version"]) for r in golden)
    assert got == expected
    assert all(r["top"] == r["version"] for r in golden)
    assert sum(expected.values()) > len({s for s, *_ in expected}), "no window has a tie"


def test_latest_event_per_user_and_kind_matches_duckdb() -> None:
    """updating_last_per_key (Nexmark q18's shape: ROW_NUMBER() = 1 without windows), which the
    engine runs as an updating max_by aggregate: the changes, replayed, give the batch result."""
    rows = (
        _events()
        .execute("""
        SELECT "user", kind, id, amount, rn FROM (
            SELECT "user", kind, id, amount,
                   ROW_NUMBER() OVER (PARTITION BY "user", kind ORDER BY ts DESC, id DESC) AS rn
            FROM events WHERE amount > 10)
        WHERE rn = 1""")
        .fetchall()
    )
    expected = Counter(rows)
    got = Counter(
        (r["user"], r["kind"], r["id"], r["amount"], r["rn"])
        for r in _golden("updating_last_per_key")
    )
    assert got == expected


def test_top_three_amounts_per_user_match_duckdb() -> None:
    """updating_top_n (Nexmark q19's shape: ROW_NUMBER() <= 3 without windows), which the engine
    runs as an updating max_by(row, amount, 3) aggregate, one row per rank."""
    rows = (
        _events()
        .execute("""
        SELECT "user", rn, id, amount FROM (
            SELECT "user", id, amount,
                   ROW_NUMBER() OVER (PARTITION BY "user" ORDER BY amount DESC) AS rn
            FROM events)
        WHERE rn <= 3""")
        .fetchall()
    )
    expected = Counter(rows)
    got = Counter((r["user"], r["rn"], r["id"], r["amount"]) for r in _golden("updating_top_n"))
    assert got == expected


def _with_users() -> duckdb.DuckDBPyConnection:
    db = _events()
    db.execute(f"CREATE TABLE users AS SELECT * FROM read_json_auto('{INPUTS / 'users.json'}')")
    return db


def test_stream_left_join_lookup_table_matches_duckdb() -> None:
    """lookup_join: every event once, with its user's row or NULLs (carol has none)."""
    rows = (
        _with_users()
        .execute("""
        SELECT e.id, e."user", u.country, u.tier, e.amount
        FROM events AS e LEFT JOIN users AS u ON e."user" = u.name""")
        .fetchall()
    )
    got = Counter(
        (r["id"], r["user"], r["country"], r["tier"], r["amount"]) for r in _golden("lookup_join")
    )
    assert got == Counter(rows)
    assert any(country is None for _, _, country, _, _ in rows)


def test_windowed_aggregate_over_a_lookup_join_matches_duckdb() -> None:
    rows = (
        _with_users()
        .execute("""
        SELECT time_bucket(INTERVAL 1 MINUTE, e.ts::TIMESTAMP) AS start, u.country, count(*),
               round(sum(e.amount), 2)
        FROM events AS e JOIN users AS u ON e."user" = u.name GROUP BY ALL""")
        .fetchall()
    )
    expected = Counter((_ts(s), c, n, t) for s, c, n, t in rows)
    got = Counter(
        (r["window"]["start"], r["country"], r["events"], r["spent"])
        for r in _golden("lookup_windowed_join")
    )
    assert got == expected


def _orders_and_payments() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()
    for table in ("orders", "payments"):
        db.execute(
            f"CREATE TABLE {table} AS SELECT * FROM read_json_auto('{INPUTS / f'{table}.json'}')"
        )
    return db


def test_aggregate_over_an_unwindowed_join_matches_duckdb() -> None:
    rows = (
        _orders_and_payments()
        .execute("""
        SELECT o.customer, p.method, count(*), sum(p.paid), max(o.total)
        FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
        WHERE p.paid > 11 GROUP BY ALL HAVING count(*) > 1""")
        .fetchall()
    )
    got = Counter(
        (r["customer"], r["method"], r["orders"], r["paid"], r["biggest"])
        for r in _golden("updating_join_aggregate")
    )
    assert got == Counter(rows)


def test_top_one_over_an_unwindowed_join_matches_duckdb() -> None:
    rows = (
        _orders_and_payments()
        .execute("""
        SELECT customer, method, order_id, paid FROM (
            SELECT o.customer, p.method, o.order_id, p.paid, row_number() OVER (
                PARTITION BY o.customer, p.method ORDER BY p.paid DESC) AS rn
            FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id)
        WHERE rn = 1""")
        .fetchall()
    )
    got = Counter(
        (r["customer"], r["method"], r["order_id"], r["paid"])
        for r in _golden("updating_join_top_n")
    )
    assert got == Counter(rows)


def test_aggregate_over_an_updating_aggregate_over_a_join_matches_duckdb() -> None:
    rows = (
        _orders_and_payments()
        .execute("""
        SELECT customer, avg(biggest), count(*) FROM (
            SELECT o.customer AS customer, p.method AS method, max(p.paid) AS biggest
            FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id GROUP BY ALL)
        GROUP BY customer""")
        .fetchall()
    )
    got = Counter(
        (r["customer"], r["avg_biggest"], r["methods"])
        for r in _golden("updating_join_nested_aggregate")
    )
    assert got == Counter(rows)


def test_top_two_over_an_updating_aggregate_over_a_join_match_duckdb() -> None:
    rows = (
        _orders_and_payments()
        .execute("""
        SELECT method, rn, customer, paid FROM (
            SELECT method, customer, paid, row_number() OVER (
                PARTITION BY method ORDER BY paid DESC, customer DESC) AS rn
            FROM (SELECT p.method AS method, o.customer AS customer, sum(p.paid) AS paid
                  FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id GROUP BY ALL))
        WHERE rn <= 2""")
        .fetchall()
    )
    got = Counter(
        (r["method"], r["rn"], r["customer"], r["paid"])
        for r in _golden("updating_join_aggregate_top_n")
    )
    assert got == Counter(rows)


def test_a_join_bounded_in_event_time_matches_duckdb() -> None:
    rows = (
        _orders_and_payments()
        .execute("""
        SELECT a.customer, a.order_id, b.order_id FROM orders AS a JOIN orders AS b
        ON a.customer = b.customer
        WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE""")
        .fetchall()
    )
    got = Counter(
        (r["customer"], r["first"], r["next"]) for r in _golden("unwindowed_interval_join")
    )
    assert len(rows) > 30  # each order meets itself and, mostly, the next one
    assert got == Counter(rows)


def test_an_aggregate_over_an_updating_aggregate_matches_duckdb() -> None:
    rows = (
        _events()
        .execute("""
        SELECT n, count(*) FROM (SELECT "user", count(*) AS n FROM events GROUP BY "user")
        GROUP BY n""")
        .fetchall()
    )
    got = Counter((r["n"], r["users"]) for r in _golden("updating_aggregate_of_aggregate"))
    assert got == Counter(rows)


def test_an_aggregate_over_a_filtered_changelog_matches_its_final_table() -> None:
    table: dict[int, dict[str, Any]] = {}
    for line in (INPUTS / "cdc.json").read_text().splitlines():
        change = json.loads(line)
        if change["after"] is None:
            del table[change["before"]["id"]]
        else:
            table[change["after"]["id"]] = change["after"]
    big = [p["qty"] for p in table.values() if p["qty"] >= 3]
    assert _golden("updating_cdc_view_aggregate") == [{"products": len(big), "total": sum(big)}]


def test_an_aggregate_of_an_updating_aggregate_matches_duckdb() -> None:
    """updating_aggregate_of_aggregate_functions: the inner aggregate runs as the retracting
    aggregate in the outer one's query; its changes, retracted and replayed, give the batch
    result of the nested aggregate."""
    rows = (
        _events()
        .execute("""
        SELECT "user", count(*), sum(n), sum(priced), sum(ids), round(sum(total), 2),
               round(avg(mean), 4), sum(first_id), sum(last_id), count(last_ts)
        FROM (
            SELECT "user", kind, count(*) AS n, count(amount) AS priced, sum(id) AS ids,
                   sum(amount) AS total, avg(amount) AS mean, min(id) AS first_id,
                   max(id) AS last_id, max(ts) AS last_ts
            FROM events GROUP BY "user", kind)
        GROUP BY "user" """)
        .fetchall()
    )
    got = Counter(
        (
            r["user"],
            r["kinds"],
            r["events"],
            r["priced"],
            r["ids"],
            r["total"],
            r["mean_of_means"],
            r["first_ids"],
            r["last_ids"],
            r["timed"],
        )
        for r in _golden("updating_aggregate_of_aggregate_functions")
    )
    assert got == Counter(rows)


def test_an_aggregate_of_an_updating_aggregate_with_having_matches_duckdb() -> None:
    """updating_having_aggregate_of_aggregate: rows the inner HAVING drops leave the outer
    aggregate (through a stage of change records)."""
    rows = (
        _events()
        .execute("""
        SELECT "user", count(*), sum(n) FROM (
            SELECT "user", kind, count(*) AS n FROM events GROUP BY "user", kind
            HAVING sum(amount) < 250)
        GROUP BY "user" """)
        .fetchall()
    )
    got = Counter(
        (r["user"], r["small_kinds"], r["events"])
        for r in _golden("updating_having_aggregate_of_aggregate")
    )
    assert got == Counter(rows)
    assert rows, "no user has a kind under 250"


def test_an_aggregate_over_a_join_of_three_streams_matches_duckdb() -> None:
    """updating_three_way_join_aggregate: each paid order with each of its customer's events."""
    db = _events()
    for table in ("orders", "payments"):
        db.execute(f"CREATE TABLE {table} AS SELECT * FROM read_json_auto('{INPUTS / table}.json')")
    rows = db.execute("""
        SELECT o.customer, count(*), sum(p.paid), count(DISTINCT e.kind)
        FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
        JOIN events AS e ON e."user" = o.customer
        GROUP BY o.customer""").fetchall()
    got = Counter(
        (r["customer"], r["pairs"], r["paid"], r["kinds"])
        for r in _golden("updating_three_way_join_aggregate")
    )
    assert got == Counter(rows)
