"""Every kind of report.html, opened in a real browser (headless Chromium).

Each page is loaded from disk with two scripts added to a copy: one first in ``<head>`` that
records every error, console error and alert the page causes, and one last that, once the page
has loaded, writes what it saw (errors, each image's natural width, the page's text) into the
DOM, which Chromium then dumps. A screenshot of each page is saved (to ``DEVICEPIPE_SCREENSHOTS``
when set, else beside the test's files). Skipped without Chromium, failing instead when
``DEVICEPIPE_REQUIRE_BROWSER=1`` (CI sets it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape as html_unescape
from pathlib import Path

import pytest

from devicepipe.batch import Engine, run_dataset
from devicepipe.pipelines import (
    LearnSettings,
    SeriesLearnSettings,
    run_beats,
    run_ecg,
    run_score,
    run_score_series,
    run_series,
    run_train,
)
from devicepipe.report.render import _script_hash
from devicepipe.simulate import simulate_ecg, simulate_load, write_simulated_ecg, write_simulated_load

pytestmark = pytest.mark.browser

BROWSERS = ("chromium", "chromium-browser", "google-chrome")

PROBE_HEAD = """<script>
window.__problems = [];
window.addEventListener(
  "error", e => window.__problems.push("error: " + (e.message || e.target && e.target.src)), true
);
const __error = console.error;
console.error = (...a) => { window.__problems.push("console: " + a.join(" ")); __error(...a); };
window.alert = m => window.__problems.push("alert: " + m);
</script>"""

PROBE_END = """<script>
window.addEventListener("load", () => {
  const images = Array.from(document.images).map(i => ({alt: i.alt, width: i.naturalWidth, done: i.complete}));
  const out = document.createElement("pre");
  out.id = "probe";
  out.style.display = "none";
  const seen = {problems: window.__problems, images: images, text: document.body.innerText, title: document.title};
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    message = "no Chromium found (apt-get install chromium)"
    if os.environ.get("DEVICEPIPE_REQUIRE_BROWSER") == "1":
        pytest.fail(message + " and DEVICEPIPE_REQUIRE_BROWSER=1")
    pytest.skip(message)


def _allowing(html: str, *scripts: str) -> str:
    """``html`` with the test's own inline ``scripts`` allowed by the page's Content-Security-Policy."""
    hashes = " ".join(_script_hash(s[s.index(">") + 1 : s.rindex("</script>")]) for s in scripts)
    assert html.count("script-src ") == 1
    return html.replace("script-src ", f"script-src {hashes} ", 1)


def open_in_browser(report: Path, shots: Path, *, extra: str = "", untrusted: str = "") -> dict:
    """Load ``report`` in headless Chromium; return what the probe saw, and save a screenshot.

    The probe (and ``extra``, a test's own script) are allowed by the page's Content-Security-
    Policy; ``untrusted`` is added as it is, as a script smuggled into the page would be."""
    browser = chromium()
    html = report.read_text(encoding="utf-8")
    assert html.count("<head>") == 1 and html.count("</body>") == 1
    probed = report.with_name("probed-" + report.name)
    html = _allowing(html, PROBE_HEAD, PROBE_END, *([extra] if extra else []))
    html = html.replace("<head>", "<head>" + PROBE_HEAD).replace("</body>", untrusted + extra + PROBE_END + "</body>")
    probed.write_text(html)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=10000"]
    # the probed copy: an alert() would otherwise block the browser; the probe itself is hidden
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    start = dom.index('<pre id="probe"')
    start = dom.index(">", start) + 1
    seen = json.loads(_unescape(dom[start : dom.index("</pre>", start)]))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"{report.parent.name}.png"
    subprocess.run(
        [browser, *flags, "--window-size=1280,2400", f"--screenshot={shot}", probed.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 10_000
    return seen


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("DEVICEPIPE_SCREENSHOTS")
    return Path(where) if where else tmp_path_factory.mktemp("screenshots")


def _check_page(seen: dict, numbers: list[str], images: int) -> None:
    assert seen["problems"] == [], seen["problems"]
    assert len(seen["images"]) >= images
    assert all(i["done"] and i["width"] > 0 for i in seen["images"]), seen["images"]
    text = " ".join(seen["text"].split())
    for number in numbers:
        assert number in text, (number, text[:2000])


def test_beats_report_opens_cleanly_and_escapes_names(tmp_path, shots):
    sim = simulate_ecg(180, 250, seed=3)
    _, truth = write_simulated_ecg(sim, tmp_path / "sim.csv")
    # a file name and a column name that would run as script if the page did not escape them
    column = "<script>alert(1)</script>"
    src = tmp_path / "<img src=x onerror=alert(2)>.csv"
    samples = sim.signal.numpy()
    src.write_text(column + "\n" + "\n".join(f"{v:.5f}" for v in samples) + "\n", encoding="utf-8")
    result = run_beats(src, tmp_path / "beats", channel=column, sampling_rate=250, device="cpu", reference=truth)
    seen = open_in_browser(tmp_path / "beats" / "report.html", shots)
    summary = json.loads((tmp_path / "beats" / "summary.json").read_text())
    found = f"{summary['counts']['beats_found']:,}"
    _check_page(seen, [found, f"{result.score.f1:.4f}", src.name, f"channel {column}"], images=3)


def test_ecg_report_lists_the_flagged_beats(tmp_path, shots):
    sim = simulate_ecg(300, 250, seed=1, ectopic_rate=0.03)
    src, truth = write_simulated_ecg(sim, tmp_path / "ecg.parquet")
    result = run_ecg(src, tmp_path / "ecg", settings=LearnSettings(epochs=2), device="cpu", reference=truth)
    seen = open_in_browser(tmp_path / "ecg" / "report.html", shots)
    s = result.summary
    flagged = len(s["flagged"])
    warnings = [f"Warning: {w[:60]}" for w in s["warnings"]]
    k = s["counts"]["beats_kept"] // 100 + 1  # the default scorer's k: 1 % of the beats, plus one
    scorer = f"local, k = {k}"
    beats = f"{flagged} beat{'s' if flagged != 1 else ''} flagged"
    _check_page(seen, [f"{s['counts']['beats_found']:,}", beats, scorer, *warnings], images=6)
    assert seen["text"].count("\nV\n") + seen["text"].count("\tV\t") > 0  # reference labels of flagged beats
    # the clinical answer leads the page: the ventricular beats and their burden before the model's
    # flags, and how far the classes were validated, with the word that they are not a diagnosis
    text, h = seen["text"], s["holter"]
    v = f"{h['counts']['V']:,} ({h['burden_pct']['V']:.1f} %)"
    assert text.index(v) < text.index("ventricular ectopic beats (V)") < text.index("flagged as anomalous")
    assert text.index("How far to trust these classes") < text.index("What the model learned")
    assert "not a diagnostic device" in text


def test_score_and_train_reports_open_cleanly(tmp_path, shots):
    folder = tmp_path / "population"
    for i in range(2):
        write_simulated_ecg(simulate_ecg(120, 250, seed=10 + i), folder / f"rec{i}.parquet")
    trained = run_train(folder, tmp_path / "train", settings=LearnSettings(epochs=3), device="cpu")
    seen = open_in_browser(tmp_path / "train" / "report.html", shots)
    t = trained.summary
    _check_page(seen, [f"{t['counts']['beats']:,}", "recordings left out", "What the model learned"], images=3)
    sim = simulate_ecg(180, 250, seed=1, ectopic_rate=0.03)
    src, truth = write_simulated_ecg(sim, tmp_path / "new.parquet")
    scored = run_score(src, tmp_path / "score", model=tmp_path / "train", device="cpu", reference=truth)
    seen = open_in_browser(tmp_path / "score" / "report.html", shots)
    s = scored.summary
    aami = s["reference"]["aami"]
    numbers = [f"{s['counts']['beats_kept']:,}", f"{100 * s['flag_rate']:.2f} %", "Flag rate by AAMI class"]
    numbers += [f"{100 * aami['N']['flag_rate']:.1f} %", "reconstruction scored by"]  # train's default scorer
    _check_page(seen, numbers, images=5)


@pytest.mark.slow  # a series run and its page in the browser; CI runs it
def test_series_report_opens_cleanly(tmp_path, shots):
    load = simulate_load(120, seed=2)
    src, truth = write_simulated_load(load, tmp_path / "load.csv")
    result = run_series(
        src, tmp_path / "series", column="load_MW", time_column="Datetime", settings=SeriesLearnSettings(epochs=5),
        reference=truth,
    )  # fmt: skip
    seen = open_in_browser(tmp_path / "series" / "report.html", shots)
    ref = result.summary.window_reference
    numbers = [f"{result.summary['windows']['used']:,}", "windows flagged as anomalous", "listed windows flagged"]
    numbers += [f"{ref.flagged_listed} of {ref.listed_windows}", "Flags against the reference, by kind"]
    _check_page(seen, numbers, images=4)
    # the same model on the series again, as 'score' runs it: its own page
    scored = run_score_series(src, tmp_path / "scored", model=tmp_path / "series", device="cpu")
    seen = open_in_browser(tmp_path / "scored" / "report.html", shots)
    s = scored.summary
    numbers = [f"{s['windows']['used']:,}", "windows scored", f"{100 * s['flag_rate']:.2f} %", "model trained on"]
    _check_page(seen, numbers, images=4)


@pytest.mark.slow  # runs the benchmarks for their report; CI runs it
def test_bench_report_shows_the_tables_and_charts(tmp_path, shots):
    out = tmp_path / "bench"
    args = ["bench", "--quick", "--only", "stages,baselines", "--device", "cpu", "--out", str(out)]
    subprocess.run([sys.executable, "-m", "devicepipe", *args], check=True, capture_output=True, timeout=300)
    result = json.loads((out / "bench.json").read_text())
    seen = open_in_browser(out / "report.html", shots)
    ratio = next(r for r in result["ratios"] if r["stage"] == "filter")
    _check_page(seen, ["The notebooks' way against ours", f"{ratio['speedup']:.2g}x"], images=1)


def test_dataset_report_lists_failures_first_links_each_run_and_sorts(tmp_path, shots):
    folder = tmp_path / "in"
    folder.mkdir()
    for i, rate in enumerate((250, 360, 500)):
        write_simulated_ecg(
            simulate_ecg(20 + 10 * i, rate, heart_rate_bpm=55 + 20 * i, seed=i), folder / f"r{i}.parquet"
        )
    (folder / "broken.csv").write_text("not,an,ecg\n")
    result = run_dataset(folder, tmp_path / "set", options={"figures": False}, engine=Engine(workers=0))
    page = tmp_path / "set" / "report.html"
    html = page.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]+)"', html)
    assert sorted(links) == [f"./r{i}/report.html" for i in range(3)]
    assert all((page.parent / link).is_file() for link in links)
    # click "beats" twice (ascending, then descending) before the probe reads the page
    click = (
        '<script>window.addEventListener("DOMContentLoaded", () => { const th = '
        'Array.from(document.querySelectorAll("th")).find(t => t.textContent === "beats"); th.click(); th.click(); });'
        "</script>"
    )
    seen = open_in_browser(page, shots, extra=click)
    beats = [f"{r['beats']:,}" for r in result.rows if r["beats"] is not None]
    _check_page(seen, ["1 of 4 recordings failed", "broken", *beats], images=0)
    text = seen["text"]
    table = text[text.index("error or warnings") :]
    order = [table.index(f"r{i}\t") for i in range(3)]
    found = {r["run"]: r["beats"] for r in result.rows}
    by_beats = sorted(range(3), key=lambda i: -found[f"r{i}"])
    assert by_beats != [0, 1, 2]  # the order sorting must change
    assert sorted(order) == [order[i] for i in by_beats]  # rows now in descending beats
    assert table.index("broken") > max(order)  # the failure (no beats) after them


def test_hostile_recording_names_are_plain_relative_links_and_no_script_runs(tmp_path, shots):
    # names that would be a script, a scheme, markup or another host if a page took them as they are
    folder = tmp_path / "in"
    names = ["javascript:document.title='x';0", 'q"uote<b>&amp', "ünï cödé", "#frag?q=1", "r0"]
    for i, name in enumerate(names):
        write_simulated_ecg(simulate_ecg(20, 250, seed=30 + i), folder / f"{name}.parquet")
    result = run_dataset(folder, tmp_path / "set", options={"figures": False}, engine=Engine(workers=0))
    assert result.n_ok == len(names)
    page = tmp_path / "set" / "report.html"
    html = page.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]+)"', html)
    assert len(links) == len(names) and all(link.startswith("./") and ":" not in link for link in links), links
    from urllib.parse import unquote

    assert all((page.parent / unquote(html_unescape(link))).is_file() for link in links)  # each its own report
    assert '<meta http-equiv="Content-Security-Policy"' in html and "script-src 'sha256-" in html_unescape(html)
    # a script smuggled into the page does not run; the page's own (sorting) and the probe do
    smuggled = "<script>document.title = 'pwned'; window.__problems.push('smuggled script ran');</script>"
    seen = open_in_browser(page, shots, untrusted=smuggled)
    assert seen["title"] != "pwned" and "smuggled script ran" not in seen["problems"]
    _check_page({**seen, "problems": [p for p in seen["problems"] if "Content Security Policy" not in p]}, [], 0)
