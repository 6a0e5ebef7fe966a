"""Splitting a script into statements and parsing Arroyo's DDL.

Queries are parsed by sqlglot (Postgres dialect, as Arroyo's is). ``CREATE TABLE`` carries
Arroyo-only clauses sqlglot does not know (``WATERMARK FOR``, ``METADATA FROM``, ``WITH`` options
on any connector), so it is read here from sqlglot's tokens, and each piece that is plain SQL
(types, generated-column and watermark expressions) goes back to sqlglot. Every piece keeps its
offset in the script so that diagnostics point at it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokenizer_core import Token, TokenType

from arroyo.errors import Diagnostic, PlanningError
from arroyo.sql.text import SourceText
from arroyo.sql.types import UnsupportedTypeError, parse_type


def _as_written(name: str) -> Callable[[list[exp.Expr]], exp.Expr]:
    def build(args: list[exp.Expr]) -> exp.Expr:
        return exp.Anonymous(this=name, expressions=args)

    return build


class ArroyoDialect(Postgres):
    """Postgres, except that ``window`` and ``session`` are plain names: Arroyo selects
    ``... AS window``, reads ``window.start`` and calls ``session(gap)``; it has no named-window
    clause and no SESSION statements. Calls that take chrono formats (``%Y-%m-%d``) are kept as
    written, for ``arroyo.sql.functions`` (sqlglot would read Postgres' ``YYYY-MM-DD``)."""

    class Tokenizer(Postgres.Tokenizer):
        KEYWORDS = {
            k: v for k, v in Postgres.Tokenizer.KEYWORDS.items() if k not in ("WINDOW", "SESSION")
        }

    class Parser(PostgresParser):
        FUNCTIONS = {
            **PostgresParser.FUNCTIONS,
            **{name.upper(): _as_written(name) for name in ("to_char", "to_timestamp", "to_date")},
        }


DIALECT = ArroyoDialect


@dataclass(frozen=True, slots=True)
class ColumnDecl:
    name: str
    type: exp.DataType
    offset: int
    nullable: bool = True
    metadata_key: str | None = None
    generated: exp.Expression | None = None


@dataclass(frozen=True, slots=True)
class OptionDecl:
    key: str
    value: str
    offset: int


@dataclass(frozen=True, slots=True)
class CreateTable:
    name: str
    offset: int
    columns: list[ColumnDecl]
    options: list[OptionDecl]
    primary_key: list[str] = field(default_factory=list)
    watermark_column: str | None = None
    watermark_expr: exp.Expression | None = None
    watermark_offset: int = 0
    as_query: exp.Query | None = None
    query_offset: int = 0
    # CREATE TEMPORARY TABLE: a lookup table (Arroyo's way to declare one).
    temporary: bool = False


@dataclass(frozen=True, slots=True)
class CreateView:
    name: str
    offset: int
    query: exp.Query
    query_offset: int


@dataclass(frozen=True, slots=True)
class Insert:
    table: str
    offset: int
    query: exp.Query
    query_offset: int


@dataclass(frozen=True, slots=True)
class Query:
    query: exp.Query
    offset: int


@dataclass(frozen=True, slots=True)
class SetOption:
    key: str
    value: str
    offset: int


Statement = CreateTable | CreateView | Insert | Query | SetOption


class _Tokens:
    """A cursor over one statement's tokens; offsets are absolute in the script."""

    def __init__(self, tokens: list[Token], text: SourceText, end: int) -> None:
        self.tokens = tokens
        self.pos = 0
        self.text = text
        self.end = end

    def peek(self, ahead: int = 0) -> Token | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of statement", self.end)
        self.pos += 1
        return tok

    def at_word(self, *words: str) -> bool:
        for i, word in enumerate(words):
            tok = self.peek(i)
            if tok is None or tok.text.upper() != word:
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.at_word(*words):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str) -> Token:
        tok = self.peek()
        if not self.at_word(*words):
            found = f"'{tok.text}'" if tok else "end of statement"
            raise self.error(f"expected {' '.join(words)}, found {found}", self.offset())
        self.pos += len(words)
        assert tok is not None
        return tok

    def offset(self) -> int:
        tok = self.peek()
        return tok.start if tok else self.end

    def error(self, message: str, offset: int, code: str = "syntax_error") -> PlanningError:
        return PlanningError([Diagnostic(code, message, self.text.span(offset))])

    def until_depth0(self, stops: set[TokenType]) -> list[Token]:
        """Tokens up to (not including) one of ``stops`` at bracket depth 0."""
        out: list[Token] = []
        depth = 0
        while (tok := self.peek()) is not None:
            if depth == 0 and tok.token_type in stops:
                break
            if tok.token_type in (TokenType.L_PAREN, TokenType.LT, TokenType.L_BRACKET):
                depth += 1
            elif tok.token_type in (TokenType.R_PAREN, TokenType.GT, TokenType.R_BRACKET):
                depth -= 1
            out.append(self.next())
        return out


def split_statements(text: SourceText) -> list[tuple[int, int, list[Token]]]:
    """(start offset, end offset, tokens) of each ``;``-separated statement."""
    try:
        tokens = ArroyoDialect.Tokenizer().tokenize(text.text)
    except TokenError as err:
        raise PlanningError([Diagnostic("syntax_error", str(err))]) from err
    out: list[tuple[int, int, list[Token]]] = []
    current: list[Token] = []
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if current:
                out.append((current[0].start, current[-1].end + 1, current))
            current = []
        else:
            current.append(tok)
    if current:
        out.append((current[0].start, current[-1].end + 1, current))
    return out


def parse_script(sql: str) -> tuple[SourceText, list[Statement]]:
    text = SourceText(sql)
    statements: list[Statement] = []
    diagnostics: list[Diagnostic] = []
    for start, end, tokens in split_statements(text):
        try:
            statements.append(_parse_statement(text, start, end, tokens))
        except PlanningError as err:
            diagnostics.extend(err.diagnostics)
    if diagnostics:
        raise PlanningError(diagnostics)
    if not statements:
        raise PlanningError([Diagnostic("empty_query", "the query has no statements")])
    return text, statements


def _parse_statement(text: SourceText, start: int, end: int, tokens: list[Token]) -> Statement:
    cur = _Tokens(tokens, text, end)
    if cur.accept("CREATE"):
        cur.accept("OR", "REPLACE")
        if cur.accept("VIEW") or cur.accept("MATERIALIZED", "VIEW"):
            cur.accept("IF", "NOT", "EXISTS")
            name_tok = cur.next()
            cur.expect("AS")
            q_offset = cur.offset()
            return CreateView(
                _ident(name_tok), name_tok.start, parse_query(text, q_offset, end), q_offset
            )
        temporary = cur.accept("TEMPORARY")
        if cur.accept("TABLE"):
            return _parse_create_table(cur, start, end, temporary=temporary)
        raise cur.error(
            "only CREATE TABLE and CREATE VIEW are supported", start, "unsupported_statement"
        )
    if cur.accept("INSERT"):
        cur.expect("INTO")
        name_tok = cur.next()
        q_offset = cur.offset()
        return Insert(_ident(name_tok), name_tok.start, parse_query(text, q_offset, end), q_offset)
    if cur.accept("SET"):
        key = cur.next().text
        if not (cur.accept("=") or cur.accept("TO")):
            raise cur.error("expected = in SET", cur.offset())
        value = text.text[cur.offset() : end].strip().strip("'")
        return SetOption(key.lower(), value, start)
    first = tokens[0]
    if first.token_type in (TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN, TokenType.VALUES):
        return Query(parse_query(text, start, end), start)
    raise cur.error(
        f"unsupported statement starting with '{first.text}'", start, "unsupported_statement"
    )


def parse_query(text: SourceText, start: int, end: int) -> exp.Query:
    """Parse a query; its nodes' ``meta`` carry offsets relative to the script."""
    body = text.text[start:end]
    # Pad with the script's own preceding newlines/columns so sqlglot's line/col are absolute.
    prefix = "".join(ch if ch == "\n" else " " for ch in text.text[:start])
    try:
        parsed = sqlglot.parse_one(prefix + body, read=DIALECT)
    except ParseError as err:
        errors = err.errors or [{}]
        first = errors[0]
        line = first.get("line")
        col = first.get("col")
        desc = first.get("description") or str(err)
        span = text.span(start)
        if isinstance(line, int) and isinstance(col, int):
            from arroyo.errors import Span

            span = Span(line, max(1, col - len(str(first.get("highlight") or "")) + 1))
        raise PlanningError([Diagnostic("syntax_error", desc, span)]) from err
    if not isinstance(parsed, exp.Query):
        raise PlanningError([Diagnostic("syntax_error", "expected a query", text.span(start))])
    return parsed


def _ident(tok: Token) -> str:
    return (
        tok.text if tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING) else tok.text.lower()
    )


_PARTITION_FIELDS = "partitioning.fields"


def _partitioned_by(cur: _Tokens) -> OptionDecl | None:
    """``PARTITIONED BY (a, b)``, before or after WITH: the sink's ``partitioning.fields``.
    An item may be a transform of a column, as an iceberg table takes them: ``bucket(a, 4)``,
    ``hour(ts)``."""
    tok = cur.peek()
    if tok is None or " ".join(tok.text.upper().split()) != "PARTITIONED BY":
        if not cur.at_word("PARTITIONED", "BY"):
            return None
        cur.next()
    assert tok is not None
    cur.next()
    cur.expect("(")
    fields = []
    while True:
        name = cur.next()
        nxt = cur.peek()
        called = nxt is not None and nxt.token_type == TokenType.L_PAREN
        if called and name.text.isidentifier():  # a transform: truncate, hour... are keywords
            item = name.text.lower()
        elif name.token_type not in (TokenType.VAR, TokenType.IDENTIFIER) or "," in name.text:
            raise cur.error(f"PARTITIONED BY takes column names, found '{name.text}'", name.start)
        else:
            item = _ident(name)
        if called and cur.accept("("):
            column = cur.next()
            if column.token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
                raise cur.error(
                    f"{item}(...) in PARTITIONED BY takes a column name first, found "
                    f"'{column.text}'",
                    column.start,
                )
            args = [_ident(column)]
            if cur.accept(","):
                arg = cur.next()
                if arg.token_type != TokenType.NUMBER or not arg.text.isdigit():
                    raise cur.error(
                        f"{item}(...) in PARTITIONED BY takes a whole number after the column, "
                        f"found '{arg.text}'",
                        arg.start,
                    )
                args.append(arg.text)
            extra = cur.peek()
            if extra is not None and extra.token_type == TokenType.COMMA:
                raise cur.error(
                    f"{item}(...) in PARTITIONED BY takes a column and at most one number",
                    extra.start,
                )
            cur.expect(")")
            item = f"{item.lower()}({', '.join(args)})"
        fields.append(item)
        if cur.accept(")"):
            break
        if not cur.accept(","):
            found = cur.peek()
            raise cur.error(
                f"expected ',' or ')' in PARTITIONED BY, found "
                f"{repr(found.text) if found else 'the end'}",
                cur.offset(),
            )
    return OptionDecl(_PARTITION_FIELDS, f"[{', '.join(fields)}]", tok.start)


def _parse_create_table(
    cur: _Tokens, start: int, end: int, *, temporary: bool = False
) -> CreateTable:
    cur.accept("IF", "NOT", "EXISTS")
    name_tok = cur.next()
    name = _ident(name_tok)
    elements = _TableElements()
    options: list[OptionDecl] = []
    tok = cur.peek()
    if tok is not None and tok.token_type == TokenType.L_PAREN:
        cur.next()
        while True:
            tok = cur.peek()
            if tok is None:
                raise cur.error("unclosed column list", end)
            if tok.token_type == TokenType.R_PAREN:
                cur.next()
                break
            element = cur.until_depth0({TokenType.COMMA, TokenType.R_PAREN})
            if not element:
                raise cur.error("empty column definition", cur.offset())
            elements.add(cur, element)
            if (nxt := cur.peek()) is not None and nxt.token_type == TokenType.COMMA:
                cur.next()
    partitioned = _partitioned_by(cur)
    if cur.accept("WITH"):
        cur.expect("(")
        while not cur.accept(")"):
            key_start = cur.offset()
            key_toks = cur.until_depth0({TokenType.EQ})
            cur.expect("=")
            value_toks = cur.until_depth0({TokenType.COMMA, TokenType.R_PAREN})
            if not key_toks or not value_toks:
                raise cur.error("expected key = value", key_start)
            key = "".join(t.text for t in key_toks).strip("'\"")
            value = cur.text.text[value_toks[0].start : value_toks[-1].end + 1].strip()
            if len(value) >= 2 and value[0] == value[-1] == "'":
                value = value[1:-1].replace("''", "'")
            options.append(OptionDecl(key, value, key_start))
            cur.accept(",")
    partitioned = partitioned or _partitioned_by(cur)
    if partitioned is not None:
        if any(o.key == _PARTITION_FIELDS for o in options):
            raise cur.error(
                f"give the partition fields once: PARTITIONED BY or '{_PARTITION_FIELDS}'",
                partitioned.offset,
            )
        options.append(partitioned)
    as_query = None
    query_offset = 0
    if cur.accept("AS"):
        query_offset = cur.offset()
        as_query = parse_query(cur.text, query_offset, end)
    elif cur.peek() is not None:
        tok = cur.next()
        raise cur.error(f"unexpected '{tok.text}' in CREATE TABLE", tok.start)
    return CreateTable(
        name=name,
        offset=name_tok.start,
        columns=elements.columns,
        options=options,
        primary_key=elements.primary_key,
        watermark_column=elements.watermark_column,
        watermark_expr=elements.watermark_expr,
        watermark_offset=elements.watermark_offset,
        as_query=as_query,
        query_offset=query_offset,
        temporary=temporary,
    )


_COLUMN_CLAUSES = {"NOT", "NULL", "PRIMARY KEY", "METADATA", "GENERATED"}


@dataclass
class _TableElements:
    """What the parenthesised part of a CREATE TABLE declares."""

    columns: list[ColumnDecl] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    watermark_column: str | None = None
    watermark_expr: exp.Expression | None = None
    watermark_offset: int = 0

    def add(self, cur: _Tokens, element: list[Token]) -> None:
        text = cur.text
        first = element[0]
        words = [t.text.upper() for t in element]
        if words[:2] == ["WATERMARK", "FOR"]:
            if len(element) < 3:
                raise cur.error("WATERMARK FOR needs a column", first.start)
            self.watermark_column = _ident(element[2])
            self.watermark_offset = first.start
            if len(element) > 3:
                if words[3] != "AS" or len(element) < 5:
                    raise cur.error(
                        "expected AS <expression> after WATERMARK FOR column", element[3].start
                    )
                self.watermark_expr = _parse_expression(text, element[4].start, element[-1].end + 1)
            return
        if words[0] == "PRIMARY KEY":
            self.primary_key.extend(
                _ident(t)
                for t in element[1:]
                if t.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            )
            return
        name = _ident(first)
        i = 1
        while i < len(element) and not (
            words[i] in _COLUMN_CLAUSES
            and (words[i] != "NOT" or (i + 1 < len(words) and words[i + 1] == "NULL"))
        ):
            i += 1
        if i == 1:
            raise cur.error(f"column '{name}' has no type", first.start, "missing_type")
        type_text = text.text[element[1].start : element[i - 1].end + 1]
        try:
            data_type = parse_type(type_text)
        except UnsupportedTypeError as err:
            raise cur.error(str(err), element[1].start, "unknown_type") from err
        nullable = True
        metadata_key = None
        generated = None
        while i < len(element):
            if words[i : i + 2] == ["NOT", "NULL"]:
                nullable = False
                i += 2
            elif words[i] == "NULL":
                i += 1
            elif words[i] == "PRIMARY KEY":
                self.primary_key.append(name)
                i += 1
            elif words[i : i + 2] == ["METADATA", "FROM"] and i + 2 < len(element):
                metadata_key = element[i + 2].text.strip("'")
                i += 3
            elif words[i : i + 3] == ["GENERATED", "ALWAYS", "AS"] and i + 3 < len(element):
                body = element[i + 3 :]
                if words[-1] == "STORED":
                    body = body[:-1]
                generated = _parse_expression(text, body[0].start, body[-1].end + 1)
                i = len(element)
            else:
                raise cur.error(
                    f"unexpected '{element[i].text}' in column '{name}'", element[i].start
                )
        self.columns.append(
            ColumnDecl(name, data_type, first.start, nullable, metadata_key, generated)
        )


def _parse_expression(text: SourceText, start: int, end: int) -> exp.Expression:
    prefix = "".join(ch if ch == "\n" else " " for ch in text.text[:start])
    try:
        parsed = sqlglot.parse_one(prefix + text.text[start:end], read=DIALECT)
    except ParseError as err:
        raise PlanningError(
            [Diagnostic("syntax_error", f"bad expression: {err}", text.span(start))]
        ) from err

    assert isinstance(parsed, exp.Expression)
    return parsed
