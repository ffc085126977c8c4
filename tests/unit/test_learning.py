import importlib.util

import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.ecg import ecg_peaks, ecg_segment
from devicepipe.learning.ensemble import fit_ensemble
from devicepipe.learning.score import anomaly_threshold, embed, reconstruction_error, score
from devicepipe.learning.train import epoch_noise, evaluate_loss, fit, load_checkpoint, split_indices
from devicepipe.models import LightVAE, LightVAEConfig, MLPAutoencoder, MLPAutoencoderConfig, Model
from devicepipe.plots import plot_training
from devicepipe.signal.resample import resample_rows
from devicepipe.simulate import simulate_ecg


def _beats(n_seconds=240, seed=0, width=64, device="cpu"):
    sim = simulate_ecg(n_seconds, 250, seed=seed, ectopic_rate=0.03, device=device)
    beats = ecg_segment(sim.signal, ecg_peaks(sim.signal, 250), 250)
    m = resample_rows(beats.matrix, width)
    return (m - m.mean()) / m.std(), beats


@pytest.mark.parametrize(("width", "latent"), [(8, 1), (64, 2), (256, 5)])
def test_vae_shapes(device, width, latent):
    model = LightVAE(LightVAEConfig(width=width, latent=latent)).to(device)
    x = torch.randn(7, width, device=device)
    recon, mu, logvar = model(x)
    assert recon.shape == (7, width) and mu.shape == logvar.shape == (7, latent)
    assert model.losses(x).shape == (7,) and recon.device.type == device.type
    assert model.decode(torch.zeros(3, latent, device=device)).shape == (3, width)
    # eval mode without noise reconstructs from the mean; given noise changes the result
    model.eval()
    assert torch.equal(model(x)[0], model.decode(mu))
    assert not torch.equal(model(x, torch.ones_like(mu))[0], model(x)[0])


def test_vae_config_checks_and_the_model_protocol():
    with pytest.raises(DevicepipeError, match="power of two"):
        LightVAEConfig(width=100)
    model = LightVAE(LightVAEConfig(width=32, latent=3))
    ae = MLPAutoencoder(MLPAutoencoderConfig(input=5, hidden=4, latent=2))
    assert isinstance(model, Model) and isinstance(ae, Model)
    # the VAE's loss takes one noise value per latent dimension, the autoencoder's none
    assert model.noise_dim == 3 and ae.noise_dim is None
    assert LightVAE(LightVAEConfig(**model.config_dict())).config == model.config
    assert ae(torch.rand(3, 5))[0].shape == (3, 5)


def test_vae_loss_matches_the_formula():
    model = LightVAE(LightVAEConfig(width=16, latent=2, kl_weight=0.1))
    x, eps = torch.randn(4, 16), torch.randn(4, 2)
    recon, mu, logvar = model(x, eps)
    expected = ((recon - x) ** 2).mean(1) - 0.1 * (1 + logvar - mu**2 - logvar.exp()).mean(1)
    torch.testing.assert_close(model.losses(x, eps), expected)
    # the reparameterisation: z = mu + eps * exp(logvar / 2)
    torch.testing.assert_close(recon, model.decode(mu + eps * torch.exp(0.5 * logvar)))


def test_autoencoder_shapes(device):
    model = MLPAutoencoder(MLPAutoencoderConfig(input=24, hidden=16, latent=4)).to(device)
    x = torch.rand(9, 24, device=device)
    recon, z, none = model(x)
    assert recon.shape == (9, 24) and z.shape == (9, 4) and none is None
    assert float(recon.detach().min()) >= 0 and float(recon.detach().max()) <= 1  # sigmoid output
    torch.testing.assert_close(model.losses(x), ((recon - x) ** 2).mean(1))


def test_loss_falls_on_simulated_beats():
    data, _ = _beats()
    torch.manual_seed(0)
    model = LightVAE(LightVAEConfig(width=64, latent=2))
    history = fit(model, data, epochs=40, batch_size=32, lr=3e-3, seed=0)
    assert len(history.train) == len(history.val) == 40
    assert history.train[-1] < 0.5 * history.train[0]
    assert history.val[-1] < 0.5 * history.val[0]


def _same_weights(a: torch.nn.Module, b: torch.nn.Module, device: torch.device) -> None:
    """Bit for bit on the CPU; on CUDA, whose convolution gradients sum in no fixed order, to float tolerance."""
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        if device.type == "cpu":
            assert torch.equal(x, y)
        else:
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


def test_training_is_deterministic_and_resume_is_exact(tmp_path, device):
    data, _ = _beats(120, device=device)

    def run(epochs, ckpt=None, resume=False, model=None):
        torch.manual_seed(3)
        model = model or LightVAE(LightVAEConfig(width=64, latent=2)).to(device)
        h = fit(model, data, epochs=epochs, batch_size=32, seed=5, checkpoint_dir=ckpt, resume=resume)
        return model, h

    full, h_full = run(6)
    again, _ = run(6)
    _same_weights(full, again, device)
    run(3, tmp_path)  # interrupted after 3 epochs
    state = load_checkpoint(tmp_path)
    assert state["epoch"] == 3 and state["config"] == {"width": 64, "latent": 2, "kl_weight": 0.1}
    resumed, h_resumed = run(6, tmp_path, resume=True)
    _same_weights(full, resumed, device)
    np.testing.assert_allclose(h_resumed.train, h_full.train, rtol=0 if device.type == "cpu" else 1e-4)


def test_checkpoints_are_written_by_time_and_always_after_the_last_epoch(tmp_path, monkeypatch):
    import devicepipe.learning.train as train

    data, _ = _beats(120)
    written = []
    real = train.write_torch
    monkeypatch.setattr(train, "write_torch", lambda obj, path: (written.append(obj["epoch"]), real(obj, path))[1])

    def run(out, **kw):
        torch.manual_seed(3)
        return fit(LightVAE(LightVAEConfig(64, 2)), data, batch_size=32, seed=5, checkpoint_dir=out, **kw)

    run(tmp_path / "every", epochs=4, checkpoint_every_s=0)
    assert written == [1, 2, 3, 4]
    written.clear()
    run(tmp_path / "end", epochs=4, checkpoint_every_s=float("inf"))
    assert written == [4] and load_checkpoint(tmp_path / "end")["epoch"] == 4
    written.clear()
    # an early stop writes the epoch it stopped at, whose resume ends at once with the same weights
    h = run(tmp_path / "stop", epochs=200, lr=1e-2, patience=2, min_improvement=0.05, checkpoint_every_s=float("inf"))
    assert h.stopped_early and written == [len(h.train)]
    state = load_checkpoint(tmp_path / "stop")
    assert state["epoch"] == len(h.train) and state["early_stopping"]["best_epoch"] == h.best_epoch


def test_ensemble_of_autoencoders_runs_and_differs_in_order():
    x = torch.rand(200, 12)
    a = epoch_noise(180, None, seed=1, epoch=0, device=torch.device("cpu"))
    b = epoch_noise(180, None, seed=2, epoch=0, device=torch.device("cpu"))
    assert a.eps is None and not torch.equal(a.order, b.order)
    assert torch.equal(a.order.sort().values, torch.arange(180))

    def make(s):
        torch.manual_seed(s)
        return MLPAutoencoder(MLPAutoencoderConfig(input=12, hidden=8, latent=3))

    ens = fit_ensemble(make, x, members=2, epochs=2, batch_size=50, seed=0)
    assert len(ens.members) == 2 and len(ens.histories[0].train) == 2


def test_scores_threshold_and_ensemble_spread(device):
    data, beats = _beats(240, width=64, device=device)
    torch.manual_seed(0)
    model = LightVAE(LightVAEConfig(width=64, latent=2)).to(device)
    fit(model, data, epochs=20, batch_size=64, lr=3e-3, seed=0)
    err = reconstruction_error(model, data)
    recon = model.eval()(data)[0]
    torch.testing.assert_close(err, ((recon - data) ** 2).mean(1))
    assert embed(model, data).shape == (data.shape[0], 2)
    assert anomaly_threshold(torch.arange(101.0, device=device), 90) == pytest.approx(90.0)
    s = score(model, data, percentile=95)
    assert s.scores.device == data.device
    assert int(s.flags.sum()) == pytest.approx(0.05 * data.shape[0], abs=2)
    assert torch.equal(s.spread, torch.zeros_like(s.scores))
    s2 = score([model, model], data)
    torch.testing.assert_close(s2.scores, s.scores)
    torch.testing.assert_close(s2.spread, torch.zeros_like(s.scores))
    with pytest.raises(DevicepipeError, match="percentile"):
        anomaly_threshold(err, 100)


def test_fit_rejects_bad_settings():
    model = MLPAutoencoder(MLPAutoencoderConfig(input=4))
    with pytest.raises(DevicepipeError, match="val_fraction"):
        fit(model, torch.rand(10, 4), val_fraction=1.5)
    with pytest.raises(DevicepipeError, match="bf16"):
        fit(model, torch.rand(10, 4), bf16=True)
    with pytest.raises(DevicepipeError, match="no checkpoint"):
        load_checkpoint("/nonexistent-run")


def test_fit_and_score_take_beats_arrays_and_tensors_alike():
    sim = simulate_ecg(120, 250, seed=1)
    beats = ecg_segment(sim.signal, ecg_peaks(sim.signal, 250), 250, width=64)
    results = []
    for data in (beats, beats.matrix, beats.matrix.numpy()):
        torch.manual_seed(0)
        model = LightVAE(LightVAEConfig(width=64, latent=2))
        history = fit(model, data, epochs=2, seed=0)
        results.append((history.train, score(model, data).scores))
    for train, scores in results[1:]:
        assert train == results[0][0]
        torch.testing.assert_close(scores, results[0][1])
    ints = torch.randint(0, 3, (40, 64), generator=torch.Generator().manual_seed(0))  # integer rows become float
    assert fit(LightVAE(LightVAEConfig(width=64)), ints, epochs=1).train[0] > 0


def test_rows_of_the_wrong_width_or_device_get_a_fix():
    model = LightVAE(LightVAEConfig(width=256))
    with pytest.raises(DevicepipeError, match=r"takes rows of shape \(n, 256\), got \(10, 174\); resample"):
        fit(model, torch.zeros(10, 174))
    with pytest.raises(DevicepipeError, match=r"score\(\): the model takes rows"):
        score(model, torch.zeros(10, 128))
    if torch.cuda.is_available():
        with pytest.raises(DevicepipeError, match="move one of them"):
            fit(model, torch.zeros(10, 256, device="cuda"))


def test_library_errors_name_python_arguments_not_cli_options(tmp_path, monkeypatch):
    from devicepipe.core.device import resolve_device
    from devicepipe.io import check_output_dir, read_series
    from devicepipe.learning.learn import LearnSettings
    from devicepipe.simulate import simulation_path

    (tmp_path / "nan.csv").write_text("x\n1\nnan\n2\n")
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mistakes = [
        lambda: resolve_device("cuda"),
        lambda: read_series(tmp_path / "nan.csv", sampling_rate=1),
        lambda: LearnSettings(threads=0),
        lambda: LearnSettings(ensemble=2, resume=True),
        lambda: check_output_dir(tmp_path / "file"),
        lambda: simulation_path("x.txt", "ecg"),
    ]
    for mistake in mistakes:
        with pytest.raises(DevicepipeError) as info:
            mistake()
        assert "--" not in str(info.value), str(info.value)  # the library's own words
        assert "--" in info.value.cli_message, info.value.cli_message  # the CLI's, for the same mistake


def test_tensorboard_logging_or_a_clear_error(tmp_path):
    model = MLPAutoencoder(MLPAutoencoderConfig(input=4, hidden=4, latent=2))
    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(DevicepipeError, match="pip install tensorboard"):
            fit(model, torch.rand(20, 4), epochs=1, tensorboard=tmp_path / "tb")
    else:
        fit(model, torch.rand(20, 4), epochs=2, tensorboard=tmp_path / "tb")
        assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir())


def test_early_stopping_keeps_the_best_epoch_and_resumes_exactly(tmp_path, device):
    data, _ = _beats(120, device=device)

    def run(epochs, ckpt=None, resume=False):
        torch.manual_seed(3)
        model = LightVAE(LightVAEConfig(width=64, latent=2)).to(device)
        h = fit(
            model,
            data,
            epochs=epochs,
            batch_size=32,
            lr=1e-2,
            seed=5,
            checkpoint_dir=ckpt,
            resume=resume,
            patience=3,
            min_improvement=0.05,
        )
        return model, h

    model, h = run(200)
    assert h.stopped_early and len(h.train) < 200
    # it stopped patience epochs after the best one, whose weights it kept
    assert len(h.train) == h.best_epoch + 3
    # the kept epoch is the last one that beat every earlier one by the margin; none after it did
    best = h.val[h.best_epoch - 1]
    assert best == min(h.val[: h.best_epoch]) and all(v >= best * (1 - 0.05) for v in h.val[h.best_epoch :])
    kept_val = evaluate_loss(model, data[split_indices(data.shape[0], 0.1, 5, data.device)[1]])
    assert kept_val == pytest.approx(h.val[h.best_epoch - 1], rel=1e-5)
    # interrupted before it stopped, then resumed: the same epochs, the same weights
    run(h.best_epoch, tmp_path)
    resumed, h2 = run(200, tmp_path, resume=True)
    assert (h2.best_epoch, len(h2.train)) == (h.best_epoch, len(h.train))
    _same_weights(model, resumed, device)


def test_exact_epochs_disable_early_stopping():
    model = MLPAutoencoder(MLPAutoencoderConfig(input=4, hidden=4, latent=2))
    h = fit(model, torch.rand(50, 4), epochs=7, lr=1e-2)
    assert len(h.train) == 7 and h.best_epoch is None and not h.stopped_early
    with pytest.raises(DevicepipeError, match="val_fraction > 0"):
        fit(model, torch.rand(50, 4), epochs=7, val_fraction=0.0, patience=2)


def test_training_figure_marks_the_kept_epochs():
    one = {"train": [3.0, 2.0, 1.0, 1.1], "val": [3.0, 2.0, 1.2, 1.3], "seconds": [0.0] * 4, "best_epoch": 3}
    two = {**one, "val": [3.0, 2.5, 1.5, 1.4], "best_epoch": 4}
    ax = plot_training([one]).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "kept: epoch 3"
    ax = plot_training([one, two]).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "kept: each member's kept epoch"
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert [(int(d.get_xdata()[0]), float(d.get_ydata()[0])) for d in dots] == [(3, 1.2), (4, 1.4)]
    # exact epochs keep the last: its dot is there too (on the training line without validation)
    exact = {"train": [3.0, 2.0, 1.5], "val": [float("nan")] * 3, "seconds": [0.0] * 3, "best_epoch": None}
    ax = plot_training([exact]).axes[0]
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert [(int(d.get_xdata()[0]), float(d.get_ydata()[0])) for d in dots] == [(3, 1.5)]
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "kept: epoch 3"


def test_run_series_takes_a_dataframe_with_a_datetime_index(tmp_path):
    pd = pytest.importorskip("pandas")
    from devicepipe.pipelines import SeriesLearnSettings, run_series

    stamps = pd.date_range("2024-05-01", periods=24 * 12, freq="h")
    load = 50 + 5 * np.sin(2 * np.pi * np.arange(stamps.size) / 24) + np.random.default_rng(0).random(stamps.size)
    frame = pd.DataFrame({"kW": load}, index=stamps)
    result = run_series(frame.sample(frac=1, random_state=0), tmp_path / "r", settings=SeriesLearnSettings(epochs=2))
    assert result.summary["windows"]["used"] == 12 and result.summary["time"]["start"] == "2024-05-01T00:00:00"
    assert result.summary["time"]["was_sorted"] is False  # shuffled rows, put back in order by their times
    assert result.summary["time_column"] == "the DataFrame's DatetimeIndex"
    with pytest.raises(DevicepipeError, match="has no times: give a DataFrame with a DatetimeIndex"):
        run_series(frame.reset_index(drop=True), tmp_path / "none", settings=SeriesLearnSettings(epochs=2))
    assert not (tmp_path / "none" / "summary.json").exists()


def test_a_loss_that_stopped_changing_is_a_dead_model_not_a_converged_one():
    from devicepipe.learning.learn import convergence_warning, learning_failed, stuck_loss

    flat = {"train": [0.03, 0.1535, 0.1535, 0.1535, 0.1535, 0.1535], "val": [0.147] * 6}
    assert stuck_loss(flat["train"]) and not stuck_loss([0.5, 0.4, 0.3, 0.29, 0.2899, 0.28985])
    assert not stuck_loss([0.2, 0.2, 0.2])  # too few epochs to say
    said = learning_failed([flat])
    assert said is not None and "has not changed at all since epoch 2 (it stays at 0.1535)" in said
    assert convergence_warning([flat]) is None  # the slope alone calls it converged
    rng = torch.Generator().manual_seed(0)
    alive = torch.randn(200, 4, generator=rng)
    assert learning_failed([{"train": [1.0, 0.5, 0.4, 0.35, 0.34, 0.33]}], alive) is None
    dead = alive.clone()
    dead[:, 1:] = 0.7  # three of four latent dimensions constant
    said = learning_failed([{"train": [1.0, 0.5, 0.4, 0.35, 0.34, 0.33]}], dead)
    assert said is not None and "3 of its 4 latent dimensions are constant" in said


def test_a_loss_that_grew_or_became_nan_is_a_failed_model():
    from devicepipe.learning.learn import convergence_warning, learning_failed

    # kept model ten times worse than the untrained one (initial), by hand
    grew = {"train": [1.1, 8.0, 700.0], "val": [3.4, 670.0, 99.0], "initial": 1.06, "best_epoch": None}
    said = learning_failed([grew])
    assert said is not None and "validation loss grew from 1.06 untrained to 99 at the epoch kept (3)" in said
    # ... or ten times worse than the lowest of its run (no untrained loss recorded)
    said = learning_failed([{"train": [5.0, 0.5, 0.4, 9.0]}])
    assert said is not None and "training loss grew from 0.4 to 9 at the epoch kept (4)" in said
    # an ordinary noisy descent, and one that ends 9.9 times above its untrained loss, are not failures
    assert learning_failed([{"train": [1.0, 0.6, 0.7, 0.5], "val": [0.9, 0.7, 0.75, 0.6], "initial": 1.2}]) is None
    assert learning_failed([{"train": [2.0, 9.9], "initial": 1.0}]) is None
    # early stopping kept epoch 2, before the blow-up: the model kept is a good one
    assert (
        learning_failed([{"train": [1.0, 0.5, 90.0], "val": [1.0, 0.5, 95.0], "initial": 1.2, "best_epoch": 2}]) is None
    )
    nan = {"train": [1.0, float("nan")], "val": [1.2, float("nan")], "initial": 1.3, "best_epoch": 1, "diverged": True}
    said = learning_failed([grew, nan])
    assert (
        "its loss became NaN at epoch 2 (ensemble member 1), so training stopped (epoch 1's weights are kept)" in said
    )
    first = {"train": [float("inf")], "val": [float("inf")], "initial": 1.3, "best_epoch": 0, "diverged": True}
    assert "became infinite at epoch 1, so training stopped (the untrained weights are kept)" in learning_failed(
        [first]
    )
    assert convergence_warning([nan]) is None and convergence_warning([first]) is None


@pytest.mark.parametrize("members", [1, 2])
def test_training_whose_loss_becomes_nan_stops_and_keeps_the_weights_before(members):
    """The loss of an MLP autoencoder at a huge learning rate becomes NaN at some epoch e: training
    stops there, and the model kept has the weights of a run of exactly e - 1 epochs."""
    x = torch.rand(300, 8, generator=torch.Generator().manual_seed(0)) * 1000

    def make(seed):
        torch.manual_seed(seed)
        return MLPAutoencoder(MLPAutoencoderConfig(input=8, sigmoid_output=False))

    def train(epochs):
        if members == 1:
            model = make(0)
            return [model], [fit(model, x, epochs=epochs, lr=1e3, seed=0)]
        ens = fit_ensemble(make, x, members=members, epochs=epochs, lr=1e3, seed=0)
        return ens.members, ens.histories

    models, histories = train(30)
    h = histories[0]
    assert h.diverged and not np.isfinite(h.train[-1]) and np.isfinite(h.train[:-1]).all()
    e = len(h.train)
    assert h.best_epoch == e - 1 and h.initial is not None and np.isfinite(h.initial)
    assert e == 2  # (at this rate; epoch 1 finite, so the weights kept are a trained model's)
    before, _ = train(1)
    for i, m in enumerate(models):
        assert histories[i].diverged
        for p, q in zip(m.parameters(), before[i].parameters(), strict=True):
            torch.testing.assert_close(p, q)


def test_the_training_figure_shows_the_untrained_loss_and_where_the_loss_became_nan():
    h = {"train": [1.4e9, float("nan")], "val": [3.7e12, float("nan")], "initial": 1.06, "best_epoch": 1}
    fig = plot_training([{**h, "diverged": True}])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "untrained" in labels and "loss NaN or infinite" in labels and "kept: epoch 1" in labels
    assert ax.get_xlim()[0] <= 0 and ax.get_xlim()[1] >= 2  # from the untrained model to the epoch that failed
    plain = [t.get_text() for t in plot_training([h]).axes[0].get_legend().get_texts()]
    assert "loss NaN or infinite" not in plain


def test_learn_settings_go_to_the_estimator_and_come_back_whole():
    # the one mapping between a run's settings and the estimator's parameters, both ways
    import dataclasses

    from devicepipe.anomaly import BeatAnomalyDetector
    from devicepipe.learning.learn import LearnSettings
    from devicepipe.scorers import DEFAULT_SCORER

    cases = [
        LearnSettings(),
        LearnSettings(epochs=7, batch_size=64, lr=1e-3, weight_decay=1e-5, val_fraction=0.2, seed=3, latent=4,
                      ensemble=2, percentile=97.5, min_effect=0.3, threads=1, scorer="knn", neighbours=9),
        LearnSettings(max_epochs=50, patience=5, min_improvement=0.01, percentile=99.9, scorer="reconstruction"),
    ]  # fmt: skip
    for settings in cases:
        det = BeatAnomalyDetector.from_settings(settings, device="cpu", width=128)
        assert det.get_params()["width"] == 128 and det.device == "cpu"
        assert det.scorer == (settings.scorer or DEFAULT_SCORER)  # (none named: the default one)
        # the scorer stays the estimator's parameter; every other setting comes back as it went
        assert det.learn_settings() == dataclasses.replace(settings, scorer=None)
    # a pipeline's default scorer, where the settings name none
    det = BeatAnomalyDetector.from_settings(LearnSettings(), scorer="multiscale")
    assert det.scorer == "multiscale"
