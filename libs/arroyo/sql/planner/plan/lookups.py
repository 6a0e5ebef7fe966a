"""Joins with key-value lookup tables (``Capabilities.lookup_by_key``: Redis), as Arroyo runs
them: each stream row's key is looked up when its micro-batch runs, a batch of keys at a time,
never the whole table read.

``stream s [LEFT] JOIN t ON s.k = t.key_column`` becomes a projection of the stream that adds
each row's record, fetched by the engine's lookup function (``names.lookup_function``), and
the query reads the lookup table's columns out of it: the key column is the key looked up, the
others the record decoded in the table's format. A key with no record gives nulls, which an
inner join filters out and a LEFT JOIN keeps. A record the format cannot decode (a JSON table's
value that is not JSON, or not of the table's types) is bad data: ``bad_data = 'fail'`` fails
the job naming the table, the system and the key; ``'drop'`` treats the key as having no record
(Arroyo's deserializer drops it from the lookup's rows). Refused, as Arroyo refuses them: a
join on anything but the table's PRIMARY KEY, a condition that is not one equality, and joins
other than inner and left with the lookup table on the right.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arroyo.connectors import connector
from arroyo.program.names import LOOKUP, lookup_function, quote_name
from arroyo.sql.planner.diagnostics import ErrorCode, error, span_of
from arroyo.sql.planner.syntax import from_clause

if TYPE_CHECKING:
    from arroyo.program.spec import TableSpec
    from arroyo.sql.planner.context import PlanContext
    from arroyo.sql.planner.relations import Relation


def key_lookup_table(ctx: PlanContext, node: exp.Expression) -> TableSpec | None:
    """The key-value lookup table a FROM item names, if it names one."""
    if not isinstance(node, exp.Table):
        return None
    spec = ctx.names.tables.get(node.name)
    if spec is None or not spec.is_lookup:
        return None
    conn = connector(spec.connector)
    return spec if conn is not None and conn.capabilities.lookup_by_key else None


def refuse_read_whole(ctx: PlanContext, select: exp.Select) -> None:
    """A key-value lookup table has no rows to read but those asked for by key."""
    for table in select.find_all(exp.Table):
        if key_lookup_table(ctx, table) is not None:
            raise error(
                ErrorCode.LOOKUP_TABLE,
                f"lookup tables must be used directly within a join: '{table.name}' is read "
                f"by key, for each row of a stream joined with it",
                span_of(ctx.text, table),
            )


def rewrite_key_lookups(
    ctx: PlanContext, select: exp.Select, relations: list[Relation]
) -> list[Relation]:
    """Rewrites ``select``'s joins with key-value lookup tables (above); returns its relations
    without them."""
    joins = list(select.args.get("joins") or [])
    from_ = from_clause(select)
    first = from_.this if from_ is not None else None
    if first is not None and key_lookup_table(ctx, first) is not None and joins:
        raise error(
            ErrorCode.LOOKUP_OUTER_JOIN,
            "lookup sources must be on the right side of an inner or left join",
            span_of(ctx.text, first),
        )
    found = [
        (j, r) for j, r in zip(joins, relations[1:], strict=False) if key_lookup_table(ctx, j.this)
    ]
    if not found:
        return relations
    assert from_ is not None and first is not None
    stream = relations[0].alias
    if relations[0].static:
        raise error(
            ErrorCode.LOOKUP_OUTER_JOIN,
            "lookup sources must be on the right side of an inner or left join",
            span_of(ctx.text, first),
        )
    if relations[0].updating is not None:
        raise error(
            ErrorCode.LOOKUP_TABLE,
            "a key-value lookup join needs a stream of appended rows; this one reads an "
            "updating result",
            span_of(ctx.text, found[0][0]),
        )
    if len(joins) > len(found):
        raise error(
            ErrorCode.LOOKUP_TABLE,
            "a query with a key-value lookup join joins nothing else: join the streams in a "
            "view first, then look keys up from it",
            span_of(ctx.text, joins[0]),
        )
    added: list[exp.Expr] = [exp.column(exp.Star(), table=stream)]
    checked: list[exp.Expr] = []  # records checked for bad data, from the fetched ones
    values: dict[str, tuple[TableSpec, str, exp.Expression]] = {}
    inner: list[str] = []  # the records an inner join needs
    for join, rel in found:
        spec = key_lookup_table(ctx, join.this)
        assert spec is not None
        key, inner_join = _key_of(ctx, join, rel.alias, spec)
        for other in key.find_all(exp.Column):
            if other.table and other.table.lower() != stream.lower():
                raise error(
                    ErrorCode.LOOKUP_TABLE,
                    f"a lookup join's key comes from the stream ('{stream}'), not from "
                    f"'{other.table}': look the keys up in a view, then join that",
                    span_of(ctx.text, other),
                )
        hidden = f"{LOOKUP}{rel.alias}"
        call = exp.Anonymous(
            this=lookup_function(spec.name), expressions=[exp.cast(key.copy(), "STRING")]
        )
        fetched = f"{hidden}{_FETCHED}"
        check = _checked(spec, exp.column(fetched, table=stream, quoted=True), key)
        if check is None:
            added.append(exp.alias_(call, hidden, quoted=True))
        else:
            added.append(exp.alias_(call, fetched, quoted=True))
            checked.append(exp.alias_(check, hidden, quoted=True))
        if inner_join:
            inner.append(hidden)
        values[rel.alias] = (spec, hidden, key)
    lookup_names = {
        a: {c.name.lower(): c.name for c in spec.columns} for a, (spec, _, _) in values.items()
    }
    stream_names = {name.lower() for name, _ in relations[0].columns}
    by_alias = {a.lower(): a for a in values}
    for column in list(select.find_all(exp.Column)):
        # This query's own references (not a subquery's), to a table's column (not a field of a
        # struct column, ``e.person.name``).
        if column.find_ancestor(exp.Select) is not select or column.args.get("db"):
            continue
        if isinstance(column.this, exp.Star):
            continue
        name = column.name.lower()
        alias = by_alias.get(column.table.lower()) if column.table else None
        if not column.table:
            owners = [a for a, names in lookup_names.items() if name in names]
            if len(owners) != 1 or name in stream_names:
                continue
            alias = owners[0]
        if alias is None or name not in lookup_names[alias]:
            continue
        spec, hidden, key = values[alias]
        value = _value(spec, lookup_names[alias][name], stream, hidden, key)
        # A projection keeps the column's name.
        named = column.parent is select and column.arg_key == "expressions"
        column.replace(exp.alias_(value, column.name, quoted=True) if named else value)
    source = first.copy()
    subquery = exp.select(*added).from_(source)
    if checked:
        # A projection of its own: the lookup function (not deterministic) runs once per row,
        # and the check reads its record as many times as it needs.
        subquery = exp.select(exp.column(exp.Star(), table=stream), *checked).from_(
            _aliased(subquery, stream)
        )
    from_.set("this", _aliased(subquery, stream))
    select.set("joins", None)
    for hidden in inner:
        record = exp.column(hidden, table=stream, quoted=True)
        select.where(exp.Not(this=exp.Is(this=record, expression=exp.null())), copy=False)
    return relations[:1]


# The record as fetched, before its check for bad data (``_checked``), under the hidden name
# with this suffix; the checked record takes the hidden name itself.
_FETCHED = "__fetched"
_CORRUPT = "_corrupt_record"


def _aliased(query: exp.Select, alias: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _checked(spec: TableSpec, record: exp.Expression, key: exp.Expression) -> exp.Expression | None:
    """The record of ``key`` if its format decodes it; a bad one failing the query (naming the
    table, its system and the key) or taken as no record, as ``bad_data`` says. None: the
    format takes any record (raw_string)."""
    fmt = spec.format
    if fmt is None or fmt.name != "json":
        return None
    physical = [c for c in spec.columns if c.physical]
    ddl = ", ".join(f"{quote_name(c.name)} {c.spark_type}" for c in physical)
    options = exp.VarMap(
        keys=exp.array("'mode'", "'columnNameOfCorruptRecord'", dialect="spark"),
        values=exp.array("'PERMISSIVE'", f"'{_CORRUPT}'", dialect="spark"),
    )
    parsed = exp.Paren(
        this=exp.Anonymous(
            this="from_json",
            expressions=[
                record.copy(),
                exp.Literal.string(f"{ddl}, {quote_name(_CORRUPT)} STRING"),
                options,
            ],
        )
    )

    def field(name: str) -> exp.Expression:
        return exp.Dot(this=parsed.copy(), expression=exp.to_identifier(name, quoted=True))

    unreadable = exp.or_(
        exp.Is(this=parsed.copy(), expression=exp.null()),
        exp.Not(this=exp.Is(this=field(_CORRUPT), expression=exp.null())),
        *(exp.Is(this=field(c.name), expression=exp.null()) for c in physical if not c.nullable),
    )
    bad = exp.and_(exp.Not(this=exp.Is(this=record.copy(), expression=exp.null())), unreadable)
    if fmt.bad_data == "drop":
        return exp.If(this=bad, true=exp.null(), false=record.copy())
    message = exp.Concat(
        expressions=[
            exp.Literal.string(f"bad data in table '{spec.name}' ({spec.connector} key '"),
            exp.cast(key.copy(), "STRING"),
            exp.Literal.string(f"', {fmt.name}): could not decode "),
            record.copy(),
        ]
    )
    failure = exp.Anonymous(this="raise_error", expressions=[message])
    return exp.If(this=bad, true=failure, false=record.copy())


def _key_of(
    ctx: PlanContext, join: exp.Join, alias: str, spec: TableSpec
) -> tuple[exp.Expression, bool]:
    """The stream's side of a lookup join's condition, and whether the join is inner."""
    side = (join.args.get("side") or "").upper()
    kind = (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
        raise error(
            ErrorCode.LOOKUP_OUTER_JOIN,
            f"{side or kind} join is not supported for lookup tables; must be a left or inner join",
            span_of(ctx.text, join),
        )
    on = join.args.get("on")
    if isinstance(on, exp.And):
        raise error(
            ErrorCode.LOOKUP_TABLE,
            "multiple filters found in lookup join, which is not supported",
            span_of(ctx.text, on),
        )
    if not isinstance(on, exp.EQ):
        raise error(
            ErrorCode.LOOKUP_TABLE,
            "filter join conditions are not supported for lookup joins; must have an equality "
            "condition",
            span_of(ctx.text, on if on is not None else join),
        )

    def of_lookup(e: exp.Expression) -> bool:
        return any(c.table.lower() == alias.lower() for c in e.find_all(exp.Column))

    left, right = on.this, on.expression
    if of_lookup(left) and not of_lookup(right):
        left, right = right, left
    if not isinstance(right, exp.Column) or right.table.lower() != alias.lower() or of_lookup(left):
        raise error(
            ErrorCode.LOOKUP_TABLE,
            f"invalid right-side condition for lookup join: `{on.sql(dialect='postgres')}`; "
            f"only column references are supported",
            span_of(ctx.text, on),
        )
    if right.name.lower() not in {k.lower() for k in spec.primary_key}:
        raise error(
            ErrorCode.LOOKUP_TABLE,
            f"the right-side of a look-up join condition must be a PRIMARY KEY column, but "
            f"'{right.name}' is not",
            span_of(ctx.text, right),
        )
    return left, side != "LEFT"


def _value(
    spec: TableSpec, name: str, stream: str, hidden: str, key: exp.Expression
) -> exp.Expression:
    """A lookup table's column, read from the row's record (its key: the key looked up)."""
    record = exp.column(hidden, table=stream, quoted=True)
    if name in spec.primary_key:
        return exp.If(
            this=exp.Is(this=record.copy(), expression=exp.null()),
            true=exp.null(),
            false=exp.cast(key.copy(), "STRING"),
        )
    physical = [c for c in spec.columns if c.physical]
    assert spec.format is not None
    if spec.format.name == "raw_string":
        return record
    ddl = ", ".join(f"{quote_name(c.name)} {c.spark_type}" for c in physical)
    decoded = exp.Anonymous(this="from_json", expressions=[record, exp.Literal.string(ddl)])
    return exp.Dot(this=exp.Paren(this=decoded), expression=exp.to_identifier(name, quoted=True))
