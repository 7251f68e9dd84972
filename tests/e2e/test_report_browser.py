"""report.html opened offline in headless Chromium: every figure laid out and visible, no raw Markdown, and a
screenshot taken (Debian's `chromium` package; `.ci/run` installs it where missing)."""

import json
import re
import shutil
import subprocess

import pytest
from PIL import Image

from campaign.analysis.report import write_report
from campaign.analysis.report_inputs import gather_report_inputs
from tests.helpers.analysis_fixtures import executed_workspace

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]

# Appended to a copy of the page for the test only (the report itself has no script): measures every figure as
# laid out and looks for Markdown left in the visible text.
PROBE = """<script>
window.addEventListener('load', () => {
  const figs = [...document.querySelectorAll('figure svg')].map(s => {
    const r = s.getBoundingClientRect();
    return {w: r.width, h: r.height, visible: getComputedStyle(s).visibility !== 'hidden'};
  });
  const text = document.body.innerText;
  const out = {figures: figs, markdown: /\\*\\*|\\]\\(|^#+ |`/m.test(text), th: document.querySelectorAll('th').length,
               right: [...document.querySelectorAll('td.n')].every(td => getComputedStyle(td).textAlign === 'right'),
               images: [...document.images].map(i => i.src.slice(0, 16))};
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""


def _chromium(profile, *args, timeout=120):
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    ws = executed_workspace(tmp_path_factory.mktemp("browser") / "w")
    html, _, _ = write_report(ws.report_dir, gather_report_inputs(ws))
    return html


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed here (Debian: apt-get install chromium; .ci/run installs it)",
)
def test_report_opens_offline_with_every_figure_visible(report_html, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(report_html.read_text().replace("</body>", PROBE))
    dom = _chromium(tmp_path / "profile-dom", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, dom.stdout[-2000:]
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert len(out["figures"]) == 6
    assert all(f["visible"] and f["w"] > 300 and f["h"] > 120 for f in out["figures"]), out["figures"]
    assert not out["markdown"] and out["th"] >= 20 and out["right"]
    assert all(src.startswith("data:") for src in out["images"])  # nothing is fetched

    shot = tmp_path / "report.png"
    run = _chromium(
        tmp_path / "profile-shot",
        "--window-size=1200,2400",
        "--hide-scrollbars",
        f"--screenshot={shot}",
        report_html.as_uri(),
    )
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    image = Image.open(shot).convert("L")
    assert image.size == (1200, 2400)
    # Figures drawn: plenty of non-white pixels in every 300-px band of the page's first 2,400 px.
    for top in range(0, 2400, 300):
        band = image.crop((0, top, 1200, top + 300))
        dark = sum(band.histogram()[:200])
        assert dark > 2000, f"band at {top} px looks empty ({dark} dark pixels)"


DOCS_PROBE = """<script>
window.addEventListener('load', () => {
  const note = document.getElementById('campaign-offline-note');
  const r = note ? note.getBoundingClientRect() : {width: 0, height: 0};
  const out = {text: note ? note.innerText : '', w: r.width, h: r.height, top: r.top,
               link: note && note.querySelector('a') ? note.querySelector('a').href : ''};
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed here (Debian: apt-get install chromium; .ci/run installs it)",
)
def test_data_docs_offline_say_why_and_point_to_the_offline_page(tmp_path):
    """Great Expectations' Data Docs fetch their CSS and JavaScript from CDNs: with the network off, the note at the
    top is laid out and visible, and its link opens the offline page written beside them."""
    import pandas as pd

    from campaign.analysis.data_quality_page import OFFLINE_PAGE, add_offline_banner, data_quality_html
    from data_checks.runner import validate_frame

    checks = tmp_path / "checks"
    frame = pd.DataFrame({"text": ["a b c", "d e f"]})
    spec = {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "text"}}
    result = validate_frame(frame, [spec], docs_dir=checks / "data_docs")
    index = checks / "data_docs" / "index.html"
    assert "https://" in index.read_text()  # the CDN assets this note is about
    (checks / OFFLINE_PAGE).write_text(data_quality_html("t", "1 expectation", [], "x", "d" * 64, "docs"))
    probe = index.with_name("probe.html")
    probe.write_text(
        add_offline_banner(index.read_text(), f"../{OFFLINE_PAGE}").replace("</body>", DOCS_PROBE)
    )
    dom = _chromium(tmp_path / "profile-docs", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, dom.stdout[-2000:]
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert "public CDNs" in out["text"] and out["w"] > 300 and out["h"] > 10 and out["top"] < 50, out
    assert out["link"] == (checks / OFFLINE_PAGE).as_uri() and result["success"]


STYLE_PROBE = """<script>
window.addEventListener('load', () => {
  const s = e => getComputedStyle(document.querySelector(e));
  const out = {font: s('body').fontFamily, th: s('th').backgroundColor, td: s('td').borderBottomStyle,
               bad: s('.bad').color, width: document.querySelector('table').getBoundingClientRect().width,
               sheets: [...document.styleSheets].map(x => x.href), link: document.querySelector('a').href};
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed here (Debian: apt-get install chromium; .ci/run installs it)",
)
def test_the_data_docs_page_campaign_links_renders_styled_with_the_network_off(tmp_path):
    """The Data Docs page the gates link (`checks/data_quality.html`) is styled from itself: with every host
    unresolvable (the browser's network is off), its table, colours and fonts are those of its own style sheet,
    it loads no style sheet from anywhere, and it links Great Expectations' own Data Docs for where one is online."""
    from campaign.analysis.data_quality_page import data_quality_html
    from tests.helpers.paths import REPO

    rows = [
        {
            "expectation": "expect_column_values_to_not_be_null",
            "column": "text",
            "bounds": "",
            "observed": "0 null",
            "passed": True,
        },
        {
            "expectation": "expect_table_row_count_to_be_between",
            "column": "",
            "bounds": "1,000 .. 5,000",
            "observed": "431",
            "passed": False,
        },
    ]
    page = tmp_path / "checks" / "data_quality.html"
    page.parent.mkdir()
    page.write_text(
        data_quality_html(
            "demo", "1 of 2 expectations met on 431 rows", rows, "1.2.3", "d" * 64, "data_docs/index.html"
        )
    )
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", STYLE_PROBE))
    dom = _chromium(tmp_path / "profile-dq", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert found, dom.stdout[-2000:]
    out = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert out["sheets"] == [None], out  # one style sheet, inline: nothing to fetch
    assert "serif" in out["font"] and not out["font"].startswith('"Times'), out  # its own font stack
    assert out["th"] not in ("rgba(0, 0, 0, 0)", "transparent") and out["td"] != "none", out  # table styled
    assert out["bad"] not in ("rgb(0, 0, 0)",) and out["width"] > 400, out
    assert out["link"] == (page.parent / "data_docs" / "index.html").as_uri()
    shots = REPO / "build" / "e2e"
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / "data-docs-offline.png"
    run = _chromium(
        tmp_path / "profile-dq-shot",
        "--window-size=1100,500",
        "--hide-scrollbars",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    print("screenshot:", shot)
