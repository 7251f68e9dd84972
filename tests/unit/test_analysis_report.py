"""The report, `campaign sql` and runs side by side, on a real (simulated) demo window, without Prefect."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from campaign.analysis.catalog_sql import format_table, run_query
from campaign.analysis.compare import check_targets, load_run, render_compare, write_compare
from campaign.analysis.report import write_report
from campaign.analysis.report_inputs import gather_report_inputs
from campaign.errors import ConfigError, DataError
from campaign.sim.summary import ReplicaSummary
from campaign.store import catalog
from tests.helpers.analysis_fixtures import executed_workspace


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    ws = executed_workspace(tmp_path_factory.mktemp("report") / "w")
    inputs = gather_report_inputs(ws)
    html, _md, markdown = write_report(ws.report_dir, inputs)
    return ws, inputs.result, html.read_text(), markdown, inputs.one_second, inputs.zoom_note, inputs


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.th = 0
        self.numeric_left = []
        self.svg = 0
        self.external = []
        self._td_class = None
        self._in_td = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "th":
            self.th += 1
        if tag == "svg":
            self.svg += 1
        if tag == "td":
            self._td_class, self._in_td = attrs.get("class") or "", True
        for key in ("src", "href"):
            if attrs.get(key, "").startswith(("http:", "https:", "//")):
                self.external.append(attrs[key])

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_td = False

    def handle_data(self, data):
        text = data.strip()
        if (
            self._in_td
            and re.fullmatch(r"[$-]?[\d,]+(\.\d+)?( (MW|MWh|MW/s|s|h|GPU-h))?%?", text)
            and "n" not in self._td_class.split()
        ):
            self.numeric_left.append(text)


def test_the_one_second_series_is_rebuilt_from_the_committed_config(report):
    _, result, _, _, one_second, note, _ = report
    assert note == "" and one_second is not None
    assert len(one_second) == pytest.approx(result.window.hours * 3600, abs=1)
    assert one_second.max() == pytest.approx(result.figures.power_mw.peak, rel=1e-9)
    assert len(result.power_zoom) == 2 and all(p.swing_mw >= 0 for p in result.power_zoom)


def test_report_html_is_self_contained_real_html(report):
    _, _, html, _, _, _, _ = report
    parser = _Cells()
    parser.feed(html)
    assert "**" not in html and "](" not in html and "`" not in html  # no raw markdown
    assert parser.th >= 20  # header cells
    assert parser.numeric_left == []  # every number right-aligned
    assert parser.external == [] and "<script" not in html and "<link" not in html
    assert parser.svg >= 6  # timeline, waterfall, failures, checkpoint, power band, power zoom
    for section in (
        "Timeline",
        "Goodput",
        "Failures",
        "Checkpoint interval",
        "Power and energy",
        "Data",
        "Gates",
        "Recommendations",
        "Released early",
        "ETTR while the job ran",
    ):
        assert section in html, section


def test_the_markdown_summary_embeds_its_figures(report):
    _, _, _, markdown, _, _, _ = report
    images = re.findall(r"!\[[^\]]*\]\(([^)]*)\)", markdown)
    assert len(images) == 4 and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    svg = base64.b64decode(images[0].split(",", 1)[1]).decode("utf-8")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "ETTR while the job ran" in markdown and "released early" in markdown


def test_sql_reads_the_views_and_writes_nothing(report):
    ws = report[0]
    cols, rows = run_query(
        ws.root, "select kind, sum(n_interruptions) n from interruptions_by_day group by kind"
    )
    assert cols == ["kind", "n"] and rows
    cols, rows = run_query(ws.root, "select gate, passed from gate_figures")
    assert rows == [("layout", True), ("memory", False)]
    for bad in (
        "delete from runs",
        "copy runs to 'x.csv'",
        "select * from read_csv('/etc/passwd')",
        "attach 'other.duckdb'",
        "select * from no_such_table",
        "  ",
    ):
        with pytest.raises(ConfigError) as err:
            run_query(ws.root, bad)
        assert err.value.exit_code == 2
    with pytest.raises(ConfigError, match="no campaign catalog"):
        run_query(ws.root / "nope", "select 1")


@pytest.mark.parametrize(
    ("query", "fix"),
    [
        ("selec 1", "fix the SQL syntax"),
        ("select * from no_such_table", "use a table, view or column the catalog has"),
        ("select no_such_column from runs", "use a table, view or column the catalog has"),
        ("drop table runs", "the catalog is read-only"),
        ("select * from read_csv('/etc/passwd')", "the catalog is read-only"),
        ("select 'a'::int", "check the query's values and types"),
    ],
)
def test_a_failed_query_gets_the_fix_for_what_went_wrong(report, query, fix):
    """A syntax error is not answered with "the catalog is read-only": each failure says what to change."""
    with pytest.raises(ConfigError) as err:
        run_query(report[0].root, query)
    assert err.value.fix.startswith(fix) and "docs/report-and-sql.md" in err.value.fix


def test_format_table_right_aligns_numbers():
    text = format_table(["name", "n"], [("a", 1), ("bbbb", 12345)])
    lines = text.splitlines()
    assert lines[0].startswith("name") and lines[2].endswith("     1") and lines[3].endswith("12,345")
    assert lines[-1] == "(2 rows)"


def test_compare_two_windows_highlights_what_differs(report, tmp_path):
    ws = report[0]
    other = executed_workspace(tmp_path / "other", ("plan.checkpoint.interval_s=3600",))
    check_targets([str(ws.root), str(other.root)])
    comparison = render_compare([load_run(str(ws.root)), load_run(str(other.root))])
    out = comparison.to_json()
    interval = next(m for m in out["metrics"] if m["key"] == "checkpoint_interval_s.used")
    assert interval["differs"] == [False, True] and interval["values"][1] == 3600
    assert "checkpoint interval" in out["differences"]
    assert 'class="n diff"' in comparison.html and "<svg" in comparison.html
    _html, path = write_compare(tmp_path / "cmp", comparison)
    assert json.loads(path.read_text())["runs"][1]["name"] == "other"


def test_compare_simulate_runs(tmp_path):
    def sim(ettr):
        s = {"mean": ettr, "p10": ettr - 0.02, "p50": ettr, "p90": ettr + 0.01}
        return {
            "replicas": 8,
            "seed": 1,
            "wall_s": 0.1,
            "summary": {
                "ettr": s,
                "completion_days": {"mean": 1.5, "p10": 1.4, "p50": 1.5, "p90": 1.7},
                "interruptions_unexpected": {"mean": 4, "p10": 2, "p50": 4, "p90": 6},
                "p_complete_in_window": 0.9,
                "tokens_trained": s,
                "power_mw": {"peak": 1},
                "energy_mwh": 5,
            },
        }

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(sim(0.9)))
    b.write_text(json.dumps(sim(0.8)))
    comparison = render_compare([load_run(str(a)), load_run(str(b))])
    assert "ETTR (p50 of replicas)" in comparison.to_json()["differences"]
    assert "P(finish inside the window)" not in comparison.to_json()["differences"]
    assert comparison.to_json()["runs"][0]["window_length"].startswith("fits: 90%")
    b.write_text(json.dumps({**sim(0.8), "summary": {**sim(0.8)["summary"], "p_complete_in_window": 0.5}}))
    short = render_compare([load_run(str(a)), load_run(str(b))]).to_json()["runs"][1]["window_length"]
    assert short.startswith("too short: only 50%")


def test_compare_refuses_unknown_and_foreign_targets(report, tmp_path):
    ws = report[0]
    with pytest.raises(ConfigError, match="no such workspace or simulate JSON") as err:
        check_targets([str(ws.root), str(tmp_path / "missing")])
    assert err.value.exit_code == 2 and str(tmp_path / "missing") in err.value.where
    junk = tmp_path / "junk.json"
    junk.write_text('{"a": 1}')
    with pytest.raises(DataError, match="not the output of `campaign simulate --json`"):
        check_targets([str(ws.root), str(junk)])
    with pytest.raises(ConfigError, match="at least two"):
        check_targets([str(ws.root)])
    assert not (tmp_path / "compare").exists()


def test_smoothing_is_costed_against_the_same_window_without_it(tmp_path):
    from campaign.analysis.power_detail import smoothing_effect

    ws = executed_workspace(
        tmp_path / "w",
        ("plan.power_smoothing.floor_fraction=0.6", "plan.power_smoothing.ramp_mw_per_s=0.005"),
    )
    result = gather_report_inputs(ws).result  # as the analyse task reads it
    effect = result.smoothing_effect
    assert effect is not None and effect.extra_energy_mwh > 0  # a floor burns energy...
    assert effect.max_ramp_mw_per_s.with_ <= 0.005 + 1e-9 < effect.max_ramp_mw_per_s.without  # ...for this
    advice = next(r for r in result.recommendations if r["topic"] == "power smoothing")
    assert "MWh" in advice["advice"] and "MW/s" in advice["figure"]
    plain = executed_workspace(tmp_path / "plain")
    with catalog(plain, read_only=True) as con:
        config_json, summary = con.execute(
            "SELECT c.config_json, r.summary FROM commitments c, sim_replicas r"
        ).fetchone()
    assert smoothing_effect(config_json, 0, ReplicaSummary.from_json(json.loads(summary))) is None


def test_the_rehearsal_loss_curve_is_embedded_in_both_reports(report, tmp_path):
    from campaign.analysis.report import rehearsal_section, render_html, render_markdown, window_figures

    _, result, _, _, _, _, inputs = report
    details = {
        "passed": True,
        "loss_first_tenth": 5.5,
        "loss_last_tenth": 3.1,
        "loss_drop": 0.44,
        "heldout_first": 5.4,
        "heldout_last": 3.3,
        "kill_step": 60,
        "killed_at_step": 61,
        "resumed_step": 50,
        "restore_check": "bit-identical",
    }
    curves = {
        "reference": {"loss": [[i, 5.5 - i / 50] for i in range(120)], "heldout": [[0, 5.4], [119, 3.3]]},
        "faulted": {"resumed_step": 50, "loss": [[i, 5.5 - i / 50] for i in range(50, 120)]},
    }
    section = rehearsal_section({"details": details, "curves": curves, "timings": {"tokens_per_s": 1234.0}})
    assert section.image.startswith("data:image/png;base64,") and "bit-identical" in section.line
    figures, result = window_figures(result, inputs.events, inputs.power_band, None)
    html = render_html(result, figures, "", section)
    assert 'alt="rehearsal loss curve"' in html and "1,234 tokens/s" in html
    assert "![rehearsal loss curve](data:image/png;base64," in render_markdown(result, figures, section)
    failed = rehearsal_section(
        {"details": {"passed": False, "problems": ["loss did not fall"]}, "curves": {}}
    )
    assert failed.line == "failed: loss did not fall"
    assert "No rehearsal result" in render_html(result, figures)


def test_decimation_keeps_every_column_extreme_and_the_order():
    import numpy as np

    from campaign.analysis.plots import decimate_steps, one_per_column

    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 54, 40_000))
    y = np.cumsum(rng.normal(0, 1, x.size))
    xs, ys = decimate_steps(x, y, 54.0, columns=500)
    assert len(xs) <= 4 * 500 and np.all(np.diff(xs) >= 0) and xs[0] == x[0] and xs[-1] == x[-1]
    col, col_d = (x / 54 * 500).astype(int), (xs / 54 * 500).astype(int)
    for c in rng.choice(np.unique(col), 50):  # each pixel column keeps its lowest and highest value
        assert ys[col_d == c].min() == y[col == c].min() and ys[col_d == c].max() == y[col == c].max()
    small = x[:100]
    short = decimate_steps(small, y[:100], 54.0)
    assert (
        short[0] is small and short[1] is not None and len(short[1]) == 100
    )  # short series are drawn as they are
    marks = one_per_column(x, 54.0, columns=500)
    assert len(np.unique((marks / 54 * 500).astype(int))) == len(marks) == len(np.unique(col))


def test_the_power_band_is_the_per_minute_min_mean_max_per_bin(report):
    import numpy as np

    inputs = report[6]
    with catalog(report[0], read_only=True) as con:
        raw = con.execute("SELECT t_s, power_mw FROM sim_power").df()
    minute = raw.groupby(raw["t_s"] // 60)["power_mw"].mean()
    band = inputs.power_band
    assert len(band) <= 720 and band["day"].is_monotonic_increasing
    assert np.isclose(band["min_mw"].min(), minute.min()) and np.isclose(band["max_mw"].max(), minute.max())
    assert (band["min_mw"] <= band["mean_mw"] + 1e-12).all() and (
        band["mean_mw"] <= band["max_mw"] + 1e-12
    ).all()


def test_a_markdown_special_in_a_category_name_keeps_report_md_tables_whole(report):
    from types import SimpleNamespace

    from campaign.analysis.report import render_markdown

    result = report[6].result
    assert result.figures.failures, "the demo window has failure categories"
    odd = replace(result.figures.failures[0], category="gpu|hbm *bold* `code` [link](x) <b>x</b> a\\|b")
    result = replace(result, figures=replace(result.figures, failures=[odd, *result.figures.failures[1:]]))
    figures = {k: SimpleNamespace(svg="<svg/>") for k in ("timeline", "waterfall", "failures", "power")}
    markdown = render_markdown(result, figures)  # type: ignore[arg-type]
    lines = markdown.splitlines()
    header = lines.index("| category | observed | expected | 95% Poisson range |")
    rows = lines[header + 2 : header + 2 + len(result.figures.failures)]

    def cells(line: str) -> int:
        return len(re.findall(r"(?<!\\)\|", line.replace("\\\\", "")))

    assert all(cells(row) == cells(lines[header]) for row in rows), rows
    assert rows[0].startswith(
        "| gpu\\|hbm \\*bold\\* \\`code\\` \\[link\\](x) &lt;b&gt;x&lt;/b&gt; a\\\\\\|b |"
    )


def test_report_md_is_not_html_escaped_and_report_html_is(report):
    """An apostrophe stays one in Markdown (not `&#39;`); the HTML report still escapes it and any tag."""
    from types import SimpleNamespace

    from campaign.analysis.report import render_html, render_markdown

    result = report[6].result
    tokens = replace(result.figures, tokens_trained=81_920.0, tokens_target=163_840.0)
    result = replace(result, figures=tokens, simulation_note="the campaign's own run <b>x</b>")
    result = replace(result, power_zoom=result.power_zoom or [])
    kinds = ("timeline", "waterfall", "failures", "power", "power_zoom")
    figures = {k: SimpleNamespace(svg="<svg/>") for k in kinds}
    markdown = render_markdown(result, figures)  # type: ignore[arg-type]
    html = render_html(result, figures)  # type: ignore[arg-type]
    assert "the campaign's own run" in markdown and "&#39;" not in markdown
    assert "the campaign&#39;s own run &lt;b&gt;x&lt;/b&gt;" in html
    assert "81.9 K of 163.8 K" in markdown and "0.0 B" not in markdown
    assert "81.9 K</div><b>Tokens trained" in html and "0.0 B" not in html


def test_a_runaway_sql_query_is_stopped_at_its_time_limit(tmp_path):
    from campaign.store import Workspace

    ws = Workspace(tmp_path)
    with catalog(ws):
        pass
    runaway = "select sum(a.range * b.range) from range(1000000) a, range(1000000) b"
    with pytest.raises(ConfigError, match=r"still running after 0.5 s and was stopped") as err:
        run_query(str(ws.root), runaway, timeout_s=0.5)
    assert "--timeout" in err.value.fix and err.value.exit_code == 2
    assert run_query(str(ws.root), "select 42 as x", timeout_s=0) == (["x"], [(42,)])
    with pytest.raises(ConfigError, match="--timeout"):
        run_query(str(ws.root), "select 1", timeout_s=float("nan"))


def test_the_report_says_it_is_a_simulated_window_with_its_seed_and_replica(report):
    _, result, html, markdown, _, _, _ = report
    seed, replica = result.seed, result.replica
    title = re.search(r"<title>(.*?)</title>", html).group(1)
    heading = re.search(r"<h1>(.*?)</h1>", html).group(1)
    assert title.startswith("Simulated window report") and heading == "Simulated window report"
    banner = re.search(r'<p class="sim">(.*?)</p>', html, re.S).group(1)
    assert "not a training run" in banner and f"replica {replica} " in banner and f"seed {seed}," in banner
    first = markdown.splitlines()[0]
    assert first.startswith("# Simulated window report")
    assert f"replica {replica} of the discrete-event simulator, seed {seed}," in markdown.split("## ")[0]
    assert result.simulated is True


def test_fitted_failure_rates_show_in_both_reports_with_their_intervals(report):
    from types import SimpleNamespace

    from campaign.analysis.report import fitted_rates, render_html, render_markdown
    from campaign.config import FailureCategoryConfig, ObservedRateConfig

    inputs = report[6]
    assert inputs.result.fitted_rates == []  # the demo's rates are typed in: no section
    config = json.loads(inputs.config_json)
    fitted = FailureCategoryConfig(
        name="faulty_gpu",
        scope="gpu",
        per_gpu_year=12 / 100_000 * 8760,
        detect_s=60,
        restart_s=480,
        repair_h=48,
        observed=ObservedRateConfig(failures=12, exposure_h=100_000),
    )
    config["cluster"]["failures"] = [fitted.model_dump(mode="json"), *config["cluster"]["failures"][1:]]
    rows = fitted_rates(json.dumps(config))
    assert [r.name for r in rows] == ["faulty_gpu"]
    low, high = rows[0].ci95
    assert rows[0].unit == "per_gpu_year" and rows[0].rate == pytest.approx(1.0512)
    assert low < rows[0].rate < high
    assert fitted_rates(None) == [] and fitted_rates('{"cluster": {}}') == []
    result = replace(inputs.result, fitted_rates=rows)
    figures = {
        k: SimpleNamespace(svg="<svg/>")
        for k in ("timeline", "waterfall", "failures", "power", "power_zoom", "fitted_rates")
    }
    html = render_html(result, figures)  # type: ignore[arg-type]
    markdown = render_markdown(result, figures)  # type: ignore[arg-type]
    assert "Fitted failure rates" in html and f"{low:.4g} to {high:.4g}" in html
    assert (
        f"| faulty\\_gpu | gpu | 12 | 100,000 | 1.051 | {low:.4g} to {high:.4g} | per_gpu_year |" in markdown
    )


def test_the_workspace_guide_lists_the_files_report_holds(report):
    """docs/workspace.md's `report/` row names files, each one the report writes (its figures are inside them)."""
    import re

    from tests.helpers.paths import REPO

    ws = report[0]
    (row,) = [
        line
        for line in (REPO / "docs" / "workspace.md").read_text().splitlines()
        if line.startswith("| `report/")
    ]
    cell = row.split("|")[1]
    assert all(re.fullmatch(r"\s*`[^`]+`\s*", item) for item in cell.split(",")), cell  # file names only
    documented = {name.removeprefix("report/") for name in re.findall(r"`([^`]+)`", cell)}
    # analysis.json and report-inputs.json: the analyse task's, beside the report this fixture draws
    written = {p.name for p in ws.report_dir.iterdir()} | {"analysis.json", "report-inputs.json"}
    assert documented == written, (documented, written)
