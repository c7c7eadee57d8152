"""Markdown to HTML for text a user writes on a dashboard, safe to put in a page as it is.

CommonMark through markdown-it-py with raw HTML switched off, so `<script>` and any other tag
come out as text; markdown-it's link check refuses `javascript:`, `vbscript:`, `file:` and
`data:` URLs (bar a few image types), so a link can only go somewhere. Tables are on (a results
table is the commonest thing to write beside a chart); links open in a new tab without handing
it this page.
"""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

    def link_open(renderer, tokens, idx, options, env):  # type: ignore[no-untyped-def]
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        tokens[idx].attrSet("target", "_blank")
        return renderer.renderToken(tokens, idx, options, env)

    parser.add_render_rule("link_open", link_open)
    return parser


def render_markdown(text: str) -> str:
    return _parser().render(text)
