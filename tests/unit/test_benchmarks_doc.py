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
