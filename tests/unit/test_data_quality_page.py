"""The data_quality gate's offline page and the note the Data Docs index gets (their assets come from CDNs)."""

from html.parser import HTMLParser

from campaign.analysis.data_quality_page import add_offline_banner, data_quality_html

ROWS = [
    {
        "expectation": "expect_column_values_to_not_be_null",
        "column": "text",
        "bounds": "",
        "observed": "0 unexpected",
        "passed": True,
    },
    {
        "expectation": "expect_table_row_count_to_be_between",
        "column": "",
        "bounds": "1 .. 5,000",
        "observed": "431",
        "passed": False,
    },
]


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href") and v]


def test_the_offline_page_shows_every_expectation_and_fetches_nothing():
    html = data_quality_html(
        "demo", "2 expectations on 431 rows", ROWS, "1.2.3", "d" * 64, "data_docs/index.html"
    )
    parser = _Refs()
    parser.feed(html)
    # One reference: the link to Great Expectations' own Data Docs, followed only when clicked; nothing fetched.
    assert parser.refs == ["data_docs/index.html"] and parser.tags.count("a") == 1
    assert not {"script", "link", "img"} & set(parser.tags)
    assert "expect_table_row_count_to_be_between" in html and "1 .. 5,000" in html and ">431<" in html
    assert '<span class="bad">failed</span>' in html and '<span class="good">passed</span>' in html
    assert "public CDNs" in html


def test_the_data_docs_index_says_why_it_looks_broken_offline_and_where_to_look_once():
    index = '<html><head><link href="https://cdn.example/b.css"></head><body class="x">\n<div>GX</div></body></html>'
    marked = add_offline_banner(index, "../data_quality.html")
    assert marked.index('id="campaign-offline-note"') > marked.index('<body class="x">')
    assert '<a href="../data_quality.html">' in marked and "public CDNs" in marked
    assert add_offline_banner(marked, "../data_quality.html") == marked  # a second validate adds nothing
