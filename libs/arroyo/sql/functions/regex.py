"""Regular expressions: DataFusion's (Rust ``regex`` syntax, flags ``i m s x`` and ``g``) on
Spark's (Java). Flags become inline flags; ``(?P<name>`` groups become Java's ``(?<name>``;
``regexp_replace`` replaces the first match only unless the flag ``g`` is given, and its
``\\1`` back references become Java's ``$1``. The flags ``U`` (swap greediness) and ``R``
(CRLF) have no Java equivalent and are refused.
"""

from __future__ import annotations

import re

from sqlglot import exp

from arroyo.sql.functions.core import Call, Rewrite, func, string_literal, typed

_INLINE_FLAGS = frozenset("imsx")


def _flags(call: Call, index: int, allow_global: bool = False) -> tuple[str, bool]:
    """The inline-flag prefix of the call's flags argument (``(?i)``) and whether it has ``g``."""
    if len(call.args) <= index:
        return "", False
    flags = call.literal(index, "flags")
    inline = ""
    is_global = False
    for flag in flags:
        if flag in _INLINE_FLAGS:
            inline += flag
        elif flag == "g" and allow_global:
            is_global = True
        elif flag in "UR":
            raise call.fail(
                f"the flag '{flag}' has no equivalent in Spark's regular expressions; "
                "write the pattern without it (e.g. with lazy quantifiers for U)",
                call.args[index],
            )
        else:
            raise call.fail(f"unknown flag '{flag}'", call.args[index])
    return (f"(?{inline})" if inline else ""), is_global


def _java_pattern(pattern: str) -> str:
    """Rust's named groups and POSIX classes in Java's spelling."""
    pattern = pattern.replace("(?P<", "(?<")
    return re.sub(r"\[:(\^?)([a-z]+):\]", lambda m: _posix(m.group(1), m.group(2)), pattern)


def _posix(negate: str, name: str) -> str:
    java = {"alnum": "Alnum", "alpha": "Alpha", "ascii": "ASCII", "blank": "Blank",
            "cntrl": "Cntrl", "digit": "Digit", "graph": "Graph", "lower": "Lower",
            "print": "Print", "punct": "Punct", "space": "Space", "upper": "Upper",
            "xdigit": "XDigit"}.get(name)  # fmt: skip
    if java is None:
        return f"[:{negate}{name}:]"
    return f"\\{'P' if negate else 'p'}{{{java}}}"


def _pattern(call: Call, index: int, prefix: str = "{}", flags: str = "") -> exp.Expr:
    """The pattern argument in Java's terms, behind ``prefix`` and the inline ``flags``."""
    node = call.args[index]
    text = string_literal(node)
    if text is not None:
        return exp.Literal.string(flags + prefix.replace("{}", _java_pattern(text)))
    before, _, after = prefix.partition("{}")
    parts: list[exp.Expr] = [exp.Literal.string(flags + before)] if flags + before else []
    parts.append(call.arg(index))
    if after:
        parts.append(exp.Literal.string(after))
    return func("concat", *parts) if len(parts) > 1 else parts[0]


def _regexp_like(call: Call) -> exp.Expr:
    call.arity(2, 3)
    flags, _ = _flags(call, 2)
    return typed(
        exp.RegexpLike(this=call.arg(0), expression=_pattern(call, 1, flags=flags)), "boolean"
    )


def capture_groups(pattern: str) -> int:
    """How many capturing groups ``pattern`` has (escapes and character classes skipped)."""
    groups = 0
    depth = 0  # inside a character class (Rust allows nested classes)
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
            if pattern.startswith("[^", i):
                i += 1
            if pattern.startswith("]", i + 1):
                i += 1  # a leading ] is a literal
        elif char == "]" and depth:
            depth -= 1
        elif char == "(" and not depth:
            rest = pattern[i + 1 : i + 4]
            named = rest.startswith(("?P<", "?<")) and not rest.startswith(("?<=", "?<!"))
            if not rest.startswith("?") or named:
                groups += 1
        i += 1
    return groups


def _regexp_match(call: Call) -> exp.Expr:
    """The first match's capture groups (the whole match when there are none), or NULL."""
    call.arity(2, 3)
    text = string_literal(call.args[1])
    if text is None:
        raise call.fail("the pattern must be a literal (its groups make the result)", call.args[1])
    flags, _ = _flags(call, 2)
    pattern = _pattern(call, 1, flags=flags)
    groups = capture_groups(text)
    parts = [
        func("regexp_extract", call.arg(0), pattern.copy(), exp.Literal.number(g))
        for g in (range(1, groups + 1) if groups else [0])
    ]
    matched = exp.RegexpLike(this=call.arg(0), expression=pattern.copy())
    return typed(
        exp.If(this=matched, true=func("array", *parts), false=exp.null()), "array<string>"
    )


def _java_replacement(text: str, shift: int) -> str:
    """A replacement in DataFusion's terms (``\\1``, ``$1``, ``${1}``, ``$name``, ``$$``) in
    Java's, group numbers moved up by ``shift``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        number = re.match(r"\\(\d+)|\$\{(\d+)\}|\$(\d+)", text[i:])
        named = re.match(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", text[i:])
        if number:
            out.append(f"${int(next(g for g in number.groups() if g)) + shift}")
            i += number.end()
        elif named:
            out.append(f"${{{next(g for g in named.groups() if g)}}}")
            i += named.end()
        elif text.startswith("$$", i):
            out.append("\\$")
            i += 2
        elif char in "\\$":
            out.append("\\" + char)
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _regexp_replace(call: Call) -> exp.Expr:
    """The first match replaced, or every match with the flag ``g``."""
    call.arity(3, 4)
    flags, is_global = _flags(call, 3, allow_global=True)
    replacement = string_literal(call.args[2])
    if replacement is None:
        raise call.fail("the replacement must be a literal", call.args[2])
    if is_global:
        pattern = _pattern(call, 1, flags=flags)
        rewritten = _java_replacement(replacement, 0)
    else:
        # Everything before the first match is group 1, put back as it was.
        pattern = _pattern(call, 1, prefix="\\A((?s:.*?))(?:{})", flags=flags)
        rewritten = "$1" + _java_replacement(replacement, 1)
    return typed(
        func("regexp_replace", call.arg(0), pattern, exp.Literal.string(rewritten)), "string"
    )


def _regexp_count(call: Call) -> exp.Expr:
    """Matches counted from ``start`` (1-based), with flags."""
    call.arity(2, 4)
    flags, _ = _flags(call, 3)
    subject = call.arg(0)
    if len(call.args) > 2:
        subject = func("substr", subject, call.arg(2))
    return typed(func("regexp_count", subject, _pattern(call, 1, flags=flags)), "bigint")


REWRITES: dict[str, Rewrite] = {
    "regexp_like": _regexp_like,
    "regexp_match": _regexp_match,
    "regexp_replace": _regexp_replace,
    "regexp_count": _regexp_count,
}
