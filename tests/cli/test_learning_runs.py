"""The learning commands end to end on small inputs: ecg, series, demo, their options and models."""

import csv
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from test_cli import assert_user_error, run  # the same helpers as the other commands' tests


def _png_ok(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_ecg_end_to_end_small(tmp_path):
    src = tmp_path / "e.parquet"
    assert run("simulate", "ecg", "--duration", "4min", "--ectopic-rate", 0.03, "--out", src).exit_code == 0
    out = tmp_path / "run"
    result = run("ecg", src, "--out", out, "--epochs", 3, "--device", "cpu", "--latent", 3)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    emb = pq.read_table(out / "embeddings.parquet")
    beats = pq.read_table(out / "beats.parquet")
    assert emb.column_names == ["peak", "time_s", "z0", "z1", "z2", "score", "flag", "spread"]
    assert emb.num_rows == summary["counts"]["beats_kept"] <= beats.num_rows == summary["counts"]["beats_found"]
    assert 250 < beats.num_rows < 310  # four minutes at about 70 bpm
    assert summary["counts"]["flagged"] == int(np.sum(emb.column("flag").to_numpy()))
    # the default scores do not use the model: the run says so, and what it learned from (every beat, under 2,500)
    assert "the model draws the maps; the scores and flags do not use it" in " ".join(result.stdout.split())
    assert summary["scorer"]["model_learned_from_rows"] == emb.num_rows
    # a flag needs a large enough difference, and the line, the report and the summary say so
    rule = f"score above {summary['threshold']:.4g} and a difference of at least 15 % of a typical beat"
    assert f"flagged as anomalous ({rule})" in " ".join(result.stdout.split())
    assert f"flagged ({rule})" in (out / "report.html").read_text(encoding="utf-8")
    assert summary["scorer"]["min_effect"] == 0.15
    from devicepipe.artifacts.summaries import flag_rule, read_summary

    assert flag_rule(read_summary(summary)) == rule
    del summary["scorer"]["min_effect"]  # a scorer that measures no effect (knn, reconstruction)
    assert flag_rule(read_summary(summary)) == f"score above {summary['threshold']:.4g}"
    history = (out / "history.csv").read_text().splitlines()
    assert history[0].startswith('"epoch"') or history[0].startswith("epoch")
    assert len(history) == 4
    for name in ("training.png", "latent.png", "generated.png", "extremes.png", "excerpt.png"):
        assert _png_ok(out / name), name
    assert (out / "generated.pdf").read_bytes()[:4] == b"%PDF"
    assert (out / "checkpoint.pt").exists() and set(summary["seconds"]) >= {"read", "detect", "train", "score"}
    # resume continues to more epochs from the checkpoint (the scorer is not part of training: it may change)
    more = run("ecg", src, "--out", out, "--epochs", 5, "--device", "cpu", "--latent", 3, "--resume",
               "--scorer", "reconstruction")  # fmt: skip
    assert more.exit_code == 0, more.output
    assert "do not use it" not in more.stdout
    assert len((out / "history.csv").read_text().splitlines()) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scorer"]["scorer"] == "reconstruction" and "neighbours" not in summary["scorer"]
    assert "squared standard deviations" in summary["threshold_means"]
    # the model goes on as it was trained (KL weight 0.01, for the default scorer), whichever scorer reads it now
    import devicepipe as dp

    assert dp.load_model(out / "model.pt", device="cpu").models_[0].config.kl_weight == 0.01


def test_ecg_reference_labels_every_beat_and_counts_the_flags_per_label(tmp_path, monkeypatch):
    from devicepipe.artifacts import figures

    drawn, plot = {}, figures.plot_beats_excerpt
    monkeypatch.setattr(figures, "plot_beats_excerpt", lambda *a, **k: drawn.update(k) or plot(*a, **k))
    src = tmp_path / "e.csv"
    assert run("simulate", "ecg", "--duration", "4min", "--ectopic-rate", 0.05, "--out", src).exit_code == 0
    truth = tmp_path / "e.truth.csv"
    out = tmp_path / "run"
    args = ["ecg", src, "--sampling-rate", 250, "--out", out, "--epochs", 3, "--device", "cpu", "--reference", truth]
    result = run(*args)
    assert result.exit_code == 0, result.output
    emb = pq.read_table(out / "embeddings.parquet").to_pydict()
    with open(truth, newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_sample = {int(r["sample"]): r["symbol"] for r in rows}
    assert list(drawn["reference"]) == sorted(by_sample)  # the excerpt draws the reference beats its caption names
    # each beat's label is that of the true beat within 150 ms (37 samples at 250 Hz), found here by hand
    for peak, label in zip(emb["peak"], emb["reference"], strict=True):
        near = [sym for s, sym in by_sample.items() if abs(s - peak) <= 37]
        assert label == (near[0] if near else "")
    summary = json.loads((out / "summary.json").read_text())
    labels = summary["reference"]["labels"]
    assert sum(v["beats"] for v in labels.values()) == summary["counts"]["beats_kept"]
    flags = np.array(emb["flag"])
    # the reference's beats that no beat found lies within 150 ms of, found here by hand
    found = pq.read_table(out / "beats.parquet", columns=["peak"]).column("peak").to_numpy()
    never = [sym for s, sym in by_sample.items() if not (np.abs(found - s) <= 37).any()]
    for name, v in labels.items():
        sel = np.array(emb["reference"]) == ("" if name == "none" else name)
        missed = {} if name == "none" else {"missed": never.count(name)}
        assert v == {"beats": int(sel.sum()), "flagged": int(flags[sel].sum()), **missed}
    assert f"V {labels['V']['flagged']} of {labels['V']['beats']}" in result.stdout
    # a reference without labels is refused before the recording is read
    (tmp_path / "peaks.csv").write_text("sample\n100\n")
    refused = run("ecg", src, "--sampling-rate", 250, "--out", tmp_path / "r2", "--reference", tmp_path / "peaks.csv")
    assert_user_error(refused, "has no beat labels")
    assert not (tmp_path / "r2").exists()


def test_ecg_ensemble_small(tmp_path):
    src = tmp_path / "e.parquet"
    run("simulate", "ecg", "--duration", "3min", "--out", src)
    result = run("ecg", src, "--out", tmp_path / "r", "--epochs", 2, "--ensemble", 3, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "ensemble.pt").exists() and not (tmp_path / "r" / "checkpoint.pt").exists()
    header = (tmp_path / "r" / "history.csv").read_text().splitlines()[0]
    assert "train_loss_2" in header


def test_series_end_to_end_small(tmp_path):
    src = tmp_path / "load.csv"
    assert run("simulate", "load", "--days", 60, "--anomalies", 3, "--out", src).exit_code == 0
    out = tmp_path / "run"
    result = run("series", src, "--out", out, "--column", "load_MW", "--epochs", 60, "--device", "cpu")
    assert result.exit_code == 0, result.output
    emb = pq.read_table(out / "embeddings.parquet")
    assert emb.num_rows == 60 and {"start", "score", "flag", "z0"} <= set(emb.column_names)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps_per_window"] == 24 and summary["windows"]["used"] == 60
    for name in ("training.png", "latent.png", "extremes.png", "days.png"):
        assert _png_ok(out / name), name
    assert summary["scorer"]["scorer"] == "local" and "robust standard deviations" in summary["threshold_means"]
    pointwise = run(
        "series", src, "--out", tmp_path / "pw", "-c", "load_MW", "--pointwise", "--epochs", 2, "--device", "cpu"
    )
    assert pointwise.exit_code == 0, pointwise.output
    summary = json.loads((tmp_path / "pw" / "summary.json").read_text())
    assert summary["pointwise"] is True and summary["scorer"]["scorer"] == "reconstruction"
    assert "squared fractions of that range" in summary["threshold_means"]
    # two epochs of a model whose reconstruction errors are the scores: that warning is one to heed
    assert summary["converged"] is False and "so its scores and flags are not yet reliable" in summary["warnings"][0]
    assert "warning: not converged" in " ".join(pointwise.stderr.split())  # on stderr, seen even when piped


def test_demo_end_to_end(tmp_path):
    result = run("demo", "--out", tmp_path / "d", "--device", "cpu", "--epochs", 3)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d" / "summary.json").exists()
    said = " ".join(result.stdout.split())
    assert said.count("open first") == 1 and f"open first: {tmp_path / 'd' / 'report.html'} (it shows" in said
    # the reported count, checked from the files: simulated V beats with a flagged beat within 5 samples
    with open(tmp_path / "d" / "input" / "ecg.truth.csv", newline="") as fh:
        ectopic = np.array([int(r["sample"]) for r in csv.DictReader(fh) if r["symbol"] == "V"])
    table = pq.read_table(tmp_path / "d" / "embeddings.parquet", columns=["peak", "flag"])
    flagged = table.column("peak").to_numpy()[table.column("flag").to_numpy()]
    found = sum(bool(flagged.size) and int(np.abs(flagged - v).min()) <= 5 for v in ectopic)
    assert f"{found} of the {ectopic.size} simulated ventricular ectopic beats" in " ".join(result.stdout.split())
    # the V beats the classes found, checked against the truth's count
    classes = pq.read_table(tmp_path / "d" / "beats.parquet", columns=["class"]).column("class").to_numpy()
    v = int((classes == "V").sum())
    # the clinical answer ends what it says, as every command ends (before the files)
    assert v == ectopic.size and f"V {v:,} (" in said and said.index("flagged as") < said.index("beats by class")
    assert said.index("heart rate:") < said.index("rhythm: no atrial fibrillation") < said.index("outputs in")
    # what was printed as the result is in summary.json too, with the flagged beats and the threshold's meaning
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert summary["reference"]["labels"]["V"] == {"beats": ectopic.size, "flagged": found, "missed": 0}
    assert sorted(f["peak"] for f in summary["flagged"]) == sorted(flagged.tolist())
    assert all(f["score"] > summary["threshold"] for f in summary["flagged"])
    # each flag says what differs: the normal beats flagged are those whose window holds the start of a
    # premature beat, checked against the truth file (the next simulated beat is ectopic, under 0.51 s on)
    with open(tmp_path / "d" / "input" / "ecg.truth.csv", newline="") as fh:
        truth = [(int(r["sample"]), r["symbol"]) for r in csv.DictReader(fh)]
    fs = summary["sampling_rate_hz"]
    for f in summary["flagged"]:
        after = [(s, sym) for s, sym in truth if s > f["peak"] + 5]
        premature_next = bool(after) and after[0][1] == "V" and (after[0][0] - f["peak"]) / fs < 0.51
        assert ("the next beat" in f["why"]) == premature_next, f
        assert premature_next or f["why"] == "its own shape"
    assert "what differs" in (tmp_path / "d" / "report.html").read_text()
    # the default scorer: each beat rebuilt from the training beats past its k - 1 nearest, k = floor(1 % of
    # them) + 1, at 256, 128, 64, 32, 16 and 8 samples, as robust z-scores
    k = table.num_rows // 100 + 1
    assert "at 256, 128, 64, 32, 16, 8 samples" in summary["threshold_means"]
    assert f"past the {k - 1} nearest of {table.num_rows:,} training rows" in summary["threshold_means"]
    assert "robust standard deviations" in summary["threshold_means"]
    assert summary["scorer"]["scorer"] == "local" and summary["scorer"]["training_rows"] == table.num_rows
    assert summary["scorer"]["neighbours"] == k
    # three epochs have not converged, but the default scorer does not use the model: the flags stand, so
    # the summary records it without a warning, and the report and the model's figures say what it changes
    assert summary["converged"] is False and not any("converged" in w for w in summary["warnings"])
    assert "not converged" not in result.stderr
    page = " ".join((tmp_path / "d" / "report.html").read_text().split())
    assert "no (flags do not use it)" in page and "It had not settled: those figures may still change" in page


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (
            ["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--width", "100"],
            "--width must be a power of two >= 8, got 100; use e.g. --width 256",
        ),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--lr", "5"], "--lr"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--resume"], "nothing to resume"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--ensemble", "2", "--resume"], "single models"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--bf16", "--device", "cpu"], "bf16"),
        (["ecg", "{tmp}/missing.parquet", "--out", "{tmp}/r"], "file not found"),
        (["series", "{tmp}/e.parquet", "--out", "{tmp}/r", "--time-column", "when"], "column 'when' not found"),
        (["series", "{tmp}/e.parquet", "--out", "{tmp}/r", "--window", "1x"], "cannot read duration"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--max-epochs", "0"], "--max-epochs"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--threads", "0"], "--threads"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--scorer", "nearest"], "--scorer"),
        (["ecg", "{tmp}/e.parquet", "--out", "{tmp}/r", "--neighbours", "0"], "--neighbours"),
        (["series", "{tmp}/e.parquet", "--out", "{tmp}/r", "--pointwise", "--scorer", "knn"], "single samples"),
    ],
)
def test_learning_bad_options_leave_no_complete_run(tmp_path, args, pattern):
    run("simulate", "ecg", "--duration", "1min", "--out", tmp_path / "e.parquet")
    result = run(*[a.format(tmp=tmp_path) for a in args])
    assert_user_error(result, pattern)
    assert not (tmp_path / "r" / "summary.json").exists()


def test_ecg_min_quality_keeps_poor_beats_out_of_training_and_flags(tmp_path):
    from devicepipe.io import write_parquet
    from devicepipe.simulate import simulate_ecg

    fs = 250
    sim = simulate_ecg(240, fs, seed=4, ectopic_rate=0.02)
    x = sim.signal.clone()
    x[100 * fs : 120 * fs] += 1.5 * torch.randn(20 * fs, generator=torch.Generator().manual_seed(0))  # 20 s of noise
    src = write_parquet({"ecg": x}, tmp_path / "e.parquet", sampling_rate=fs)
    out = tmp_path / "run"
    result = run("ecg", src, "--out", out, "--epochs", 2, "--device", "cpu", "--min-quality", 0.5)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    beats = pq.read_table(out / "beats.parquet").to_pandas()
    kept = beats[beats["kept"]]
    poor = kept["stretch_quality"] < 0.5  # beats in a stretch of poor signal
    in_noise = (kept["peak"] >= 100 * fs) & (kept["peak"] < 120 * fs)
    assert poor[in_noise].all() and poor.sum() >= in_noise.sum() > 0
    assert summary["quality"]["left_out_of_training_and_flags"] == int(poor.sum())
    assert not beats["flagged"][beats["kept"]][poor.to_numpy()].any()  # a poor beat is never flagged
    # an ectopic beat is unlike the typical beat too, but in good signal it stays, and can be flagged
    ectopic = sim.r_peaks.numpy()[np.asarray(sim.symbols) == "V"]
    clean = [p for p in ectopic if not 95 * fs <= p < 125 * fs]
    near = kept["peak"].to_numpy()[:, None]
    is_ectopic = (np.abs(near - np.asarray(clean)[None]) <= 0.05 * fs).any(1)
    assert is_ectopic.sum() > 0 and not poor.to_numpy()[is_ectopic].any()
    assert (kept["quality"].to_numpy()[is_ectopic] < 0.5).any()  # the beat's own quality would have left it out
    assert "left out of training and out of the flags" in " ".join(result.stdout.split())
    bad = run("ecg", src, "--out", tmp_path / "b", "--min-quality", 2)
    assert_user_error(bad, "--min-quality must be a correlation between -1 and 1")
    assert not (tmp_path / "b").exists()


def test_series_finds_a_time_column_of_any_name(tmp_path):
    days = 14
    stamps = pd.date_range("2023-03-01", periods=24 * days, freq="h")
    load = 100 + 10 * np.sin(2 * np.pi * np.arange(stamps.size) / 24)
    src = tmp_path / "meter.csv"
    pd.DataFrame({"kW": load, "reading time": stamps.strftime("%d.%m.%Y %H:%M")}).to_csv(src, index=False)
    out = tmp_path / "run"
    result = run("series", src, "--out", out, "--epochs", 2, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "times from column 'reading time'" in result.output
    assert json.loads((out / "summary.json").read_text())["time_column"] == "reading time"
    starts = pq.read_table(out / "embeddings.parquet").column("start").to_pylist()
    assert len(starts) == days and str(starts[0]).startswith("2023-03-01") and str(starts[-1]).startswith("2023-03-14")
    bare = tmp_path / "bare.csv"
    pd.DataFrame({"kW": load}).to_csv(bare, index=False)
    assert_user_error(run("series", bare, "--out", tmp_path / "r2"), "found no column of times in bare.csv")
    assert not (tmp_path / "r2").exists()


def test_a_series_written_with_utc_offsets_is_cut_into_the_days_of_its_own_clock(tmp_path):
    # two weeks of hourly load in Berlin, over the change to summer time (2023-03-26 has 23 hours),
    # written with UTC offsets and again as the same wall-clock times without them: the same days
    days = 14
    instants = pd.date_range("2023-03-20", "2023-04-03", freq="h", tz="Europe/Berlin", inclusive="left")
    hours = np.asarray(instants.hour)
    load = 100 + 10 * np.sin(2 * np.pi * hours / 24) + np.arange(hours.size) % 7
    zoned, naive = tmp_path / "zoned.csv", tmp_path / "naive.csv"
    pd.DataFrame({"time": [t.isoformat() for t in instants], "kW": load}).to_csv(zoned, index=False)
    pd.DataFrame({"time": instants.strftime("%Y-%m-%dT%H:%M:%S"), "kW": load}).to_csv(naive, index=False)
    tables = []
    for src in (zoned, naive):
        out = tmp_path / src.stem
        result = run("series", src, "--out", out, "--epochs", 2, "--device", "cpu")
        assert result.exit_code == 0, result.output
        tables.append(pq.read_table(out / "embeddings.parquet"))
    starts = tables[0].column("start").to_pylist()
    assert len(starts) == days and all(str(s).endswith("00:00:00") for s in starts), starts  # local midnights
    assert str(starts[0]).startswith("2023-03-20") and str(starts[-1]).startswith("2023-04-02")
    assert tables[0].equals(tables[1])


@pytest.mark.slow  # three series runs end to end; CI runs it
def test_a_series_model_scores_a_new_period(tmp_path):
    src = tmp_path / "load.csv"
    assert run("simulate", "load", "--days", 120, "--anomalies", 6, "--seed", 3, "--out", src).exit_code == 0
    table = pd.read_csv(src)
    truth = pd.read_csv(tmp_path / "load.truth.csv")["day"].tolist()
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    table.iloc[: 24 * 60].to_csv(first, index=False)
    table.iloc[24 * 60 :].to_csv(second, index=False)
    assert run("series", first, "--out", tmp_path / "m", "--device", "cpu").exit_code == 0

    # the training period scored again: the training run's own scores and flags, by another path
    again = run("score", first, "--model", tmp_path / "m", "--out", tmp_path / "again", "--device", "cpu")
    assert again.exit_code == 0, again.output
    trained = pq.read_table(tmp_path / "m" / "embeddings.parquet").to_pandas()
    scored = pq.read_table(tmp_path / "again" / "scores.parquet").to_pandas()
    assert list(scored["start"]) == list(trained["start"])
    np.testing.assert_allclose(scored["score"], trained["score"], rtol=1e-4, atol=1e-4)
    assert list(scored["flag"]) == list(trained["flag"])

    # the new period: its anomalous days (the simulator's truth) rank high; any day flagged is one of them
    result = run("score", second, "--model", tmp_path / "m", "--out", tmp_path / "new", "--device", "cpu")
    assert result.exit_code == 0, result.output
    new = pq.read_table(tmp_path / "new" / "scores.parquet").to_pandas()
    days = new["start"].astype(str).str[:10]
    odd = days.isin(truth)
    assert 0 < odd.sum() < len(new)
    higher = (new.loc[odd, "score"].to_numpy()[:, None] > new.loc[~odd, "score"].to_numpy()[None, :]).mean()
    assert higher >= 0.9  # ROC AUC of anomalous against normal days
    summary = json.loads((tmp_path / "new" / "summary.json").read_text())
    flagged = {f["start"][:10] for f in summary["flagged"]}
    assert flagged <= set(truth) and summary["windows"]["used"] == len(new)
    assert days[new["score"].idxmax()] in truth
    assert summary["model"]["geometry"]["input"] == "load-windows" and 0 <= new["tail_probability"].min()
    for name in ("days.png", "extremes.png", "scores.png", "latent.png"):
        assert _png_ok(tmp_path / "new" / name), name
    assert "devicepipe score: second.csv" in (tmp_path / "new" / "report.html").read_text()
    assert summary["warnings"] == [] and "warning" not in result.stderr  # the same kind of load: nothing to say

    # the same period in kW for a model trained in MW: flagged throughout, and said why
    table.iloc[24 * 60 :].assign(load_MW=lambda t: t["load_MW"] * 1000).to_csv(tmp_path / "kw.csv", index=False)
    kw = run("score", tmp_path / "kw.csv", "--model", tmp_path / "m", "--out", tmp_path / "kw", "--device", "cpu")
    assert kw.exit_code == 0, kw.output
    said = json.loads((tmp_path / "kw" / "summary.json").read_text())["warnings"]
    assert len(said) == 2 and "times those the model was trained on" in said[0] and "windows were flagged" in said[1]
    assert all(f"warning: {w}" in " ".join(kw.stderr.split()) for w in said)


#: The simulator's anomaly kinds and the side of like days each lies on (its ground truth).
SIMULATED_SIDE = {"outage": "low", "holiday": "low", "stuck": "low", "spike": "high"}


def _against_truth(out, truth):
    """The run's flags against the truth, counted here from its table and the truth file alone."""
    table = pq.read_table(out / ("embeddings.parquet" if (out / "embeddings.parquet").exists() else "scores.parquet"))
    rows = table.to_pandas()
    rows["day"] = rows["start"].astype(str).str[:10]
    rows["rank"] = rows["score"].rank(ascending=False, method="first").astype(int)
    listed = rows.merge(truth, on="day")
    return rows, listed


def test_series_reference_scores_every_simulated_kind(tmp_path):
    src = tmp_path / "load.csv"
    assert run("simulate", "load", "--days", 240, "--anomalies", 12, "--seed", 5, "--out", src).exit_code == 0
    truth = pd.read_csv(tmp_path / "load.truth.csv")
    assert set(truth["kind"]) == set(SIMULATED_SIDE)
    out = tmp_path / "r"
    result = run("series", src, "--out", out, "--reference", tmp_path / "load.truth.csv", "--epochs", 60,
                 "--device", "cpu")  # fmt: skip
    assert result.exit_code == 0, result.output
    ref = json.loads((out / "summary.json").read_text())["window_reference"]
    rows, listed = _against_truth(out, truth)
    assert ref["source"] == "load.truth.csv" and ref["rows"] == len(truth) == ref["listed_windows"] == len(listed)
    assert ref["flagged_listed"] == int(listed["flag"].sum())
    assert ref["flagged_not_listed"] == int(rows["flag"].sum() - listed["flag"].sum())
    assert ref["sensitivity"] == pytest.approx(listed["flag"].mean())
    assert ref["listed_in_top"] == int((listed["rank"] <= len(truth)).sum()) and ref["outside"] == []
    for kind, group in listed.groupby("kind"):  # every simulated kind scored
        k = ref["kinds"][kind]
        assert k["listed"] == len(group) and k["flagged"] == int(group["flag"].sum())
        assert k["best_rank"] == group["rank"].min() and k["median_rank"] == pytest.approx(group["rank"].median())
    # each listed day lies on its kind's side of like days, in the summary and the table
    by_day = {w["start"][:10]: w for w in ref["windows"]}
    for day, kind, direction in zip(listed["day"], listed["kind"], listed["direction"], strict=True):
        assert by_day[day]["kind"] == kind and by_day[day]["direction"] == direction == SIMULATED_SIDE[kind]
    # the stuck meter's days hold one value throughout, whether the model flags them or not
    summary = json.loads((out / "summary.json").read_text())
    assert [d[:10] for d in summary["flat_windows"]] == truth.loc[truth["kind"] == "stuck", "day"].tolist()
    # the terminal ends with the answer: the flags low and high, then the reference's count
    said = result.stdout.splitlines()
    last = said[said.index(next(line for line in said if line.startswith("outputs in"))) - 1]
    assert last.startswith(f"against load.truth.csv: {ref['flagged_listed']} of {len(truth)} listed windows flagged")
    page = (out / "report.html").read_text()
    assert "Flags against the reference, by kind" in page and "The listed windows" in page

    # the same reference scores a new period with the model: its own counts, the same kinds
    scored = run("score", src, "--model", out, "--out", tmp_path / "s", "--reference", tmp_path / "load.truth.csv",
                 "--device", "cpu")  # fmt: skip
    assert scored.exit_code == 0, scored.output
    again = json.loads((tmp_path / "s" / "summary.json").read_text())["window_reference"]
    rows, listed = _against_truth(tmp_path / "s", truth)
    assert again["kinds"].keys() == ref["kinds"].keys() and again["flagged_listed"] == int(listed["flag"].sum())

    # a reference of another period is refused before anything is written
    (tmp_path / "other.csv").write_text("day,kind\n1999-01-01,outage\n")
    refused = run("series", src, "--out", tmp_path / "o", "--reference", tmp_path / "other.csv", "--epochs", 2)
    assert_user_error(refused, "none of the 1 time(s) listed in other.csv")
    assert not (tmp_path / "o").exists()
    # the series given as its own reference lists every window: refused, nothing written
    refused = run("series", src, "--out", tmp_path / "o", "--reference", src, "--epochs", 2)
    assert_user_error(refused, "load.csv lists every one of the series' 240 windows")
    assert not (tmp_path / "o").exists()


def test_a_series_model_refuses_what_it_cannot_score(tmp_path):
    src = tmp_path / "load.csv"
    assert run("simulate", "load", "--days", 30, "--out", src).exit_code == 0
    assert run("series", src, "--out", tmp_path / "m", "--epochs", 2, "--device", "cpu").exit_code == 0
    assert run("series", src, "--out", tmp_path / "pw", "--pointwise", "--epochs", 1, "--device", "cpu").exit_code == 0
    quarter = tmp_path / "quarter.csv"
    table = pd.read_csv(src)
    stamps = pd.date_range("2021-01-01", periods=len(table), freq="15min")
    pd.DataFrame({"Datetime": stamps, "load_MW": table["load_MW"]}).to_csv(quarter, index=False)
    cases = [
        (["score", quarter, "--model", tmp_path / "m"], "has a step of 15.0 min (96 to a window)"),
        (["score", src, "--model", tmp_path / "pw"], "per-sample autoencoder"),
        (["score", src, "--model", tmp_path / "m", "--sampling-rate", 250], "--sampling-rate is not for a load-series"),
        (["score", src, "--model", tmp_path / "m", "--reference", tmp_path / "x.atr"], "is not a table of days"),
        (["score", tmp_path, "--model", tmp_path / "m"], "scores one series at a time"),
    ]
    for args, pattern in cases:
        assert_user_error(run(*args, "--out", tmp_path / "out"), pattern)
        assert not (tmp_path / "out").exists()


def test_a_series_trained_at_a_learning_rate_that_kills_it_is_not_converged(tmp_path):
    assert run("simulate", "load", "--days", "40", "--out", tmp_path / "l.csv").exit_code == 0
    # scored by the reconstruction error, so that the dead model changes the flags (the default scorer's stand)
    args = ("--lr", "0.99", "--epochs", "12", "-d", "cpu", "--scorer", "reconstruction")
    result = run("series", tmp_path / "l.csv", "--out", tmp_path / "r", *args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    history = pd.read_csv(tmp_path / "r" / "history.csv")
    last = history.iloc[-4:]
    assert last["val_loss"].nunique() == 1 and np.ptp(last["train_loss"]) < 1e-6  # the weights stopped moving
    assert summary["converged"] is False and "the model did not learn" in summary["warnings"][0]
    assert "the model did not learn" in " ".join(result.stderr.split())


def test_min_effect_sets_how_large_a_flagged_difference_must_be(tmp_path):
    # a quiet clean recording: by the score alone its ordinary beat-to-beat variation is flagged;
    # by default (a difference of 15 % of a typical beat) nothing is
    src = tmp_path / "quiet.parquet"
    made = run("simulate", "ecg", "--duration", "10min", "--noise", 0.01, "--seed", 1, "--out", src)
    assert made.exit_code == 0, made.output
    flagged = {}
    for least in (None, 0):
        out = tmp_path / f"run{least}"
        more = () if least is None else ("--min-effect", least)
        result = run("ecg", src, "--out", out, "--epochs", 1, "--device", "cpu", *more)
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert summary["scorer"]["min_effect"] == (0.15 if least is None else 0.0)
        flagged[least] = summary["counts"]["flagged"]
        said = " ".join(result.stdout.split())
        assert ("a difference of at least 15 % of a typical beat" in said) == (least is None)
    assert flagged[None] == 0 and flagged[0] >= 3
    bad = run("ecg", src, "--out", tmp_path / "bad", "--min-effect", 2, "--device", "cpu")
    assert bad.exit_code == 2 and "--min-effect" in bad.output and "Traceback" not in bad.output
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    ("kind", "args", "said"),
    [  # each scored by the default scorer, which does not use the model: a failed model is said all the same
        ("ecg 2min", ("--epochs", "4", "--lr", "0.2"), "validation loss grew from"),  # finite, orders of magnitude
        ("ecg 5min", ("--epochs", "3", "--lr", "0.99"), "its loss became NaN at epoch"),
        ("load", ("--epochs", "12", "--lr", "0.99"), "has not changed at all since epoch"),  # frozen
    ],
    ids=["grew", "nan", "frozen"],
)
def test_a_model_whose_training_failed_says_so_everywhere(tmp_path, kind, args, said):
    if kind.startswith("ecg"):
        made = run("simulate", "ecg", "--duration", kind.split()[1], "--out", tmp_path / "in.parquet")
        command = ("ecg", tmp_path / "in.parquet")
    else:
        made = run("simulate", "load", "--days", "40", "--out", tmp_path / "in.csv")
        command = ("series", tmp_path / "in.csv")
    assert made.exit_code == 0, made.output
    result = run(*command, "--out", tmp_path / "r", "-d", "cpu", *args)
    assert result.exit_code == 0, result.output
    stderr = " ".join(result.stderr.split())
    assert "warning: the model did not learn" in stderr and said in stderr and "lower --lr" in stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["converged"] is False and said in summary["model_failed"]
    assert any(said in w for w in summary["warnings"])
    page = " ".join((tmp_path / "r" / "report.html").read_text().split())
    assert "Training failed, so the figures below are drawn from a broken model" in page and said in page
    assert "no: training failed (flags do not use it)" in page
    history = pd.read_csv(tmp_path / "r" / "history.csv")  # every epoch run, the failed one included
    assert len(history) == summary["epochs"]["run"][0]
    if kind == "ecg 2min":  # the model reused: its file keeps the histories, so scoring with it says so too
        scored = run("score", tmp_path / "in.parquet", "--model", tmp_path / "r", "--out", tmp_path / "s")
        assert scored.exit_code == 0, scored.output
        assert "warning: the model given was broken in training" in " ".join(scored.stderr.split())
        assert any(said in w for w in json.loads((tmp_path / "s" / "summary.json").read_text())["warnings"])
