"""The data_quality gate's results as one self-contained page (`checks/data_quality.html`), readable offline.

Great Expectations' Data Docs load their CSS and JavaScript from public CDNs (Bootstrap, jQuery, bootstrap-table,
Vega, Font Awesome), so without network they show a broken page; this page shows the same expectations, each with
its bounds and what was observed, and fetches nothing.
"""

from __future__ import annotations

from typing import Any

from campaign.analysis.report import css, environment

OFFLINE_PAGE = "data_quality.html"  # beside the Data Docs folder, in the workspace's checks/


def data_quality_html(
    campaign: str,
    summary: str,
    rows: list[dict[str, Any]],
    gx_version: str,
    data_digest: str,
    data_docs: str,
) -> str:
    """`rows`: expectation, column, bounds, observed (text) and passed, one per expectation."""
    return (
        environment()
        .get_template("data_quality.html.j2")
        .render(
            campaign=campaign,
            summary=summary,
            rows=rows,
            gx_version=gx_version,
            data_digest=data_digest,
            data_docs=data_docs,
            css=css(),
        )
    )


def offline_banner(offline_page: str) -> str:
    """The note put at the top of the Data Docs index: plain HTML with inline style, shown with no network."""
    return (
        '<div id="campaign-offline-note" style="background:#fdf8e7;border-left:4px solid #d4a017;'
        'padding:.5em 1em;margin:0;font:15px system-ui,sans-serif;color:#1d1d1f">'
        "Offline? Great Expectations' Data Docs load their styles and scripts from public CDNs and show a broken "
        f'page without network. The same results, readable offline: <a href="{offline_page}">{offline_page}</a>.'
        "</div>"
    )


def add_offline_banner(index_html: str, offline_page: str) -> str:
    """`index_html` with `offline_banner` right after its <body> tag (once: an existing note is kept)."""
    if 'id="campaign-offline-note"' in index_html:
        return index_html
    start = index_html.find("<body")
    end = index_html.find(">", start) if start >= 0 else -1
    if end < 0:
        return offline_banner(offline_page) + index_html
    return index_html[: end + 1] + offline_banner(offline_page) + index_html[end + 1 :]
