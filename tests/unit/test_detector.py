"""The estimator: scikit-learn/PyOD conventions, thresholds, tail probabilities, the model file, and
evaluate_anomalies against scikit-learn's metrics."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score

import devicepipe as dp
from devicepipe.anomaly import MODEL_FORMAT_VERSION, auto_threshold, load_model, nearest_power_of_two, smallest
from devicepipe.anomaly.model_format import content_digest
from devicepipe.core.errors import DevicepipeError


def beats(n: int, width: int = 64, *, seed: int = 0, anomalous: bool = False) -> np.ndarray:
    """Rows of a smooth bump (a beat) with small noise; anomalous rows carry a second, wide bump."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, width)
    centre = 0.5 + rng.normal(0, 0.01, (n, 1))
    rows = np.exp(-(((t - centre) / 0.04) ** 2)) + rng.normal(0, 0.03, (n, width))
    if anomalous:
        rows += 0.8 * np.exp(-(((t - 0.2) / 0.08) ** 2))
    return rows.astype(np.float32)


def small(**kw) -> dp.BeatAnomalyDetector:
    params = dict(epochs=40, batch_size=64, latent=2, device="cpu", threads=1, seed=0)
    params.update(kw)
    return dp.BeatAnomalyDetector(**params)


@pytest.fixture(scope="module")
def fitted():
    return small().fit(beats(400))


def test_params_follow_scikit_learn(fitted):
    det = small(contamination=0.05)
    twin = clone(det)
    assert twin is not det and twin.get_params() == det.get_params()
    assert det.set_params(latent=3, ensemble=2) is det and det.latent == 3 and det.ensemble == 2
    with pytest.raises(DevicepipeError, match="no parameter 'latnet'"):
        det.set_params(latnet=3)
    assert "contamination=0.05" in repr(clone(small(contamination=0.05)))
    assert not hasattr(clone(fitted), "models_")  # clone gives an unfitted copy


def test_scores_separate_anomalies_and_follow_pyod_signs(fitted):
    normal, odd = beats(200, seed=1), beats(20, seed=2, anomalous=True)
    x = np.concatenate([normal, odd])
    y = np.r_[np.zeros(200), np.ones(20)]
    scores = fitted.decision_function(x)
    assert isinstance(scores, np.ndarray) and scores.shape == (220,)
    assert roc_auc_score(y, scores) > 0.95
    np.testing.assert_array_equal(fitted.score_samples(x), -scores)
    np.testing.assert_array_equal(fitted.predict(x), (scores > fitted.threshold_).astype(np.int64))
    assert set(np.unique(fitted.predict(x))) <= {0, 1}
    np.testing.assert_array_equal(fitted.labels_, (fitted.decision_scores_ > fitted.threshold_).astype(int))
    assert fitted.decision_scores_.shape == (400,)


def test_threshold_rules_by_hand():
    x = beats(300, seed=3)
    det = small(contamination=0.05, scorer="reconstruction").fit(x)
    train = np.sort(det.train_scores_.numpy().astype(np.float64))
    assert train.size == 270  # the 10 % validation rows do not set the threshold of the reconstruction error
    knn = small(contamination=0.05).fit(x)  # a distance leaves its own row out: every row is a fair training score
    assert knn.train_scores_.numel() == 300
    # the share's quantile, raised to Tukey's far-out fence (Q3 + 3 IQR; of the logs for a non-z score)
    z = knn.decision_scores_.astype(np.float64)
    q1, q3 = np.quantile(z, [0.25, 0.75])
    assert knn.threshold_ == pytest.approx(max(np.quantile(z, 0.95), q3 + 3 * (q3 - q1)), rel=1e-6)
    l1, l3 = np.quantile(np.log(train), [0.25, 0.75])
    assert det.threshold_ == pytest.approx(max(np.quantile(train, 0.95), np.exp(l3 + 3 * (l3 - l1))), rel=1e-9)
    logs = np.log(train)
    mad = np.median(np.abs(logs - np.median(logs)))
    expected = float(np.exp(np.median(logs) + 3 * 1.4826 * mad))
    auto = det.set_params(contamination="auto")._threshold_of(det.train_scores_)
    assert auto == pytest.approx(expected, rel=1e-9)
    assert auto_threshold(torch.from_numpy(train)) == pytest.approx(expected, rel=1e-9)
    fixed = small(threshold=0.5).fit(x)
    assert fixed.threshold_ == 0.5 and "fixed" in fixed.threshold_rule


def test_tail_probability_by_hand(fitted):
    x = np.concatenate([beats(30, seed=4), beats(5, seed=5, anomalous=True)])
    p = fitted.tail_probability(x)
    s = fitted.decision_function(x).astype(np.float64)
    train = fitted.train_scores_.numpy().astype(np.float64)
    expected = (1 + (train[None, :] >= s[:, None]).sum(1)) / (1 + train.size)
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-12)
    assert p[-5:].max() < 0.01  # the anomalous rows score above every training row


def test_inputs_come_back_as_they_came(fitted):
    x = beats(10, seed=6)
    as_tensor = fitted.decision_function(torch.from_numpy(x))
    assert isinstance(as_tensor, torch.Tensor)
    np.testing.assert_array_equal(as_tensor.numpy(), fitted.decision_function(x))
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(x, columns=[f"c{i}" for i in range(x.shape[1])])
    np.testing.assert_array_equal(fitted.decision_function(frame), fitted.decision_function(x))


def test_rows_are_resampled_to_the_vae_width():
    assert [nearest_power_of_two(n) for n in (140, 256, 200, 3)] == [128, 256, 256, 8]
    det = small(epochs=2).fit(beats(50, width=140))
    assert det.n_features_in_ == 140 and det.width_ == 128
    assert det.decision_function(beats(3, width=140)).shape == (3,)
    mlp = small(model="mlp", epochs=2).fit(beats(50, width=140))
    assert mlp.width_ == 140


def test_bad_input_is_one_line(fitted):
    x = beats(20)
    x[3, 5] = np.nan
    with pytest.raises(DevicepipeError, match="NaN or infinite value.*row 3"):
        fitted.decision_function(x)
    with pytest.raises(DevicepipeError, match="X has 32 features, but BeatAnomalyDetector is expecting 64"):
        fitted.predict(beats(4, width=32))
    with pytest.raises(DevicepipeError, match="Reshape your data"):
        fitted.predict(beats(1)[0])
    with pytest.raises(DevicepipeError, match="not fitted yet"):
        small().decision_function(x)
    with pytest.raises(DevicepipeError, match="too few to learn from"):
        small().fit(beats(3))
    with pytest.raises(DevicepipeError, match="contamination must be within"):
        small(contamination=0.7).fit(beats(20))
    with pytest.raises(DevicepipeError, match="model='cnn' is not one of"):
        small(model="cnn").fit(beats(20))


def test_saved_model_scores_identically_in_a_new_process(fitted, tmp_path):
    path = fitted.save(tmp_path / "m.pt", geometry={"input": "test"})
    x = beats(25, seed=7)
    np.save(tmp_path / "x.npy", x)
    code = (
        "import numpy as np, devicepipe as dp;"
        f"d = dp.load_model({str(path)!r}, device='cpu');"
        f"np.save({str(tmp_path / 's.npy')!r}, d.decision_function(np.load({str(tmp_path / 'x.npy')!r})));"
        "print(d.threshold_, d.geometry_['input'], d.get_params()['epochs'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert float(out[0]) == fitted.threshold_ and out[1] == "test" and out[2] == "40"
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), fitted.decision_function(x))


def test_ensemble_round_trip(tmp_path):
    det = small(ensemble=3, epochs=5).fit(beats(120))
    loaded = dp.load_model(det.save(tmp_path / "e.pt"), device="cpu")
    assert len(loaded.models_) == 3
    x = beats(8, seed=9)
    np.testing.assert_array_equal(loaded.decision_function(x), det.decision_function(x))
    np.testing.assert_array_equal(loaded.tail_probability(x), det.tail_probability(x))


def test_foreign_damaged_and_newer_files_are_refused(fitted, tmp_path):
    good = fitted.save(tmp_path / "good.pt")
    with pytest.raises(DevicepipeError, match="no model in .*model.pt not found"):
        dp.load_model(tmp_path)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DevicepipeError, match="cannot read model .*damaged or truncated"):
        dp.load_model(truncated)
    np.save(tmp_path / "beats.npy", np.zeros(3))  # another kind of file: said in one sentence, not torch's paragraph
    with pytest.raises(DevicepipeError, match=r"not the archive torch.save writes") as raised:
        dp.load_model(tmp_path / "beats.npy")
    assert "Weights only" not in str(raised.value) and len(str(raised.value)) < 250
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.pt")
    with pytest.raises(DevicepipeError, match="not a devicepipe model file"):
        dp.load_model(tmp_path / "foreign.pt")
    torch.save({"model": {}, "optimizer": {}, "epoch": 3}, tmp_path / "checkpoint.pt")
    with pytest.raises(DevicepipeError, match="training checkpoint, not a model file"):
        dp.load_model(tmp_path / "checkpoint.pt")
    state = torch.load(good, weights_only=True)
    state["format_version"] = MODEL_FORMAT_VERSION + 1
    torch.save(state, tmp_path / "newer.pt")
    with pytest.raises(DevicepipeError, match="upgrade devicepipe"):
        dp.load_model(tmp_path / "newer.pt")
    # format 1 had another local scorer: its models are refused, those of the other scorers still load
    assert fitted.scorer == "local"
    state["format_version"] = 1
    torch.save(state, tmp_path / "older.pt")
    with pytest.raises(DevicepipeError, match="local scorer written by devicepipe .* train it again"):
        dp.load_model(tmp_path / "older.pt")
    knn = small(epochs=1, scorer="knn").fit(beats(40, seed=5))
    older = torch.load(knn.save(tmp_path / "knn.pt"), weights_only=True) | {"format_version": 1}
    del older["digest"]  # (format 1 files were written without one)
    torch.save(older, tmp_path / "knn1.pt")
    x = beats(6, seed=6)
    np.testing.assert_array_equal(dp.load_model(tmp_path / "knn1.pt").decision_function(x), knn.decision_function(x))

    class Payload:  # a pickle that would run code when loaded without weights_only
        def __reduce__(self):
            return (print, ("ran",))

    torch.save({"format": "devicepipe-model", "x": Payload()}, tmp_path / "code.pt")
    with pytest.raises(DevicepipeError, match="more than tensors and plain data"):
        dp.load_model(tmp_path / "code.pt")


@pytest.mark.cuda
def test_a_model_moves_between_gpu_and_cpu(tmp_path):
    x = beats(200)
    on_gpu = small(device="cuda").fit(x)
    on_cpu = dp.load_model(on_gpu.save(tmp_path / "g.pt"), device="cpu")
    new = beats(30, seed=3)
    np.testing.assert_allclose(on_cpu.decision_function(new), on_gpu.decision_function(new), rtol=1e-4, atol=1e-6)
    back = dp.load_model(small().fit(x).save(tmp_path / "c.pt"), device="cuda")
    assert back.models_[0].conv0.weight.device.type == "cuda"
    assert back.decision_function(torch.from_numpy(new).cuda()).device.type == "cuda"


@pytest.mark.cuda
@pytest.mark.parametrize(
    ("scorer", "contamination"), [("reconstruction", "auto"), ("knn", 0.02), ("multiscale", 0.02), ("local", 0.02)]
)
def test_training_on_a_gpu_gives_the_cpu_answers(scorer, contamination):
    # the split, batch order and VAE noise are drawn on the CPU whatever the device, so the
    # two runs differ only by float32 summation order (and the distances by the order of cdist's sums).
    # Rounding alone moves scores by up to a few thousandths of their spread: on the CPU, the input
    # changed by 2e-7 (its float32 rounding) moved multiscale scores by up to 4.1e-3 of their median
    # absolute deviation and knn's by 7.5e-3. Multiscale's scores are robust z-scores, centred on
    # 0, so a relative tolerance alone fails near 0 (an H200 run: 1.7e-4 apart at -0.073 against a
    # spread of 0.63); the absolute one is a hundredth of the spread. Different random draws or
    # TF32 move them by far more, and the flags must be the same.
    x = beats(300)
    x[::50] += 3 * np.sin(np.linspace(0, 20, x.shape[1]))  # six odd rows to flag, alike: knn's k = 7 outnumbers them
    cpu, gpu = (small(epochs=5, contamination=contamination, device=d, scorer=scorer).fit(x) for d in ("cpu", "cuda"))
    spread = np.median(np.abs(cpu.decision_scores_ - np.median(cpu.decision_scores_)))
    np.testing.assert_allclose(gpu.decision_scores_, cpu.decision_scores_, rtol=1e-3, atol=1e-2 * spread)
    assert gpu.threshold_ == pytest.approx(cpu.threshold_, rel=1e-3)
    assert np.array_equal(gpu.labels_, cpu.labels_)
    assert set(np.flatnonzero(cpu.labels_)) == set(range(0, 300, 50))  # the planted rows, found on both


def test_evaluate_anomalies_matches_scikit_learn():
    rng = np.random.default_rng(0)
    for _ in range(40):
        n = int(rng.integers(6, 200))
        y = rng.integers(0, 2, n)
        y[:2] = [0, 1]
        s = np.round(rng.normal(size=n) + y * rng.uniform(0, 2), 1)  # rounded: many ties
        e = dp.evaluate_anomalies(y, s)
        assert e.roc_auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert e.average_precision == pytest.approx(average_precision_score(y, s), abs=1e-12)
        best = max(f1_score(y, s >= t) for t in np.unique(s))
        assert e.best_f1 == pytest.approx(best, abs=1e-12)
        assert f1_score(y, s >= e.best_threshold) == pytest.approx(best, abs=1e-12)
        assert (e.n_anomalies, e.n_normal) == (int(y.sum()), int(n - y.sum()))
    on_device = dp.evaluate_anomalies(torch.tensor([0, 0, 1, 1]), torch.tensor([0.1, 0.4, 0.35, 0.8]))
    assert on_device.roc_auc == 0.75  # by hand: of the 4 pairs, (0.35 vs 0.4) is the one ordered wrongly
    with pytest.raises(DevicepipeError, match="needs both anomalies"):
        dp.evaluate_anomalies([0, 0], [0.1, 0.2])
    with pytest.raises(DevicepipeError, match="NaN"):
        dp.evaluate_anomalies([0, 1], [0.1, float("nan")])


def test_knn_scorer_equals_scikit_learns_neighbours(tmp_path):
    from sklearn.neighbors import NearestNeighbors

    x, new = beats(150, seed=11), np.concatenate([beats(20, seed=12), beats(5, seed=13, anomalous=True)])
    det = small(scorer="knn", neighbours=3, epochs=2, scaling="none").fit(x)
    nn = NearestNeighbors(n_neighbors=3).fit(x)
    expected = nn.kneighbors(new)[0].mean(1)
    np.testing.assert_allclose(det.decision_function(new), expected, rtol=1e-4, atol=1e-5)
    # a training row's own score leaves itself out: its 3 nearest among the other rows
    own = NearestNeighbors(n_neighbors=4).fit(x).kneighbors(x)[0][:, 1:].mean(1)
    np.testing.assert_allclose(det.decision_scores_, own, rtol=1e-4, atol=1e-5)
    loaded = dp.load_model(det.save(tmp_path / "knn.pt"), device="cpu")
    np.testing.assert_array_equal(loaded.decision_function(new), det.decision_function(new))


def test_combined_scorer_is_the_mean_of_robust_z_scores():
    x, new = beats(200, seed=14), np.concatenate([beats(20, seed=15), beats(5, seed=16, anomalous=True)])
    combined = small(scorer="combined", epochs=5).fit(x)
    recon = small(scorer="reconstruction", epochs=5).fit(x)  # the same model, scored by its errors alone
    knn = small(scorer="knn", epochs=5).fit(x)

    def robust(train: np.ndarray, values: np.ndarray) -> np.ndarray:
        logs = np.log(train.astype(np.float64))
        median = np.median(logs)
        scale = 1.4826 * np.median(np.abs(logs - median))
        return (np.log(values.astype(np.float64)) - median) / scale

    train_rows = combined.train_scores_.numel()
    assert train_rows == 180
    from devicepipe.learning.train import split_indices

    rows, _ = split_indices(200, 0.1, 0, torch.device("cpu"))
    expected = (
        robust(recon.decision_scores_[rows], recon.decision_function(new))
        + robust(knn.decision_scores_[rows], knn.decision_function(new))
    ) / 2
    np.testing.assert_allclose(combined.decision_function(new), expected, rtol=1e-4, atol=1e-4)
    assert combined.decision_function(new)[-5:].min() > combined.threshold_  # the anomalous rows are flagged


def test_auto_neighbours_outnumber_a_group_of_anomalies_among_the_training_rows():
    # 400 normal rows and 3 near-copies of one anomalous row (0.7 %): with k = 3 the copies are each
    # other's nearest rows and score like normal ones; k = floor(1 % of 403) + 1 = 5 reaches normal rows
    odd = beats(1, seed=21, anomalous=True) + np.random.default_rng(22).normal(0, 0.01, (3, 64)).astype(np.float32)
    x = np.concatenate([beats(400, seed=20), odd])
    auto = small(epochs=1).fit(x)
    assert auto.neighbours_ == 403 // 100 + 1 == 5
    assert auto.labels_[-3:].tolist() == [1, 1, 1]
    hidden = small(epochs=1, neighbours=2, scorer="multiscale").fit(x)
    assert hidden.labels_[-3:].sum() == 0  # by hand: each copy's 2 nearest rows are the other two copies
    assert small(epochs=1, contamination=0.05).fit(x).neighbours_ == int(0.05 * 403) + 1
    # a fixed threshold or the robust rule says no share: k allows for 1 %
    assert small(epochs=1, threshold=3.0).fit(x).neighbours_ == small(epochs=1, contamination="auto").fit(x).neighbours_
    assert small(epochs=1, threshold=3.0).fit(x).neighbours_ == 5
    for bad in (0, True, 2.5):
        with pytest.raises(DevicepipeError, match="'auto' or at least 1"):
            small(neighbours=bad).fit(x)


def test_training_rows_scored_again_get_their_training_scores():
    x = beats(120, seed=23)
    multiscale = small(epochs=1).fit(x)
    np.testing.assert_array_equal(multiscale.decision_function(x), multiscale.decision_scores_)
    det = small(epochs=1, scaling="none", scorer="knn").fit(x)
    # a row equal to a training row leaves that row out, as the training row's own score did
    np.testing.assert_array_equal(det.decision_function(x), det.decision_scores_)
    from sklearn.neighbors import NearestNeighbors

    k = det.neighbours_
    nudged = x[:5] + np.float32(1e-3)  # not equal: its nearest row (the one it came from) counts
    expected = NearestNeighbors(n_neighbors=k).fit(x).kneighbors(nudged)[0].mean(1)
    # (float32 distances by matrix products: the 0.008 to the row it came from is good to about 1e-4)
    np.testing.assert_allclose(det.decision_function(nudged), expected, rtol=1e-3)
    assert det.neighbours_ == 2  # so leaving the nearest row out would change each score by far more


def test_the_summary_says_which_scorer_and_why_on_a_small_set():
    det = small(epochs=1).fit(beats(57, seed=24))
    s = det.scorer_summary()
    assert (s["scorer"], s["training_rows"], s["held_out_for_stopping"], s["neighbours"]) == ("local", 57, 6, 1)
    assert any("small set" in w and "every row" in w for w in s["why"])
    assert s["local_neighbours"] == 8  # the local error's rows: sqrt(57) = 7.5, rounded
    assert "nearest of 57 training rows" in det.score_meaning()
    recon = small(epochs=1, scorer="reconstruction").fit(beats(57, seed=24)).scorer_summary("told")
    assert recon["why"][0] == "told" and any("scorer='knn'" in w for w in recon["why"])
    assert "neighbours" not in recon
    large = small(epochs=1).fit(beats(400, seed=25)).scorer_summary()
    assert not any("small set" in w for w in large["why"])


def local_residuals_by_hand(
    train: np.ndarray, rows: np.ndarray, k: int, *, leave_out: bool, skip: int = 0
) -> np.ndarray:
    """Locally linear embedding's reconstruction error, one row at a time in NumPy: the k nearest
    training rows after the first ``skip`` (a training row's own left out), D their differences
    from the row, G = D D^T, (G + 0.03 trace(G) I) v = 1, v scaled to sum to one, |v^T D|."""
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        d = ((train - row) ** 2).sum(1)
        if leave_out:
            d[i] = np.inf
        diff = train[np.argsort(d, kind="stable")[skip : skip + k]] - row
        gram = diff @ diff.T
        v = np.linalg.solve(gram + 0.03 * np.trace(gram) * np.eye(k), np.ones(k))
        out[i] = np.linalg.norm((v / v.sum()) @ diff)
    return out


def test_local_residual_by_hand_on_a_line():
    # reference rows on the x axis at -5 .. 5; with two neighbours the weights are equal by symmetry
    reference = torch.tensor([[float(i), 0.0] for i in range(-5, 6)])
    between = torch.tensor([[0.5, 0.0], [0.5, 1.0], [0.5, -2.0]])
    got = dp.local_residual(between, reference, 2)
    # on the line between two rows: rebuilt exactly, though 0.5 from each; off it: the distance to the line
    np.testing.assert_allclose(got.numpy(), [0.0, 1.0, 2.0], atol=1e-6)
    near = dp.knn_distance(between, reference, 2)
    np.testing.assert_allclose(near.numpy(), [0.5, np.sqrt(1.25), np.sqrt(4.25)], rtol=1e-6)
    # one neighbour: the distance to the nearest row
    np.testing.assert_allclose(dp.local_residual(between, reference, 1).numpy(), [0.5, np.sqrt(1.25), np.sqrt(4.25)])


def test_nearest_rows_of_another_width_are_one_line():
    for call in (dp.local_residual, dp.knn_distance):
        with pytest.raises(DevicepipeError, match=r"x \(3, 4\) and reference \(5, 3\).*resample_rows"):
            call(torch.zeros(3, 4), torch.zeros(5, 3), 2)
        with pytest.raises(DevicepipeError, match="m >= 1"):
            call(torch.zeros(3, 4), torch.zeros(0, 4), 2)


def test_local_residual_equals_numpy_row_by_row():
    rng = np.random.default_rng(40)
    train = rng.normal(size=(150, 24)).cumsum(1)
    rows = rng.normal(size=(30, 24)).cumsum(1)
    t = torch.from_numpy(train)
    got = dp.local_residual(torch.from_numpy(rows), t, 7)
    np.testing.assert_allclose(got.numpy(), local_residuals_by_hand(train, rows, 7, leave_out=False), rtol=1e-9)
    own = dp.local_residual(t, t, 7, exclude=torch.arange(150))
    np.testing.assert_allclose(own.numpy(), local_residuals_by_hand(train, train, 7, leave_out=True), rtol=1e-9)
    # a row equal to a reference row leaves that one out, as its own score did
    np.testing.assert_array_equal(dp.local_residual(t, t, 7, skip_equal=True).numpy(), own.numpy())
    # rebuilt from the 4th to the 10th nearest rows
    got = dp.local_residual(torch.from_numpy(rows), t, 7, skip=3)
    np.testing.assert_allclose(got.numpy(), local_residuals_by_hand(train, rows, 7, leave_out=False, skip=3), rtol=1e-9)
    own = dp.local_residual(t, t, 7, skip=3, exclude=torch.arange(150))
    np.testing.assert_allclose(own.numpy(), local_residuals_by_hand(train, train, 7, leave_out=True, skip=3), rtol=1e-9)


@pytest.mark.parametrize("k", [1, 4, 9, 23, 40])
def test_the_nearest_rows_break_ties_by_column_as_a_sort_would(k):
    # small integers: most values tie with others, at the k-th place and inside the k
    d = torch.from_numpy(np.random.default_rng(k).integers(0, 6, size=(50, 40)).astype(np.float32))
    values, index = smallest(d, k)
    for row, vals, cols in zip(d.numpy(), values.numpy(), index.numpy(), strict=True):
        order = np.lexsort((np.arange(row.size), row))[:k]  # by value, then by column
        np.testing.assert_array_equal(cols, order)
        np.testing.assert_array_equal(vals, row[order])


def test_training_rows_scored_again_keep_their_neighbours_through_ties():
    # rows of small integers: many distances tie, also where the k nearest end. Left out by
    # position (training) and by equality (scored again) the rows keep the same neighbours
    t = torch.from_numpy(np.random.default_rng(7).integers(0, 3, size=(300, 6)).astype(np.float64))
    t = torch.unique(t, dim=0)  # (no row has a copy: each leaves out exactly itself)
    own = torch.arange(t.shape[0])
    for k, skip in ((5, 0), (6, 3), (12, 11)):
        np.testing.assert_array_equal(
            dp.local_residual(t, t, k, skip=skip, skip_equal=True).numpy(),
            dp.local_residual(t, t, k, skip=skip, exclude=own).numpy(),
        )
        again = dp.knn_distance(t, t, k + skip, skip_equal=True)
        np.testing.assert_array_equal(again.numpy(), dp.knn_distance(t, t, k + skip, exclude=own).numpy())


def test_skipping_the_nearest_rows_keeps_a_group_of_copies_from_vouching_for_itself():
    # on a line of reference rows at 0 .. 9 (y = 0), three copies of an unusual row at (4.5, 3):
    # from its own nearest rows (the other copies) the row is rebuilt exactly; past them, from
    # the line, it is 3 away
    line = torch.tensor([[float(i), 0.0] for i in range(10)], dtype=torch.float64)
    copies = torch.tensor([[4.5, 3.0]] * 3, dtype=torch.float64)
    reference = torch.cat([line, copies])
    own = torch.arange(10, 13)
    near = dp.local_residual(copies, reference, 2, exclude=own)
    np.testing.assert_allclose(near.numpy(), 0.0, atol=1e-9)
    past = dp.local_residual(copies, reference, 2, skip=2, exclude=own)
    np.testing.assert_allclose(past.numpy(), 3.0, rtol=1e-9)
    # too few rows for the skip: k comes first, the skip is cut to what is left
    few = dp.local_residual(copies[:1], reference[:3], 2, skip=5)
    np.testing.assert_allclose(few.numpy(), dp.local_residual(copies[:1], reference[:3], 2, skip=1).numpy())


def test_the_local_scorer_finds_rows_off_the_normal_shapes_that_distances_miss():
    # normal rows: a bump at any of a range of places (one shape family); the anomalies lie where
    # that family runs, between normal rows, with a small dip no normal row has
    rng = np.random.default_rng(41)
    t = np.linspace(0, 1, 64)

    def bumps(centres, dip=0.0):
        rows = np.exp(-(((t - centres[:, None]) / 0.08) ** 2)) - dip * np.exp(-(((t - 0.85) / 0.03) ** 2))
        return (rows + rng.normal(0, 0.005, rows.shape)).astype(np.float32)

    train = bumps(rng.uniform(0.3, 0.7, 120))
    new = np.concatenate([bumps(rng.uniform(0.3, 0.7, 60)), bumps(rng.uniform(0.3, 0.7, 20), dip=0.05)])
    labels = np.r_[np.zeros(60), np.ones(20)]
    auc = {
        scorer: roc_auc_score(labels, small(epochs=1, scaling="none", scorer=scorer).fit(train).decision_function(new))
        for scorer in ("local", "multiscale")
    }
    assert auc["local"] >= 0.95 and auc["multiscale"] < auc["local"] - 0.1, auc


@pytest.mark.parametrize("scorer", ["multiscale", "local"])
def test_the_pyramid_scorers_equal_their_definition_in_numpy(scorer):
    # by hand: rows averaged down by pairs to 16 samples (local: 8); at each resolution, for
    # multiscale the mean distance to the k nearest training rows (scikit-learn), for local the
    # reconstruction error from the sqrt(200) = 14 nearest after the k - 1 nearest, a training
    # row's own left out; robust z-scores of the logs against the training rows' own; the largest
    from sklearn.neighbors import NearestNeighbors

    x = beats(200, seed=30)
    new = np.concatenate([beats(20, seed=31), beats(5, seed=32, anomalous=True)])
    det = small(epochs=1, scaling="none", scorer=scorer).fit(x)
    k = det.neighbours_
    assert k == 3

    floor = 8 if scorer == "local" else 16

    def halves(rows):
        out = [rows.astype(np.float64)]
        while out[-1].shape[1] >= 2 * floor:
            out.append(out[-1].reshape(len(rows), -1, 2).mean(-1))
        return out

    def z(own, other):
        median = np.median(np.log(own))
        scale = 1.4826 * np.median(np.abs(np.log(own) - median))
        return (np.log(own) - median) / scale, (np.log(other) - median) / scale

    assert [r.shape[1] for r in halves(x)] == ([64, 32, 16, 8] if scorer == "local" else [64, 32, 16])
    z_train, z_new, e_train, e_new = [], [], [], []
    for train, rows in zip(halves(x), halves(new), strict=True):
        if scorer == "local":
            own = local_residuals_by_hand(train, train, 14, leave_out=True, skip=k - 1)
            other = local_residuals_by_hand(train, rows, 14, leave_out=False, skip=k - 1)
        else:
            nn = NearestNeighbors(n_neighbors=k + 1).fit(train)
            own, other = nn.kneighbors(train)[0][:, 1:].mean(1), nn.kneighbors(rows, n_neighbors=k)[0].mean(1)
        a, b = z(own, other)
        z_train.append(a)
        z_new.append(b)
        # the effect: the distance over a typical training row's shape (its norm less its own mean)
        size = np.median(np.linalg.norm(train - train.mean(1, keepdims=True), axis=1))
        e_train.append(own / size)
        e_new.append(other / size)
    np.testing.assert_allclose(det.decision_scores_, np.max(z_train, 0), rtol=1e-4, atol=2e-4)
    np.testing.assert_allclose(det.decision_function(new), np.max(z_new, 0), rtol=1e-4, atol=2e-4)
    assert det.decision_function(new)[-5:].min() > det.threshold_  # the anomalous rows are flagged
    # each row's effect is taken at the resolution where its z-score is largest
    pick = np.argmax(z_new, 0)
    effects = np.asarray(e_new)[pick, np.arange(len(new))]
    got = det.score_details(new)
    np.testing.assert_allclose(got.effects.numpy(), effects, rtol=1e-4)
    np.testing.assert_allclose(
        det.details_.effects.numpy(), np.asarray(e_train)[np.argmax(z_train, 0), np.arange(200)], rtol=1e-4
    )
    flags = (np.max(z_new, 0) > det.threshold_) & (effects >= det.min_effect)
    assert np.array_equal(got.flags.numpy(), flags) and np.array_equal(det.predict(new), flags.astype(np.int64))
    assert np.array_equal(det.labels_, det.details_.flags.numpy().astype(np.int64))
    assert ("at 64, 32, 16, 8 samples" if scorer == "local" else "at 64, 32, 16 samples") in det.score_meaning()
    assert ("its 14 nearest past the 2 nearest of 200 training rows" in det.score_meaning()) == (scorer == "local")


def test_each_kind_of_model_is_found_by_its_name_and_its_module_s():
    from devicepipe.models.kinds import MODEL_KINDS, Sizes, kind_of_module

    for name, kind in MODEL_KINDS.items():
        assert kind_of_module(kind.module.__name__) is kind and kind.name == name
        width = kind.width(140)
        model = kind.build(Sizes(width=width, latent=3, hidden=16, minmax=kind.scaling == "minmax"))
        assert isinstance(model, kind.module) and model.row_width == width
    assert MODEL_KINDS["vae"].width(140) == 128 and MODEL_KINDS["mlp"].width(140) == 140
    assert kind_of_module("ResNet") is None
    with pytest.raises(DevicepipeError):  # a size a model cannot take: refused by its config
        MODEL_KINDS["vae"].configure(Sizes(width=100, latent=2, hidden=1, minmax=False))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"threshold": float("nan")}, "its threshold is nan"),
        ({"train_scores": torch.tensor([])}, "training scores are missing or not finite"),
        ({"neighbours": 10**9}, "neighbours are not within its"),
        ({"calibration": {}}, "fail to score a row (KeyError"),
        ({"width": 999}, "999"),
        ({"n_features_in": -3}, "rows of -3 columns"),
    ],
)
def test_a_model_changed_after_it_was_written_is_one_line(fitted, tmp_path, change, says):
    fitted.save(tmp_path / "m.pt")
    state = torch.load(tmp_path / "m.pt", weights_only=True)
    changed = {**state, **change}  # an edit that also writes the digest anew, to reach the part's own check
    torch.save({**changed, "digest": content_digest(changed)}, tmp_path / "changed.pt")
    with pytest.raises(DevicepipeError, match="the model's parts do not fit together") as info:
        load_model(tmp_path / "changed.pt", device="cpu")
    assert says in str(info.value) and len(str(info.value).splitlines()) == 1
    assert load_model(tmp_path / "m.pt", device="cpu").threshold_ == fitted.threshold_  # as written: read


def test_the_kl_weight_follows_what_the_model_is_for():
    # beats that differ only in height, by about 15 %: little to code, against the prior's pull
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 64)
    bump = np.exp(-(((t - 0.5) / 0.04) ** 2)) - 0.3 * np.exp(-(((t - 0.75) / 0.08) ** 2))
    rows = (bump * (1 + 0.15 * rng.normal(size=(400, 1))) + 0.01 * rng.normal(size=(400, 64))).astype(np.float32)
    mapping = small().fit(rows)  # the default scorer does not use the model: codes that carry shapes
    scoring = small(scorer="reconstruction").fit(rows)  # the notebook's weight
    fixed = small(kl_weight=0.05, epochs=1).fit(rows)
    assert [m.models_[0].config.kl_weight for m in (mapping, scoring, fixed)] == [0.01, 0.1, 0.05]
    spread = [float(m.details_.embeddings.std(0).max()) for m in (mapping, scoring)]
    assert spread[0] > 0.2 and spread[1] < 0.05, spread  # at 0.1 the codes cling to the prior's mean
    # the code that spreads follows the beat's height
    heights = rows @ bump / (bump @ bump)
    codes = mapping.details_.embeddings.numpy()
    assert max(abs(np.corrcoef(heights, codes[:, j])[0, 1]) for j in range(2)) > 0.9
    for bad in (0, -1.0, float("nan"), "high", True):
        with pytest.raises(DevicepipeError, match="kl_weight must be a positive number or 'auto'"):
            small(kl_weight=bad).fit(rows)


def test_a_model_the_scores_do_not_use_learns_from_a_sample_and_the_flags_stay(monkeypatch):
    from devicepipe.anomaly import estimator

    seen = []
    real = estimator.train_models
    monkeypatch.setattr(
        estimator, "train_models", lambda make, data, *a, **k: seen.append(data) or real(make, data, *a, **k)
    )
    rows = np.vstack([beats(300), beats(6, seed=1, anomalous=True)])
    every = small(epochs=2, max_model_rows=None).fit(rows)
    sampled = small(epochs=2, max_model_rows=50).fit(rows)
    assert [d.shape[0] for d in seen] == [306, 50]
    np.testing.assert_allclose(seen[1].numpy(), seen[0].numpy()[np.round(np.linspace(0, 305, 50)).astype(int)])
    np.testing.assert_array_equal(sampled.decision_scores_, every.decision_scores_)  # the scores use every row
    assert sampled.threshold_ == every.threshold_ and sampled.details_.embeddings.shape == (306, 2)
    assert (sampled.fit_rows_["model"], every.fit_rows_["model"]) == (50, 306)  # what summaries and titles say
    seen.clear()
    small(epochs=2, max_model_rows=50, scorer="reconstruction").fit(rows)  # its scores are the model's
    assert [d.shape[0] for d in seen] == [306]
    with pytest.raises(DevicepipeError, match="max_model_rows must be at least 2 or None"):
        small(max_model_rows=1).fit(rows)
