"""Mechanical mutants of C source: one small change each, found on the tokens of one file.

The operators (`Mutant.operator`):

| operator | change |
|---|---|
| `relational` | `<` ↔ `<=`, `>` ↔ `>=`, `==` ↔ `!=` |
| `logical` | `&&` ↔ `||`; a unary `!` removed |
| `arithmetic` | binary `+` ↔ `-`, `/` → `*`, `<<` ↔ `>>`, binary `&` ↔ `|`, `~` removed, `++` ↔ `--`, `+=` ↔ `-=` |
| `constant` | an integer literal n → n + 1 and n - 1 (not below 0), `true` ↔ `false` |
| `errno` | an errno constant → another (`ERRNO_SWAP`) |
| `negate` | the condition of an `if`, `while` or `for` → `!(condition)` |
| `delete` | an expression statement, `break` or `continue` → `;` |
| `return` | `return <expression>;` → `return 0;` (unless the expression is already 0, NULL or a boolean) |

Only code that is compiled is mutated: preprocessor lines and the blocks of `#ifdef VNPU_DEFECT_*` switches
are skipped, and so is everything outside function bodies (initialisers of globals). Comments and string
literals are never touched. A mutant names its file, line, column, the enclosing function, the source line
and the change, so that a reason written for it (bench/mutation_equivalent.yaml) can find it again after
unrelated edits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

# One alternative per errno constant: the two the published text names (EINVAL, ENOENT) trade places, every
# other one becomes EINVAL.
ERRNO_SWAP: Final = {
    "EINVAL": "ENOENT",
    "ENOENT": "EINVAL",
    "EBUSY": "EINVAL",
    "ENOMEM": "EINVAL",
    "EACCES": "EINVAL",
    "EBADF": "EINVAL",
    "ENODEV": "EINVAL",
    "ENOSYS": "EINVAL",
    "ECANCELED": "EINVAL",
    "ECONNRESET": "EINVAL",
    "EINTR": "EAGAIN",
    "EAGAIN": "EINTR",
}
RELATIONAL: Final = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
LOGICAL: Final = {"&&": "||", "||": "&&"}
ARITHMETIC: Final = {"++": "--", "--": "++", "+=": "-=", "-=": "+=", "<<": ">>", ">>": "<<", "/": "*", "|": "&"}
BINARY_ONLY: Final = {"+": "-", "-": "+", "&": "|"}  # these are also unary operators
KEYWORDS: Final = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float",
    "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof",
    "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool", "_Noreturn",
    "_Static_assert", "_Atomic", "bool",
})  # fmt: skip
BINARY_SPLIT: Final = frozenset({"&&", "||", "?", "<", ">", "&", "|", "^", "+", "-", "*", "/", "%", "<<", ">>"})
CONTROL: Final = frozenset({"if", "while", "for", "switch"})

_TOKEN: Final = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
      |(?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      |(?P<number>0[xX][0-9a-fA-F]+[uUlL]*|[0-9]+[uUlL]*)
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\.\.\.|[-+*/%<>=!&|^~?:;,.(){}\[\]])
      |(?P<space>\s+)""",
    re.S | re.X,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number, ident, op
    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Mutant:
    file: str  # name inside the source directory
    line: int
    column: int  # 1-based, of the first character changed
    function: str
    operator: str
    original: str
    replacement: str
    source_line: str  # the line as written (stripped)
    previous_line: str  # the line before it (stripped), to tell identical lines apart
    start: int  # character offsets of the change in the file
    end: int

    @property
    def key(self) -> str:
        """Stable within one version of the sources: file, position and change."""
        return f"{self.file}:{self.line}:{self.column}:{self.operator}:{self._short(self.replacement)}"

    @property
    def change(self) -> str:
        """`<original> -> <replacement>`, a negated condition written `!(...)`, on one line."""
        if self.operator == "negate":
            return f"{self._short(self.original)} -> !(...)"
        return f"{self._short(self.original)} -> {self._short(self.replacement)}"

    def _short(self, code: str) -> str:
        if self.operator == "negate" and code == self.replacement:
            return "!(...)"
        return " ".join(code.split())

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end :]


def _compiled_text(text: str) -> str:
    """`text` with every preprocessor line and every `#ifdef VNPU_DEFECT_*` block blanked (same length, newlines
    kept), so offsets stay those of the file."""
    out = list(text)
    lines = text.splitlines(keepends=True)
    offset = 0
    stack: list[bool] = []  # per open conditional: is it a defect switch's block (compiled out)
    continued = False
    for line in lines:
        stripped = line.lstrip()
        directive = continued or stripped.startswith("#")
        if stripped.startswith("#"):
            words = stripped[1:].split()
            name = words[0] if words else ""
            if name in ("if", "ifdef", "ifndef"):
                stack.append(name == "ifdef" and len(words) > 1 and words[1].startswith("VNPU_DEFECT_"))
            elif name == "endif" and stack:
                stack.pop()
            elif name in ("else", "elif") and stack:
                stack[-1] = False  # the other branch of a defect switch is what is compiled
        dead = any(stack) or directive
        if dead:
            for i in range(offset, offset + len(line)):
                if out[i] != "\n":
                    out[i] = " "
        continued = directive and line.rstrip("\n").endswith("\\")
        offset += len(line)
    return "".join(out)


def tokens(text: str) -> list[Token]:
    """The tokens of compiled code (comments and whitespace dropped, strings kept as one opaque token)."""
    found: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"cannot read C at offset {pos}: {text[pos:pos + 20]!r}")
        kind = match.lastgroup or ""
        if kind not in ("comment", "space"):
            found.append(Token(kind, match.group(), match.start(), match.end()))
        pos = match.end()
    return found


def _functions(toks: list[Token]) -> list[str]:
    """For each token, the name of the function whose body it is in ('' outside every function body)."""
    names = [""] * len(toks)
    depth = 0
    current = ""
    for i, tok in enumerate(toks):
        if tok.text == "{":
            if depth == 0 and i > 0 and toks[i - 1].text == ")":
                current = _name_before_parens(toks, i - 1)
            depth += 1
        elif tok.text == "}":
            depth -= 1
            if depth == 0:
                current = ""
                continue
        names[i] = current if depth > 0 else ""
    return names


def _opening(toks: list[Token], close: int, pair: str = "()") -> int | None:
    """The index of the bracket (`pair`: opening and closing) that the one at `close` closes, or None."""
    level = 0
    for j in range(close, -1, -1):
        if toks[j].text == pair[1]:
            level += 1
        elif toks[j].text == pair[0]:
            level -= 1
            if level == 0:
                return j
    return None


def _name_before_parens(toks: list[Token], close: int) -> str:
    j = _opening(toks, close)
    return toks[j - 1].text if j is not None and j > 0 and toks[j - 1].kind == "ident" else "?"


def _matching(toks: list[Token], i: int, opening: str, closing: str) -> int:
    """Index of the token closing the bracket opened at `i`."""
    level = 0
    for j in range(i, len(toks)):
        if toks[j].text == opening:
            level += 1
        elif toks[j].text == closing:
            level -= 1
            if level == 0:
                return j
    raise ValueError(f"unbalanced {opening!r} at offset {toks[i].start}")


def _is_operand_end(tok: Token) -> bool:
    """Whether a binary operator may follow this token (an operand ends here)."""
    return tok.kind == "number" or (tok.kind == "ident" and tok.text not in KEYWORDS) or tok.text in (")", "]")


def _number(text: str) -> tuple[int, int, str]:
    """(value, base, suffix) of an integer literal."""
    body = text.rstrip("uUlL")
    suffix = text[len(body) :]
    if body.lower().startswith("0x"):
        return int(body, 16), 16, suffix
    return int(body, 10), 10, suffix


def _spell(value: int, base: int, suffix: str) -> str:
    return (f"0x{value:x}" if base == 16 else str(value)) + suffix


def _statement_starts(toks: list[Token], names: list[str]) -> Iterator[int]:
    """Indices of the first token of each statement inside function bodies."""
    paren = 0
    for i, tok in enumerate(toks):
        if tok.text == "(":
            paren += 1
        elif tok.text == ")":
            paren -= 1
        if not names[i] or paren != 0 or i + 1 >= len(toks) or not names[i + 1]:
            continue
        if (
            tok.text in (";", "{", "else")
            or (tok.text == "}" and _closes_block(toks, i))
            or (tok.text == ":" and _is_case_label(toks, i))
            or (tok.text == ")" and _closes_control(toks, i))
        ):
            yield i + 1


def _closes_block(toks: list[Token], close: int) -> bool:
    """Whether the `}` at `close` ends a compound statement (not a struct body or an initialiser)."""
    j = _opening(toks, close, "{}")
    if j is None:
        return False
    before = [t.text for t in toks[max(j - 2, 0) : j]]
    return not (before and (before[-1] in ("=", "struct", "union", "enum", ",", "{")
                            or (len(before) == 2 and before[0] in ("struct", "union", "enum"))))


def _is_case_label(toks: list[Token], colon: int) -> bool:
    for j in range(colon - 1, max(colon - 8, -1), -1):
        if toks[j].text in ("case", "default"):
            return True
        if toks[j].text in (";", "{", "}", "?"):
            return False
    return False


def _closes_control(toks: list[Token], close: int) -> bool:
    j = _opening(toks, close)
    return j is not None and j > 0 and toks[j - 1].text in CONTROL


def _statement_end(toks: list[Token], i: int) -> int | None:
    """Index of the `;` ending the simple statement that starts at `i`, or None (not a simple statement)."""
    level = 0
    for j in range(i, len(toks)):
        text = toks[j].text
        if text in ("(", "[", "{"):
            level += 1
        elif text in (")", "]", "}"):
            level -= 1
            if level < 0:
                return None
        elif text == ";" and level == 0:
            return j
    return None


def _is_expression_statement(toks: list[Token], i: int) -> bool:
    first = toks[i]
    if first.text in ("*", "++", "--"):
        return True
    if first.kind != "ident" or first.text in KEYWORDS or i + 1 >= len(toks):
        return False
    second = toks[i + 1].text
    return second in ("(", "=", "->", ".", "[", "++", "--") or (second.endswith("=") and second not in ("==",))


def mutants_of(name: str, text: str) -> list[Mutant]:
    """Every mutant of one C file, in source order."""
    compiled = _compiled_text(text)
    toks = tokens(compiled)
    names = _functions(toks)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    found: list[Mutant] = []

    def add(start: int, end: int, operator: str, replacement: str, function: str) -> None:
        line = _line_of(line_starts, start)
        begin = line_starts[line - 1]
        stop = text.find("\n", begin)
        before = text[line_starts[line - 2] : begin].strip() if line >= 2 else ""
        found.append(
            Mutant(
                file=name, line=line, column=start - begin + 1, function=function, operator=operator,
                original=text[start:end], replacement=replacement,
                source_line=text[begin : stop if stop >= 0 else len(text)].strip(), previous_line=before,
                start=start, end=end,
            )
        )  # fmt: skip

    for i, tok in enumerate(toks):
        function = names[i]
        if not function:
            continue
        prev = toks[i - 1] if i > 0 else None
        text_ = tok.text
        if text_ in RELATIONAL:
            add(tok.start, tok.end, "relational", RELATIONAL[text_], function)
        elif text_ in LOGICAL:
            add(tok.start, tok.end, "logical", LOGICAL[text_], function)
        elif text_ == "!":
            add(tok.start, tok.end, "logical", "", function)
        elif text_ in ARITHMETIC:
            add(tok.start, tok.end, "arithmetic", ARITHMETIC[text_], function)
        elif text_ in BINARY_ONLY and prev is not None and _is_operand_end(prev):
            add(tok.start, tok.end, "arithmetic", BINARY_ONLY[text_], function)
        elif text_ == "~":
            add(tok.start, tok.end, "arithmetic", "", function)
        elif tok.kind == "number":
            value, base, suffix = _number(text_)
            add(tok.start, tok.end, "constant", _spell(value + 1, base, suffix), function)
            if value > 0 and not (value == 1 and _is_return_minus(toks, i)):  # `return -1` -> 0: `return`'s
                add(tok.start, tok.end, "constant", _spell(value - 1, base, suffix), function)
        elif text_ in ("true", "false"):
            add(tok.start, tok.end, "constant", "false" if text_ == "true" else "true", function)
        elif tok.kind == "ident" and text_ in ERRNO_SWAP:
            add(tok.start, tok.end, "errno", ERRNO_SWAP[text_], function)
        if text_ in ("if", "while") and i + 1 < len(toks) and toks[i + 1].text == "(":
            close = _matching(toks, i + 1, "(", ")")
            if not _negated_primary(toks, i + 2, close):  # `!x`: removing the `!` is that mutant already
                inner = text[toks[i + 2].start : toks[close - 1].end]
                add(toks[i + 2].start, toks[close - 1].end, "negate", f"!({inner})", function)
        elif text_ == "for" and i + 1 < len(toks) and toks[i + 1].text == "(":
            close = _matching(toks, i + 1, "(", ")")
            semis = [j for j in range(i + 2, close) if toks[j].text == ";" and _depth(toks, i + 1, j) == 1]
            if len(semis) == 2 and semis[1] > semis[0] + 1:
                a, b = toks[semis[0] + 1], toks[semis[1] - 1]
                add(a.start, b.end, "negate", f"!({text[a.start:b.end]})", function)
        elif text_ == "return" and i + 1 < len(toks) and toks[i + 1].text != ";":
            end = _statement_end(toks, i + 1)
            if end is not None:
                expr = text[toks[i + 1].start : toks[end - 1].end]
                if expr not in ("0", "NULL", "false", "true", "0u"):
                    add(toks[i + 1].start, toks[end - 1].end, "return", "0", function)
    for i in _statement_starts(toks, names):
        tok = toks[i]
        if tok.text in ("break", "continue") and i + 1 < len(toks) and toks[i + 1].text == ";":
            add(tok.start, toks[i + 1].end, "delete", ";", names[i])
        elif _is_expression_statement(toks, i):
            end = _statement_end(toks, i)
            if end is not None:
                add(tok.start, toks[end].end, "delete", ";", names[i])
    found.sort(key=lambda m: (m.start, m.operator, m.replacement))
    return found


def _is_return_minus(toks: list[Token], i: int) -> bool:
    return i >= 2 and toks[i - 1].text == "-" and toks[i - 2].text == "return"


def _negated_primary(toks: list[Token], first: int, close: int) -> bool:
    """Whether toks[first:close] is `!` applied to the whole condition (no binary operator outside brackets)."""
    if toks[first].text != "!":
        return False
    level = 0
    for tok in toks[first + 1 : close]:
        if tok.text in ("(", "["):
            level += 1
        elif tok.text in (")", "]"):
            level -= 1
        elif level == 0 and (tok.text in BINARY_SPLIT or tok.text.endswith("=")):
            return False
    return True


def _depth(toks: list[Token], open_index: int, j: int) -> int:
    level = 0
    for k in range(open_index, j):
        if toks[k].text in ("(", "[", "{"):
            level += 1
        elif toks[k].text in (")", "]", "}"):
            level -= 1
    return level


def _line_of(line_starts: list[int], offset: int) -> int:
    lo, hi = 0, len(line_starts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if line_starts[mid] <= offset:
            lo = mid
        else:
            hi = mid
    return lo + 1
