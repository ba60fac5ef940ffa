"""Sphinx extension of the book: pages that load nothing from another host.

sphinx-thebe (loaded by Jupyter Book whether or not live code is used) writes an inline script that declares the
address of its bundle on a public CDN, and writes it twice, so every page threw ``SyntaxError: Identifier
'THEBE_JS_URL' has already been declared``. The book has no live-code buttons: its scripts are left out.
"""

from __future__ import annotations


def _is_thebe(js) -> bool:
    body = (getattr(js, "attributes", None) or {}).get("body") or ""
    filename = str(getattr(js, "filename", js) or "")
    return "THEBE_JS_URL" in body or filename.endswith("sphinx-thebe.js")


def _drop_thebe(app, pagename, templatename, context, doctree) -> None:
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if not _is_thebe(js)]


def setup(app):
    app.connect("html-page-context", _drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
