"""Prepare's language, PII, decontamination and URL steps: each rule on its own, then all of them in one prepare."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.analysis.analysis import pii_by_source
from campaign.config import (
    BenchmarkFileConfig,
    CleaningConfig,
    DataConfig,
    DecontaminateConfig,
    LanguagesConfig,
    NearDedupConfig,
    PiiConfig,
    SourceConfig,
    UrlFilterConfig,
)
from campaign.data import prepare_data
from campaign.data.filters.decontaminate import check_benchmarks, find_overlaps, load_benchmarks, ngrams
from campaign.data.filters.language import (
    LANGUAGE_NOT_KEPT,
    check_language,
    identifier,
    identify_languages,
    identify_prefixes,
    known_languages,
    language_prefix,
)
from campaign.data.filters.pii import redact_pii, redact_pii_plain
from campaign.data.filters.url_filter import (
    URL_BLOCKED_DOMAIN,
    URL_BLOCKED_REGEX,
    URL_BLOCKED_SUBSTRING,
    check_url,
    load_url_rules,
)
from campaign.data.pipeline import removal_table
from campaign.errors import ConfigError, DataError

LICENCES = Path("/usr/share/common-licenses")
_IDENT = identifier()  # loaded once for the module's tests
PII_ON = PiiConfig(enabled=True)


def _licence_texts() -> list[str]:
    return [
        p.read_text(encoding="utf-8", errors="replace") for p in sorted(LICENCES.iterdir()) if p.is_file()
    ]


def _copyright_texts(limit: int = 60) -> list[str]:
    paths = sorted(Path("/usr/share/doc").glob("*/copyright"))[:limit]
    return [p.read_text(encoding="utf-8", errors="replace") for p in paths]


# ------------------------------------------------------------------------------------------------ language


def test_compiled_language_id_equals_py3langid_on_real_text() -> None:
    ident = _IDENT  # py3langid's own classifier, on the same shipped model
    texts = _licence_texts() + [t[:300] for t in _copyright_texts()]
    texts += [
        "",
        "  ",
        "UPPER CASE ENGLISH TEXT ONLY",
        "Der schnelle braune Fuchs springt über den faulen Hund.",
    ]
    langs, scores = identify_languages(texts)
    for text, lang, score in zip(texts, langs, scores, strict=True):
        want_lang, want_score = ident.classify(text)
        assert lang == want_lang
        assert score == pytest.approx(want_score, abs=1e-4)


def test_language_prefix_cuts_at_a_whitespace() -> None:
    assert language_prefix("one two three four", 0) == "one two three four"
    assert language_prefix("one two three four", 100) == "one two three four"
    assert language_prefix("one two three four", 9) == "one two"  # not "one two t"
    assert language_prefix("one two three four", 7) == "one two"  # the cut falls on a word's end
    assert language_prefix("one\ntwo three", 6) == "one"
    assert language_prefix("abcdefghij klm", 8) == "abcdefgh"  # no whitespace in the first half: a plain cut


def test_language_of_a_prefix_is_that_of_the_prefix_alone() -> None:
    texts = [*_licence_texts()[:8], "Der schnelle braune Fuchs springt über den faulen Hund. " * 80]
    langs, scores = identify_prefixes(texts, 500)
    want_langs, want_scores = identify_languages([language_prefix(t, 500) for t in texts])
    assert langs == want_langs and scores.tolist() == want_scores.tolist()
    assert langs[-1] == "de" and "en" in langs
    assert identify_prefixes(texts, 0)[0] == identify_languages(texts)[0]


def test_the_language_list_is_the_models() -> None:
    assert known_languages() == set(_IDENT.nb_classes)


def test_language_rule_keeps_listed_languages_above_the_score() -> None:
    cfg = LanguagesConfig(enabled=True, keep=("en", "de"), min_score=0.65)
    langs, scores = identify_languages(
        [_licence_texts()[0], "Der schnelle braune Fuchs springt über den Hund."]
    )
    assert langs == ["en", "de"]
    assert check_language(langs[0], float(scores[0]), cfg) is None
    assert check_language("fr", 0.99, cfg) == (LANGUAGE_NOT_KEPT, "fr 0.990 (keep en, de >= 0.65)")
    assert check_language("en", 0.5, cfg).reason == LANGUAGE_NOT_KEPT  # type: ignore[union-attr]


# ----------------------------------------------------------------------------------------------------- PII


@pytest.mark.parametrize(
    ("text", "want", "kinds"),
    [
        ("mail John.Doe@Example.com now", "mail email@example.com now", {"email": 1}),
        ("dns 8.8.8.8 and 2001:4860:4860::8888.", "dns 0.0.0.0 and 0.0.0.0.", {"ip_address": 2}),
        (
            "call +44 20 7946 0958 or (415) 555-0132",
            "call <PHONE_NUMBER> or <PHONE_NUMBER>",
            {"phone_number": 2},
        ),
    ],
)
def test_pii_is_replaced_and_counted(text: str, want: str, kinds: dict[str, int]) -> None:
    redacted, counts = redact_pii(text, PII_ON)
    assert redacted == want
    assert dict(counts) == kinds


@pytest.mark.parametrize(
    "text",
    [
        "private 10.0.0.1, loopback 127.0.0.1 and ::1, documentation 192.0.2.1",  # not global: kept (datatrove)
        "at 12:30:45 on 2024-01-15, version 1.2.3, port 8080, ISBN 978-3-16-148410-0",
        "an email-like a@b but no domain",
    ],
)
def test_what_is_not_pii_stays(text: str) -> None:
    assert redact_pii(text, PII_ON) == (text, {})


def test_pii_kinds_can_be_switched_off() -> None:
    cfg = PiiConfig(enabled=True, emails=False)
    assert redact_pii("a@example.org 8.8.4.4", cfg)[0] == "a@example.org 0.0.0.0"


# ----------------------------------------------------------------------------------------------------- URL


def _url_rules(tmp_path: Path, domains: str = "", substrings: str = "", regexes: str = "") -> UrlFilterConfig:
    files = {}
    for key, body in (("domains_file", domains), ("substrings_file", substrings), ("regexes_file", regexes)):
        if body:
            path = tmp_path / f"{key}.txt"
            path.write_text(body, encoding="utf-8")
            files[key] = str(path)
    return UrlFilterConfig(**files)


def test_url_rules_name_the_matched_rule(tmp_path: Path) -> None:
    cfg = _url_rules(tmp_path, "# ads\nads.example\n\nTracker.NET.\n", "/casino/\n", r"[?&]utm_")
    rules = load_url_rules(cfg)
    hit = check_url("https://cdn.ads.example/x", rules)
    assert hit is not None and hit.reason == URL_BLOCKED_DOMAIN
    assert f"{cfg.domains_file}:2" in hit.detail
    assert check_url("http://tracker.net./a", rules).reason == URL_BLOCKED_DOMAIN  # type: ignore[union-attr]
    assert check_url("https://badads.example/", rules) is None  # a suffix is not a subdomain
    assert check_url("https://shop.org/Casino/win", rules).reason == URL_BLOCKED_SUBSTRING  # type: ignore[union-attr]
    regex = check_url("https://news.org/a?id=1&utm_source=x", rules)
    assert regex is not None and regex.reason == URL_BLOCKED_REGEX and f"{cfg.regexes_file}:1" in regex.detail
    assert check_url("https://news.org/a", rules) is None
    assert check_url(None, rules) is None


def test_a_bad_url_rule_names_its_line(tmp_path: Path) -> None:
    cfg = _url_rules(tmp_path, regexes="ok\\.org\n# comment\n(unclosed\n")
    with pytest.raises(DataError) as err:
        load_url_rules(cfg)
    assert f"{cfg.regexes_file}:3" in (err.value.where or "")
    assert "unclosed" in err.value.message and err.value.fix


def test_a_missing_block_list_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load_url_rules(UrlFilterConfig(domains_file=str(tmp_path / "nope.txt")))
    assert "url_filter.domains_file" in (err.value.where or "") + (err.value.fix or "")


# ------------------------------------------------------------------------------------------ decontamination


def _benchmark(tmp_path: Path, name: str, rows: list[object], fields: tuple[str, ...] = ("question",)):
    path = tmp_path / f"{name}.jsonl"
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return BenchmarkFileConfig(name=name, path=str(path), text_fields=fields)


def test_a_shared_13_gram_removes_the_document(tmp_path: Path) -> None:
    words = _licence_texts()[0].split()
    passage = " ".join(words[200:213])  # exactly 13 words
    bench = _benchmark(
        tmp_path, "qa", [{"question": "too short to match"}, {"question": passage.upper() + "!"}]
    )
    index = load_benchmarks(DecontaminateConfig(benchmarks=(bench,)))
    assert index.n_texts == (2,) and index.n_short == (1,)
    doc = " ".join(words[150:260])
    near_miss = " ".join(words[150:212]) + " different " + " ".join(words[213:260])  # only 12-grams shared
    hit, miss = find_overlaps([doc, near_miss], index)
    assert miss is None
    assert hit is not None and hit.reason == "benchmark_overlap_qa"
    assert f"{bench.path}:2" in hit.detail
    assert " ".join(w.lower() for w in words[200:213]).strip(".,;:()") in hit.detail.replace("'", "'")


def test_overlaps_are_those_of_a_plain_lookup(tmp_path: Path) -> None:
    """The bucket table that rules n-grams out before the binary search finds what a set lookup finds: each
    text's first n-gram shared with an evaluation text, and nothing for the others."""
    texts = _licence_texts() + [t[:2000] for t in _copyright_texts()]
    passages = [" ".join(t.split()[k : k + 30]) for t in texts[::3] for k in (40, 400)]
    index = load_benchmarks(
        DecontaminateConfig(benchmarks=(_benchmark(tmp_path, "qa", [{"question": p} for p in passages]),))
    )
    known = set(index.hashes.tolist())
    doc, _, _, hashes, _ = ngrams(texts, index.n)
    first: dict[int, int] = {}
    for d, h in zip(doc.tolist(), hashes.tolist(), strict=True):
        if h in known:
            first.setdefault(d, h)
    got = find_overlaps(texts, index)
    assert [r is not None for r in got] == [d in first for d in range(len(texts))]
    assert sum(r is not None for r in got) > len(texts) // 3
    where = dict(zip(index.hashes.tolist(), index.where, strict=True))
    for d, h in first.items():
        assert f"({where[h]})" in got[d].detail  # type: ignore[union-attr]


def test_evaluation_parquet_and_several_benchmarks(tmp_path: Path) -> None:
    words = _licence_texts()[1].split()
    a = _benchmark(tmp_path, "a", [{"question": " ".join(words[0:20])}])
    path = tmp_path / "b.parquet"
    pq.write_table(pa.table({"passage": ["nothing here", " ".join(words[500:520])]}), path)
    b = BenchmarkFileConfig(name="b", path=str(path), text_fields=("passage",))
    index = load_benchmarks(DecontaminateConfig(benchmarks=(a, b)))
    found = find_overlaps([" ".join(words[490:540]), " ".join(words[0:30]), " ".join(words[100:150])], index)
    assert [f.reason if f else None for f in found] == ["benchmark_overlap_b", "benchmark_overlap_a", None]
    assert f"{path}:2" in found[0].detail  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("rows", "line", "words"),
    [
        ([{"question": "fine"}, "{not json"], 2, "not a JSON object"),
        ([{"question": "fine"}, {"q": "other field"}], 2, "no field 'question'"),
        ([{"question": 3}], 1, "not text"),
        ([["a list"]], 1, "not an object"),
    ],
)
def test_a_bad_evaluation_file_names_file_and_line(
    tmp_path: Path, rows: list[object], line: int, words: str
) -> None:
    bench = _benchmark(tmp_path, "bad", rows)
    for read in (load_benchmarks, check_benchmarks):
        with pytest.raises(DataError) as err:
            read(DecontaminateConfig(benchmarks=(bench,)))
        assert (err.value.where or "").startswith(f"{bench.path}:{line} ")
        assert words in err.value.message and err.value.fix


# ---------------------------------------------------------------------------------------- all of them at once


def test_prepare_with_every_step_on(tmp_path: Path) -> None:
    """URL block list, language, the rule groups, decontamination and PII in one prepare: every document kept or
    rejected with its reason, language columns in both tables, PII counted in the manifest."""
    texts = _licence_texts()
    words = texts[3].split()
    rows = [{"text": t, "url": f"https://www.site{i}.org/licence"} for i, t in enumerate(texts)]
    rows[0]["url"] = "https://mirror.blocked.example/gpl"
    rows[3]["text"] += "\nQuestions to licensing@fsf.example.org or +1 617 542 5942 (server 8.8.8.8)."
    rows.append({"text": "Ceci est un texte en français. " * 30, "url": "https://fr.example.org"})
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "domains.txt").write_text("blocked.example\n", encoding="utf-8")
    target = next(i for i, t in enumerate(texts) if i not in (0, 3) and len(t.split()) > 400)
    bench = _benchmark(tmp_path, "qa", [{"question": " ".join(texts[target].split()[300:330])}])
    data = DataConfig(
        sources=(
            SourceConfig(
                name="web", path=str(tmp_path / "web" / "*.jsonl"), format="jsonl", weight=1, url_field="url"
            ),
        ),
        cleaning=CleaningConfig(
            languages=LanguagesConfig(enabled=True),
            pii=PII_ON,
            url_filter=UrlFilterConfig(domains_file=str(tmp_path / "domains.txt")),
            near_dedup=NearDedupConfig(enabled=False),
        ),
        decontaminate=DecontaminateConfig(benchmarks=(bench,)),
    )
    manifest = prepare_data(data, tmp_path / "data")
    stats = manifest["sources"][0]
    clean = pq.read_table(tmp_path / "data" / "clean" / "web.parquet")
    rejected = pq.read_table(tmp_path / "data" / "rejected" / "web.parquet")
    assert stats["n_input"] == len(rows) == clean.num_rows + rejected.num_rows
    reasons = dict(zip(rejected["line"].to_pylist(), rejected["reason"].to_pylist(), strict=True))
    assert reasons[1] == URL_BLOCKED_DOMAIN
    assert reasons[len(rows)] == LANGUAGE_NOT_KEPT
    assert stats["by_reason"]["benchmark_overlap_qa"] >= 1  # the target and any licence quoting it
    assert reasons.get(target + 1) in ("benchmark_overlap_qa", "exact_duplicate")
    assert [f["key"] for f in manifest["step_files"]] == [
        "data.cleaning.url_filter.domains_file",
        "data.decontaminate.benchmarks[0].path",
    ]
    steps = {row["reason"]: row["step"] for row in removal_table(manifest)}
    assert steps["benchmark_overlap_qa"] == "decontaminate" and steps[LANGUAGE_NOT_KEPT] == "language"
    assert set(clean["language"].to_pylist()) == {"en"} and min(clean["language_score"].to_pylist()) >= 0.65
    french = rejected.filter(pa.compute.equal(rejected["reason"], LANGUAGE_NOT_KEPT))
    assert french["language"].to_pylist() == ["fr"]
    assert (
        rejected.filter(pa.compute.equal(rejected["reason"], URL_BLOCKED_DOMAIN))["language"].null_count == 1
    )
    assert stats["pii_by_kind"] == {"email": 1, "ip_address": 1, "phone_number": 1}
    assert {(x.kind, x.n_replaced) for x in pii_by_source(tmp_path / "data")} == {
        ("email", 1),
        ("ip_address", 1),
        ("phone_number", 1),
    }
    redacted = clean.filter(pa.compute.equal(clean["line"], 4))["text"].to_pylist()
    assert redacted and "email@example.com" in redacted[0] and "8.8.8.8" not in redacted[0]
    assert words[5] in redacted[0]


def test_unknown_language_code_is_refused_before_any_work(tmp_path: Path) -> None:
    data = DataConfig(
        sources=(SourceConfig(name="web", path=str(tmp_path / "*.jsonl"), format="jsonl", weight=1),),
        cleaning=CleaningConfig(languages=LanguagesConfig(enabled=True, keep=("en", "xx"))),
    )
    with pytest.raises(ConfigError) as err:
        prepare_data(data, tmp_path / "data")
    assert "xx" in err.value.message and err.value.where == "data.cleaning.languages.keep"


def test_fast_pii_paths_equal_the_plain_regexes_on_real_text() -> None:
    """Changelogs and copyright files are full of addresses, versions, dates and times."""
    paths = sorted(Path("/usr/share/doc").glob("*/copyright"))[:150]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in paths]
    texts += [
        "x john@a.org,jane@b.org y (555) 123-4567, +1 (617) 542-5942 f00:ba::r ::1 2001:db8::1 8.8.8.8.8.8 "
        * 3,
        "é@x.org é john@x.org [1.2.3.4]@x 255.255.255.255 0.0.0.0 fe80::1%eth0 1::2:3:4:5:6:7:8",
    ]
    for text in texts:
        assert redact_pii(text, PII_ON) == redact_pii_plain(text, PII_ON)


BACKTRACKING = {  # each takes exponential time on a backtracking engine against the URL beside it
    r"(a+)+$": "https://x.org/" + "a" * 40 + "!",
    r"(x+x+)+y": "https://x.org/" + "x" * 40,
    r"(a|aa)+$": "https://x.org/" + "a" * 60 + "!",
    r"^(([a-z])+.)+[A-Z]([a-z])+$": "https://x.org/" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!",
}


def test_backtracking_rules_run_in_bounded_time(tmp_path: Path) -> None:
    """Rules that take a backtracking engine exponential time finish at once (a hang guard, not a speed figure:
    the child is given two minutes for what RE2 does in microseconds)."""
    import subprocess
    import sys

    cfg = _url_rules(tmp_path, regexes="\n".join(BACKTRACKING) + "\n")
    script = (
        "import json, sys\nfrom campaign.config import UrlFilterConfig\n"
        "from campaign.data.filters.url_filter import check_url, load_url_rules\n"
        f"rules = load_url_rules(UrlFilterConfig(regexes_file={cfg.regexes_file!r}))\n"
        f"print(json.dumps([check_url(u, rules) is None for u in {list(BACKTRACKING.values())!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[true, true, true, true]"  # none of these URLs matches its rule


@pytest.mark.parametrize("rule", [r"(a)\1", r"x(?=y)", r"(?<!z)q", r"(?P<n>a)(?P=n)", r"a{1000}{1000}"])
def test_a_rule_that_cannot_be_bounded_is_refused_at_load_naming_its_line(tmp_path: Path, rule: str) -> None:
    cfg = _url_rules(tmp_path, regexes=f"ok\\.org\n{rule}\n")
    with pytest.raises(DataError) as err:
        load_url_rules(cfg)
    assert f"{cfg.regexes_file}:2" in (err.value.where or "")
    assert err.value.fix


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "no texts"),  # an empty file
        (b"\n   \n\t\n", "no texts"),  # blank lines
        (b'{"question": ""}\n{"question": "   "}\n{"question": null}\n', "none with a word"),  # empty fields
        (b'{"question": "?!"}\n', "none with a word"),  # punctuation only
        (b'{"question": "four words only here"}\n', "none of its 1 texts has 13 words"),  # nothing can match
    ],
    ids=["empty", "blank", "empty-fields", "punctuation", "all-short"],
)
def test_a_benchmark_with_nothing_to_match_is_an_error_naming_it(
    tmp_path: Path, content: bytes, words: str
) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_bytes(content)
    bench = BenchmarkFileConfig(name="mmlu", path=str(path), text_fields=("question",))
    for read in (load_benchmarks, check_benchmarks):
        with pytest.raises(DataError) as err:
            read(DecontaminateConfig(benchmarks=(bench,)))
        assert "benchmark 'mmlu'" in err.value.message and words in err.value.message
        assert (err.value.where or "").startswith(str(path)) and "benchmarks[0]" in (err.value.where or "")


def test_an_empty_parquet_benchmark_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "eval.parquet"
    pq.write_table(pa.table({"passage": pa.array([], pa.string())}), path)
    bench = BenchmarkFileConfig(name="p", path=str(path), text_fields=("passage",))
    with pytest.raises(DataError, match="no texts"):
        check_benchmarks(DecontaminateConfig(benchmarks=(bench,)))
