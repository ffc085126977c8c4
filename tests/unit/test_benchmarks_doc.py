"""BENCHMARKS.md: its tables are generated from the committed results, and every figure it quotes is in them."""

import json

import benchmarks_doc as doc


def test_generated_tables_are_up_to_date():
    text = doc.DOC.read_text(encoding="utf-8")
    assert text.count("<!-- table ") >= 5, "the bench tables are generated, not typed"
    assert doc.render(text) == text, "run: python benchmarks/benchmarks_doc.py"


def test_the_contents_link_every_section_as_github_names_its_anchor():
    # GitHub's anchors: lower case, punctuation dropped, spaces as hyphens (checked by hand on these)
    assert doc.anchor("`devicepipe bench` on the CPU: every stage") == "devicepipe-bench-on-the-cpu-every-stage"
    assert doc.anchor("The process's start and end") == "the-processs-start-and-end"
    assert doc.anchor("Zero-copy interop (CPU)") == "zero-copy-interop-cpu"
    text = doc.DOC.read_text(encoding="utf-8")
    listed = text[text.index(doc.TOC) : text.index(doc.TOC_END)]
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) >= 10 and all(f"[{h}](#{doc.anchor(h)})" in listed for h in headings)


def test_every_figure_quoted_in_benchmarks_md_is_in_the_committed_results():
    missing = doc.unsourced(doc.DOC.read_text(encoding="utf-8"))
    assert not missing, "figures with no source in the results their section cites: " + ", ".join(
        f"{t} ({h[:40]})" for h, t in missing
    )


def test_the_readme_s_set_up_times_are_in_the_committed_results():
    # the demo's and the tests' times the README quotes come from benchmarks/readme_times.py
    readme = (doc.DOC.parent / "README.md").read_text(encoding="utf-8")
    setup = [body for heading, body in doc.sections(readme) if heading.startswith("Set-up")]
    assert len(setup) == 1 and "benchmarks/results/readme_times.json" in setup[0]
    missing = [token for heading, token in doc.unsourced(readme) if heading.startswith("Set-up")]
    assert not missing, "README set-up figures with no source in readme_times.json: " + ", ".join(missing)


def _page(tmp_path, prose: str) -> str:
    (tmp_path / "benchmarks/results").mkdir(parents=True)
    result = {"median_s": 0.0354, "ratio": 2.431, "share": 0.281, "rows": 93113, "note": "at 16 threads"}
    (tmp_path / "benchmarks/results/run.json").write_text(json.dumps(result))
    head = "Run: `x` (`benchmarks/results/run.json`), 2026-11-23 03:58, torch 2.13.0."
    return f"# Benchmarks\n\n## A section\n\n{head}\n\n{prose}\n"


def test_the_figure_check_finds_figures_in_other_units_and_flags_invented_ones(tmp_path):
    ok = _page(tmp_path, "It took 35.4 ms (2.4x; 28% of copy) for 93,113 rows on 16 threads; target ≥ 0.999.")
    assert doc.unsourced(ok, root=tmp_path) == []
    bad = "It took 35.4 ms, 6.4x faster in six other runs, and 12.5 ms before."
    assert doc.unsourced(ok.replace(ok.split("\n\n")[-1], bad), root=tmp_path) == [
        ("A section", "6.4"),
        ("A section", "12.5"),
    ]
    # a figure must be in the results the section cites, not just anywhere
    elsewhere = "# B\n\n## Another section\n\nIt took 35.4 ms.\n"
    assert doc.unsourced(elsewhere, root=tmp_path) == [("Another section", "35.4")]
    # the unit after a figure must fit the value's keys: 2.431 is a ratio, not a time or a size
    assert doc.unsourced(ok.replace("(2.4x;", "(2.4 ms;"), root=tmp_path) == [("A section", "2.4")]
    assert doc.unsourced(ok.replace("28% of copy", "28 MB"), root=tmp_path) == [("A section", "28")]
    # microseconds from seconds
    assert doc.unsourced(ok.replace("35.4 ms", "35400 us"), root=tmp_path) == []
    assert doc.unsourced(ok.replace("35.4 ms", "354 us"), root=tmp_path) == [("A section", "354")]
    # rounding: the quoted digits must be the value's, not merely near it
    assert doc.unsourced(ok.replace("35.4 ms", "35.5 ms"), root=tmp_path) == [("A section", "35.5")]
    # a figure in backticks is still a figure (code in backticks is not)
    assert doc.unsourced(ok.replace("35.4 ms", "`35.5` ms"), root=tmp_path) == [("A section", "35.5")]
    assert doc.unsourced(ok.replace("35.4 ms", "35.4 ms (`--repeats 75`)"), root=tmp_path) == []
    # the confidence level of an interval is a setting, not a figure
    assert doc.unsourced(ok.replace("35.4 ms", "35.4 ms (95 % interval 2-3x)"), root=tmp_path) == []
    # WFDB's storage formats are names; a figure beside them is still checked
    assert doc.unsourced(ok.replace("35.4 ms", "35.4 ms in formats 16, 212 or 80"), root=tmp_path) == []
    assert doc.unsourced(ok.replace("35.4 ms", "35.4 ms in format 212, 47.5 ms"), root=tmp_path) == [
        ("A section", "47.5")
    ]


def test_render_rebuilds_a_table_from_its_json(tmp_path):
    stale = "<!-- table sweep: benchmarks/results/cpu/bench.json -->\n| old |\n<!-- end table -->\n"
    fresh = doc.render(stale)
    assert "| old |" not in fresh and fresh.startswith(stale.splitlines()[0])
    assert "| samples | sleepecg | ours |" in fresh and fresh.rstrip().endswith(doc.END)
    assert doc.render(fresh) == fresh


def test_the_headline_table_opens_the_page_and_reads_each_claim_from_its_result():
    import headline

    text = doc.DOC.read_text(encoding="utf-8")
    # the first screen: the table comes before the contents and the first section
    assert text.index("<!-- table headline: benchmarks/headline.py -->") < text.index(doc.TOC) < text.index("\n## ")
    # one claim read by hand from its file: 20 M samples, sleepecg's time over ours, one thread each
    result = json.loads((doc.ROOT / "benchmarks/results/peers_fair.json").read_text(encoding="utf-8"))
    row = next(r for r in result["rows"] if r["input"] == "simulated, 20,000,000 samples" and not r["same_cores"])
    cells = next(r for r in headline.rows(lambda commit, paths: False) if r[0].startswith("20,000,000"))
    assert cells[1:5] == [f"{row['ratio_median']:.2f}x", f"{row['ratio_ci95'][0]:.2f}x", "≥ 2.50x",
                          "yes" if row["ratio_ci95"][0] >= 2.5 else "**no**"]  # fmt: skip
    assert result["commit"] in cells[5] and result["date"][:10] in cells[5] and cells[6] == "no"
    # a ceiling is read at its upper bound: the Holter day's
    day = json.loads((doc.ROOT / "benchmarks/results/holter_day.json").read_text(encoding="utf-8"))
    cells = next(r for r in headline.rows(lambda commit, paths: True) if "22-h" in r[0])
    upper = day["ours_wall_over_sleepecg_call"]["ci95"][1]
    assert cells[2] == f"{upper:.2f}x" and cells[4] == ("yes" if upper <= 5 else "**no**") and cells[6] == "yes: stale"


def test_a_claim_is_stale_once_the_code_it_measures_changes(tmp_path):
    import subprocess

    import headline

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/detector.py").write_text("x = 1\n")
    (tmp_path / "other.py").write_text("y = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    commit = git("rev-parse", "--short", "HEAD").strip()
    assert headline.changed_since(commit, ("src",), tmp_path) is False
    (tmp_path / "other.py").write_text("y = 2\n")  # another path: still current
    assert headline.changed_since(commit, ("src",), tmp_path) is False
    (tmp_path / "src/detector.py").write_text("x = 2\n")  # uncommitted counts: the table is made before the commit
    assert headline.changed_since(commit, ("src",), tmp_path) is True
    assert headline.changed_since(f"{commit}-dirty", ("src",), tmp_path) is True
    assert headline.changed_since("0" * 40, ("src",), tmp_path) is None  # a commit the history lacks


def test_without_the_history_the_headline_keeps_what_it_said():
    text = doc.DOC.read_text(encoding="utf-8")
    assert doc.render(text, changed=lambda commit, paths: None) == text
    # and says "unknown" where it had said nothing
    start = text.index("<!-- table headline")
    bare = text[:start] + "<!-- table headline: benchmarks/headline.py -->\n" + text[text.index(doc.END, start) :]
    assert "| unknown |" in doc.render(bare, changed=lambda commit, paths: None)
