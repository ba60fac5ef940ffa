"""The book's page conventions, checked on the stored notebooks (no kernel, a second or two).

Run for one chapter while editing it::

    .venv/bin/python tests/test_book_conventions.py book/04_hapvr_end_to_end.ipynb

Each rule is one function returning a list of violations (strings naming the cell):

- ``solutions``: under ``## Exercises`` every markdown cell is either an exercise (it starts with ``**N.**``)
  or a solution wholly inside a collapsed block (an ``admonition`` with ``:class: dropdown``); every code cell
  there hides its input (``hide-input``) and, where it prints or draws, its output (``hide-output``), or is
  removed (``remove-cell``). Every exercise has a solution before the next one. At least one solution code
  cell is tagged ``rerun``: it changes a setting, re-runs a small experiment and asserts the expected outcome.
- ``history``: no phrase of the book's development history or of its QA on a reader page, and no lab notes
  (designs tried, emulated CPUs, ignore-output tags, make targets: the chapter's appendix page holds them).
- ``long_outputs``: no visible text output longer than 15 lines (a table or a figure instead).
- ``code_lines``: no code line a reader can see or open is longer than 88 characters.
- ``figures``: every figure (``mystnb.figure.name`` or a ``{figure}`` directive) is cited with
  ``{numref}`` in the same chapter; the numbers are per chapter (``numfig_secnum_depth`` in ``_config.yml``).
- ``png_dpi``: every PNG output declares 200 dpi or more (``%config InlineBackend.figure_formats``).
- ``run_time``: the chapter's first cell states its run time on the CI machine, and the stored execution
  (timestamps in the cell metadata, written on a 2-core machine that may have been busy) is within a factor of
  four of it.
- ``from_scratch``: chapters 3-7 have a section written from scratch in plain PyTorch whose equality with the
  package is asserted.
- ``numbers``: every number in a chapter's Markdown equals, at its stated precision (``0.46`` matches a
  printed 0.4583, ``43 %`` a printed 0.433 or 43.3), a number printed by a code cell of the same section (a
  ``#`` / ``##`` heading starts one), or written in a visible code cell of that section (a setting the reader
  sees), or is inserted with MyST-NB's ``{glue:text}`` (a role, so no digits in the Markdown). Left out:
  equations (``$...$``, ``$$...$$``), code spans, links, labels and directive options; the run-time line (the
  ``run_time`` rule); years (1900-2099); numbers after Chapter / Section / Sec. / § / Fig. / Eq. / Table /
  Exercise / Appendix / Algorithm / Theorem / Step; digits inside names (``ResNet-50``, ``SHA-256``,
  ``FIVR-5K``, ``UCF101``); numbers **quoted from a paper**, marked ``<span class="paper">...</span>``
  (everything inside the span; the sentence or table says which paper); and the facts about the real
  annotation files listed in :data:`REAL_FILE_FACTS`, each verified by a named test where the files are
  present. Applies to the chapters in :data:`NUMBERS` (the chapters still being rewritten join later).
"""
from __future__ import annotations

import base64
import json
import re
import sys
from datetime import datetime
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("0*.ipynb"))
MAX_OUTPUT_LINES = 15
MIN_DPI = 199.5
FROM_SCRATCH = ("03", "04_", "05_", "06_", "07_")
#: Chapters whose Markdown numbers are checked (``numbers``).
NUMBERS = ("01", "02", "03", "04", "04b", "05", "05a", "05b", "06", "06b", "06c", "07", "07b", "08")
#: Facts about the real annotation files (absent from a fresh clone) that a chapter states: the exact phrase,
#: and the test that checks it where ``shared/data/annotations`` is present (``file::function``).
REAL_FILE_FACTS = {
    "08": {"646 of the 1,945": "test_evaluation.py::test_real_fivr_multi_label_pairs_are_kept",
           "354": "test_evaluation.py::test_real_fivr_multi_label_pairs_are_kept",
           "49 of the 50": "test_evaluation.py::test_real_fivr_5k_queries_outside_the_database",
           "100 × 225,960": "test_evaluation.py::test_real_fivr_200k_is_fast",
           "528": "test_evaluation.py::test_real_evve_svd_cc_web_vcdb_match_reference"},
}

# Development history and QA talk: what changed between versions of the book, and what its tests check.
HISTORY = [
    r"earlier version", r"previous version", r"an older version", r"this chapter used before",
    r"used before\b", r"the page checks", r"when (?:the page|it|the book) is built", r"\bwe (?:re-?ran|changed)\b",
    r"before this (?:round|revision|rewrite)", r"\bnow (?:stores|reports|shows)\b",
    r"\bissue \d+", r"\breviewer\b", r"\bQA\b", r"checked by (?:a )?hidden (?:test )?cells?",
]
# Lab notes: how a benchmark was chosen (designs tried, the provenance of a paper's copy), and how the printed
# digits are kept portable (emulated CPUs, ignore-output tags, make targets). They belong on the chapter's
# appendix page (``book/appendix_lab_NN.md``), not on the reader's page.
LAB_NOTES = [
    r"designs? tried", r"\btried first\b", r"not legible", r"\bemulated\b", r"\bmake test-portable\b",
    r"ignore-output", r"same digits on any CPU",
]
#: Chapters whose lab notes have not moved to an appendix page yet (``history`` skips LAB_NOTES there).
LAB_NOTES_PENDING: tuple[str, ...] = ()
_HISTORY = re.compile("|".join(HISTORY), re.IGNORECASE)
_LAB_NOTES = re.compile("|".join(HISTORY + LAB_NOTES), re.IGNORECASE)
_EXERCISE = re.compile(r"^\*\*(\d+)\.\*\*")
_DROPDOWN = re.compile(r"^(`{3,}|:{3,})\{(admonition|dropdown)\}[^\n]*\n(?::[a-z_-]+:[^\n]*\n)*", re.MULTILINE)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def source(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _removed(cell: dict) -> bool:
    return bool(tags(cell) & {"remove-cell", "remove-output"})


def _where(i: int, cell: dict) -> str:
    first = source(cell).strip().splitlines()[:1]
    return f"cell {i} ({first[0][:50]!r})" if first else f"cell {i}"


def _exercise_cells(nb: dict) -> list[tuple[int, dict]]:
    start = None
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and re.search(r"^##\s+Exercises\s*$", source(cell), re.MULTILINE):
            start = i
    if start is None:
        return []
    head = source(nb["cells"][start])
    cells = []
    for i, cell in list(enumerate(nb["cells"]))[start + 1:]:
        if cell["cell_type"] == "markdown" and re.match(r"#{1,2}\s", source(cell).lstrip()):
            break  # the next section (an appendix after the exercises)
        cells.append((i, cell))
    after = head.split("Exercises", 1)[1].strip()
    if after:  # exercise text in the heading's own cell
        cells.insert(0, (start, {"cell_type": "markdown", "source": after, "metadata": {}}))
    return cells


def _is_dropdown(text: str) -> bool:
    """The whole cell is one collapsed block: it opens with an admonition/dropdown fence, has
    ``:class: dropdown`` (or is a ``{dropdown}``) and closes with the fence it opened with."""
    text = text.strip()
    m = _DROPDOWN.match(text)
    if not m:
        return False
    fence = m.group(1)
    if m.group(2) == "admonition" and not re.search(r"^:class:.*\bdropdown\b", m.group(0), re.MULTILINE):
        return False
    return text.endswith(fence) and text.rstrip(fence[0]).strip() != ""


def solutions(nb: dict) -> list[str]:
    out, exercises, solved, reruns = [], [], set(), 0
    current = None
    for i, cell in _exercise_cells(nb):
        text = source(cell).strip()
        if cell["cell_type"] == "markdown":
            if not text:
                continue
            m = _EXERCISE.match(text)
            if m:
                current = int(m.group(1))
                exercises.append(current)
                if _DROPDOWN.search(text):
                    out.append(f"{_where(i, cell)}: an exercise cell holds a collapsed block; give it its own cell")
            elif _is_dropdown(text):
                if current is None:
                    out.append(f"{_where(i, cell)}: a solution before any exercise")
                solved.add(current)
            else:
                out.append(f"{_where(i, cell)}: prose under Exercises that is neither an exercise (**N.**) "
                           "nor inside a collapsed block (:class: dropdown)")
        elif cell["cell_type"] == "code":
            t = tags(cell)
            if "rerun" in t:
                reruns += 1
                if "assert" not in source(cell):
                    out.append(f"{_where(i, cell)}: a 'rerun' cell asserts nothing")
            if "remove-cell" in t:
                continue
            if "hide-input" not in t:
                out.append(f"{_where(i, cell)}: a solution's code is not collapsed (tag hide-input)")
            if cell.get("outputs") and not t & {"hide-output", "remove-output"}:
                out.append(f"{_where(i, cell)}: a solution's output is not collapsed (tag hide-output)")
            if current is not None:
                solved.add(current)
    if not exercises:
        out.append("no exercises (## Exercises with **1.** ...)")
    for n in exercises:
        if n not in solved:
            out.append(f"exercise {n} has no collapsed solution")
    if exercises and not reruns:
        out.append("no solution cell tagged 'rerun' (change a setting, re-run, assert the outcome)")
    return out


def history(nb: dict, lab_notes: bool = True) -> list[str]:
    """Phrases of :data:`HISTORY` and, with ``lab_notes``, of :data:`LAB_NOTES` on a reader page."""
    pattern = _LAB_NOTES if lab_notes else _HISTORY
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and "remove-cell" in tags(cell):
            continue
        texts = [source(cell)] if cell["cell_type"] == "markdown" else [
            "".join(o.get("text", "")) for o in cell.get("outputs", []) if not _removed(cell)]
        for text in texts:
            for m in pattern.finditer(text):
                lo = max(0, m.start() - 40)
                out.append(f"{_where(i, cell)}: {text[lo:m.end() + 40]!r}")
    return out


def _text_lines(output: dict) -> int:
    if output.get("output_type") == "stream":
        return len("".join(output.get("text", "")).rstrip("\n").splitlines())
    data = output.get("data", {})
    if "text/html" in data or any(k.startswith("image/") for k in data):
        return 0
    return len("".join(data.get("text/plain", "")).rstrip("\n").splitlines())


def long_outputs(nb: dict) -> list[str]:
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or tags(cell) & {"remove-cell", "remove-output", "hide-output"}:
            continue
        lines = sum(_text_lines(o) for o in cell.get("outputs", []))
        if lines > MAX_OUTPUT_LINES:
            out.append(f"{_where(i, cell)}: {lines} printed lines (at most {MAX_OUTPUT_LINES})")
    return out


MAX_CODE_LINE = 88


def code_lines(nb: dict) -> list[str]:
    """Code a reader can see (or open) is at most 88 characters a line: the column's width, no sideways scroll."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or tags(cell) & {"remove-cell", "remove-input"}:
            continue
        for line in source(cell).splitlines():
            if len(line) > MAX_CODE_LINE:
                out.append(f"{_where(i, cell)}: a {len(line)}-character line: {line[:40]!r}...")
    return out


def figures(nb: dict) -> list[str]:
    names, text, problems = [], [], []
    for cell in nb["cells"]:
        fig = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        if fig.get("name"):
            names.append(fig["name"])
            shown = [o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")]
            if len(shown) > 1:  # MyST-NB wraps each one in a figure of that name: a duplicate target
                problems.append(f"figure {fig['name']}: its cell displays {len(shown)} outputs, one is allowed")
        if cell["cell_type"] == "markdown":
            s = source(cell)
            text.append(s)
            names += re.findall(r"^:name:\s*(\S+)", s, re.MULTILINE)
    cited = set(re.findall(r"\{numref\}`(?:[^`<]*<)?([\w-]+)>?`", "\n".join(text)))
    return problems + [f"figure {n} is never cited with {{numref}}" for n in names if n not in cited]


def png_dpi(data: bytes) -> float | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    at = 8
    while at + 8 <= len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        kind = data[at + 4:at + 8]
        if kind == b"pHYs" and length == 9:
            x, unit = int.from_bytes(data[at + 8:at + 12], "big"), data[at + 16]
            return x * 0.0254 if unit == 1 else None
        if kind in (b"IDAT", b"IEND"):
            return None
        at += 12 + length
    return None


def dpi(nb: dict) -> list[str]:
    out = []
    for i, cell in enumerate(nb["cells"]):
        if _removed(cell):
            continue
        for o in cell.get("outputs", []):
            png = o.get("data", {}).get("image/png")
            if png:
                d = png_dpi(base64.b64decode("".join(png)))
                if d is None or d < MIN_DPI:
                    out.append(f"{_where(i, cell)}: a PNG at {d or 'unstated'} dpi (at least 200)")
    return out


_RUN_TIME = re.compile(r"[Rr]un time:?\**\s*about\s+(\d+(?:\.\d+)?)\s*(s|min)\b")


def stored_seconds(nb: dict) -> float | None:
    """The stored execution's time: the sum over code cells of input-to-reply (waits between cells, such as a
    kernel that idles before the next request under load, are not the chapter's)."""
    total, seen = 0.0, False
    for cell in nb["cells"]:
        ex = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            start, end = (datetime.fromisoformat(ex[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))
            total += (end - start).total_seconds()
            seen = True
    return total if seen else None


def run_time(nb: dict) -> list[str]:
    first = source(nb["cells"][0])
    m = _RUN_TIME.search(first)
    if not m:
        return ["the first cell does not state the chapter's run time ('Run time: about N s' / 'N min')"]
    stated = float(m.group(1)) * (60 if m.group(2) == "min" else 1)
    stored = stored_seconds(nb)
    if stored is not None and not stored / 4 <= stated <= max(4 * stored, 10):
        return [f"the first cell states {stated:.0f} s, the stored execution took {stored:.0f} s"]
    return []


def from_scratch(nb: dict) -> list[str]:
    start = None
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and re.search(r"^#+ .*from scratch", source(cell),
                                                          re.MULTILINE | re.IGNORECASE):
            start = i
            break
    if start is None:
        return ["no section '... from scratch' (the model and a training step in plain PyTorch)"]
    for cell in nb["cells"][start:]:
        if cell["cell_type"] == "code" and re.search(r"assert_close|assert ", source(cell)):
            return []
    return ["the from-scratch section asserts nothing against the package"]


_FENCE = re.compile(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1\s*$", re.MULTILINE | re.DOTALL)  # code, not directives
_SKIP = [re.compile(p, f) for p, f in (
    (r'<span class="paper"[^>]*>.*?</span>', re.DOTALL),                   # quoted from a paper
    (r"^\*?Run time:[^\n]*$", re.MULTILINE),                               # the run_time rule's line
    (_FENCE.pattern, re.MULTILINE | re.DOTALL),
    (r"<!--.*?-->", re.DOTALL), (r"\$\$.*?\$\$", re.DOTALL), (r"(?<!\\)\$[^$]+?\$", 0),     # equations
    (r"\{[\w:-]+\}`[^`]*`", 0), (r"`[^`\n]*`", 0),                        # roles ({glue:text}, {numref}), code
    (r"\]\([^)]*\)", 0), (r"https?://\S+", 0), (r"^:[\w-]+:.*$", re.MULTILINE),   # links, directive options
    (r"^\([\w-]+\)=\s*$", re.MULTILINE), (r"\([a-z0-9]+-[\w-]+\)", 0),       # labels
    (r"^\*\*\d+\.\*\*|^\s*\d+\.(?=\s)", re.MULTILINE),                 # exercise and list numbers
    (r"(?:[Cc]hapters?|[Ee]xperiments?|[Ss]ections?|Sec\.|§|[Ff]ig(?:ure)?s?\.?|[Ee]qs?\.|[Ee]quations?|[Tt]ables?|"
     r"[Ee]xercises?|[Aa]ppendi(?:x|ces)|[Aa]lgorithms?|[Tt]heorems?|[Ll]emmas?|[Ss]teps?)\s*[(\[]?"
     r"\d+[a-z]?(?:\.\d+)*(?:\([a-z]+\))?(?:\s*(?:[-–,/]|and|or|to)\s*\[?\d+[a-z]?(?:\.\d+)*)*", 0),
    (r"(?<=[A-Za-z]-)\d+|(?<=[A-Za-z])\d+|\d+(?=[A-Za-z])", 0),             # ResNet-50, UCF101, 5K
)]
_PROSE_NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")
_ANY_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
_YEAR = re.compile(r"(?:19|20)\d\d")


def prose_numbers(text: str, facts=()) -> list[tuple[str, bool, str]]:
    """The numbers a reader sees in Markdown ``text``: ``(number, followed by %/points, context)``."""
    for phrase in facts:
        text = text.replace(phrase, " ")
    for pattern in _SKIP:
        text = pattern.sub(" ", text)
    found = []
    for m in _PROSE_NUMBER.finditer(text):
        if _YEAR.fullmatch(m.group(0)):
            continue
        percent = bool(re.match(r"\s*(?:%|percent|(?:percentage )?points?)", text[m.end():]))
        found.append((m.group(0), percent, " ".join(text[max(0, m.start() - 40):m.end() + 30].split())))
    return found


def printed_values(text: str) -> list[float]:
    out = []
    for m in _ANY_NUMBER.finditer(text):
        try:
            out.append(abs(float(m.group(0).replace(",", ""))))
        except ValueError:
            pass
    return out


def same_at_precision(number: str, percent: bool, printed: list[float]) -> bool:
    """``number`` as written (its decimals, or its mantissa's for ``1e-13``) equals a printed value rounded to
    that precision; a percentage also matches a printed fraction (0.433 for 43.3 %)."""
    s = number.replace(",", "")
    x = float(s)
    if "e" in s:
        mantissa = s.split("e")[0]
        k = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return any(f"{v:.{k}e}" == f"{x:.{k}e}" for v in printed)
    k = len(s.split(".")[1]) if "." in s else 0
    return any(abs(round(w, k) - x) < 1e-9 for v in printed for w in ((v, 100 * v) if percent else (v,)))


def _output_text(cell: dict) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append("".join(o.get("text", "")))
        for kind in ("text/plain", "text/html", "text/markdown", "text/latex"):
            parts.append("".join(o.get("data", {}).get(kind, "")))
    return "\n".join(parts)


_HEADING = re.compile(r"^(?=#{1,2}\s)", re.MULTILINE)


def sections(nb: dict) -> list[list[tuple[int, dict]]]:
    """The notebook cut at ``#`` / ``##`` headings (also one inside a cell, which is split there): lists of
    ``(index, cell)``."""
    out: list[list[tuple[int, dict]]] = [[]]
    for i, cell in enumerate(nb["cells"]):
        parts = _HEADING.split(source(cell)) if cell["cell_type"] == "markdown" else [None]
        for k, part in enumerate(parts):
            if part is not None and _HEADING.match(part) and out[-1]:
                out.append([])
            if part is not None and (part.strip() or k == 0):
                out[-1].append((i, {**cell, "source": part}))
            elif part is None:
                out[-1].append((i, cell))
    return out


def glued_names(nb: dict) -> set[str]:
    return {o.get("metadata", {}).get("scrapbook", {}).get("name") for cell in nb["cells"]
            for o in cell.get("outputs", [])} - {None}


def numbers(nb: dict, facts=()) -> list[str]:
    glued = glued_names(nb)
    out = [f"{_where(i, cell)}: {{glue:text}}`{name}` is glued by no cell" for i, cell in enumerate(nb["cells"])
           if cell["cell_type"] == "markdown"
           for name in re.findall(r"\{glue(?::text)?\}`([^`:]+)", source(cell)) if name not in glued]
    for section in sections(nb):
        printed = []
        for _, cell in section:
            if cell["cell_type"] == "code":
                printed += printed_values(_output_text(cell))
                if not tags(cell) & {"remove-cell", "remove-input"}:
                    printed += printed_values(source(cell))
        for i, cell in section:
            if cell["cell_type"] != "markdown":
                continue
            for number, percent, context in prose_numbers(source(cell), facts):
                if not same_at_precision(number, percent, printed):
                    out.append(f"{_where(i, cell)}: {number!r} is neither printed in its section nor glued: "
                               f"{context!r}")
    return out


RULES = {"solutions": solutions, "history": history, "long_outputs": long_outputs, "code_lines": code_lines,
         "figures": figures,
         "png_dpi": dpi, "run_time": run_time, "from_scratch": from_scratch,
         "numbers": numbers}


def _facts(path: Path) -> list[str]:
    return [phrase for chapter, facts in REAL_FILE_FACTS.items() if path.name.startswith(chapter)
            for phrase in facts]


def applies(rule: str, path: Path) -> bool:
    """Every rule applies to every chapter, but ``from_scratch`` only to chapters 3-7 (they build a model) and
    ``numbers`` only to the chapters in :data:`NUMBERS`."""
    if rule == "from_scratch":
        return path.name.startswith(FROM_SCRATCH)
    if rule == "numbers":
        return path.name.startswith(tuple(f"{n}_" for n in NUMBERS))
    return True


def _run(rule: str, path: Path) -> list[str]:
    nb = load(path)
    if rule == "history":
        return history(nb, lab_notes=not path.name.startswith(LAB_NOTES_PENDING))
    return numbers(nb, _facts(path)) if rule == "numbers" else RULES[rule](nb)


def check(path: Path) -> dict[str, list[str]]:
    return {name: _run(name, path) for name in RULES if applies(name, path)}


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_convention(path: Path, rule: str) -> None:
    if not applies(rule, path):
        pytest.skip(f"{rule} does not apply to this chapter (see applies)")
    problems = _run(rule, path)
    assert not problems, f"{path.name}, {rule}:\n  " + "\n  ".join(problems)


def _title(nb: dict) -> str:
    return re.match(r"#\s+(.+)", source(nb["cells"][0]).strip()).group(1).strip()


def _stated_run_time(nb: dict) -> str:
    m = _RUN_TIME.search(source(nb["cells"][0]))
    return f"{m.group(1)} {m.group(2)}"


def test_index_repeats_each_chapter_title_and_run_time() -> None:
    """``book/index.md``'s chapter list names every chapter by (a part of) its own title, in the order of
    ``_toc.yml``, and its time table's running column starts with the run time the chapter's first cell
    states."""
    index = (BOOK / "index.md").read_text()
    toc = re.findall(r"file: book/(0\w+)", (BOOK.parent / "_toc.yml").read_text())
    listed = re.findall(r"\[\*\*(.+?)\*\*\]\((0\w+)\.ipynb\)", index)
    assert [name for _, name in listed] == toc
    rows = dict((name, running) for name, running in
                re.findall(r"^\| \[[^]]+\]\((0\w+)\.ipynb\) \| [^|]+ \| ([^|]+) \|$", index, re.MULTILINE))
    assert sorted(rows) == sorted(toc)
    for text, name in listed:
        nb = load(BOOK / f"{name}.ipynb")
        assert text.lower() in _title(nb).lower(), (name, text, _title(nb))
        stated = _stated_run_time(nb)
        assert rows[name].startswith(stated), f"index.md says {rows[name]!r} for {name}, its first cell {stated!r}"


def test_real_file_facts_name_tests_that_check_them() -> None:
    tests = Path(__file__).resolve().parent
    for chapter, facts in REAL_FILE_FACTS.items():
        text = load(next(BOOK.glob(f"{chapter}_*.ipynb")))
        prose = "\n".join(source(c) for c in text["cells"] if c["cell_type"] == "markdown")
        for phrase, where in facts.items():
            assert phrase in prose, (chapter, phrase)
            file, function = where.split("::")
            code = (tests / file).read_text()
            body = code.split(f"def {function}(", 1)[1].split("\ndef ", 1)[0]
            numbers = [n.replace(",", "") for n in re.findall(r"\d[\d,]*", phrase)]
            assert all(n in body for n in numbers), (phrase, where)


def test_rules_catch_what_they_should() -> None:
    """Each rule fails on a small notebook that breaks it and passes on one that keeps it."""
    def md(s, **meta):
        return {"cell_type": "markdown", "source": s, "metadata": meta}

    def code(s, tags=(), outputs=()):
        return {"cell_type": "code", "source": s, "metadata": {"tags": list(tags)}, "outputs": list(outputs)}

    good = {"cells": [md("# T\n\n*Run time: about 5 s on the CI machine.*"),
                      md("See {numref}`fig-x`."),
                      {**code("plot()"), "metadata": {"mystnb": {"figure": {"name": "fig-x"}}}},
                      md("## Exercises\n\n**1.** Do it."),
                      md("```{admonition} Solution\n:class: dropdown\nIt works.\n```"),
                      code("assert 1", tags=["hide-input", "rerun"])]}
    assert solutions(good) == [] and figures(good) == [] and run_time(good) == []
    bad = {"cells": [md("# T"), {**code("plot()"), "metadata": {"mystnb": {"figure": {"name": "fig-y"}}}},
                     md("## Exercises\n\n**1.** Do it."), md("It works: an earlier version said so."),
                     code("print('\\n' * 20)", outputs=[{"output_type": "stream", "text": "a\n" * 20}])]}
    assert len(solutions(bad)) >= 3 and figures(bad) and run_time(bad)
    image = {"output_type": "display_data", "data": {"image/png": ""}}
    two = {"cells": [md("See {numref}`fig-x`."), {**code("plot(); show(table)", outputs=[image, image]),
                                                 "metadata": {"mystnb": {"figure": {"name": "fig-x"}}}}]}
    assert figures(two) and "2 outputs" in figures(two)[0]
    assert history(bad) and long_outputs(bad)
    lab = {"cells": [md("## Benchmark designs tried"), md("Re-run under the emulated older CPU."),
                     md("`make test-portable` gives the same digits on any CPU."),
                     md("A cell tagged nbval-ignore-output."), md("This row was tried first.")]}
    assert len({p.split(":")[0] for p in history(lab)}) == 5 and not history(lab, lab_notes=False)
    assert not history({"cells": [md("Designs are chosen on a validation instance; see the appendix.")]})
    assert code_lines({"cells": [code("x" * 89)]}) and not code_lines({"cells": [code("x" * 88)]})
    printed = [{"output_type": "stream", "name": "stdout", "text": "mAP 0.4583, F1 0.433, gain 18.2\n"}]
    kept = {"cells": [md("# T\n\n*Run time: about 5 s.*"), code("run()", outputs=printed),
                      md("mAP 0.46 (0.458 to three digits), F1 43 %, gains of 18 points; Fig. 2 and "
                         "Eq. 3 of chapter 4, in 2024; $x = 7$, `k = 9`, ResNet-50, {glue:text}`gap`; "
                         'the paper reports <span class="paper">89.07</span>.')]}
    assert [p.split(": ", 1)[1] for p in numbers(kept)] == ["{glue:text}`gap` is glued by no cell"]
    broken = {"cells": [md("# T"), code("run()", outputs=printed),
                        md("mAP 0.47, F1 48-58 %, 400 steps."), md("## Next\n\nmAP 0.4583 again.")]}
    found = " ".join(numbers(broken))
    assert all(f"'{n}'" in found for n in ("0.47", "48", "58", "400", "0.4583")), found
    assert "'0.46'" not in found
    assert numbers(broken, facts=["400 steps"]) and "'400'" not in " ".join(numbers(broken, facts=["400 steps"]))


def write_run_time(path: Path) -> None:
    """Rewrites the run-time line of the first cell from the stored execution's timestamps."""
    nb = load(path)
    seconds = stored_seconds(nb)
    if seconds is None:
        return
    stated = f"{max(5, round(seconds / 5) * 5):.0f} s" if seconds < 150 else f"{seconds / 60:.0f} min"
    cell = nb["cells"][0]
    text, n = _RUN_TIME.subn(lambda m: m.group(0)[:m.start(1) - m.start(0)] + stated, source(cell), count=1)
    if n:
        cell["source"] = text.splitlines(keepends=True)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-run-time"]:
        for p in sys.argv[2:]:
            write_run_time(Path(p))
        sys.exit(0)
    paths = [Path(p) for p in sys.argv[1:]] or CHAPTERS
    total = 0
    for p in paths:
        for rule, problems in check(p).items():
            for problem in problems:
                print(f"{p.name} [{rule}] {problem}")
            total += len(problems)
    print(f"{total} problem(s)")
    sys.exit(1 if total else 0)
