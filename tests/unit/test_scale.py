import numpy as np
import pytest
import torch

from devicepipe.core.errors import DevicepipeError
from devicepipe.signal.scale import MinMaxScaler, StandardScaler

sk = pytest.importorskip("sklearn.preprocessing")


def _data(seed=0, n=400, f=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, f)) * [1, 50, 0.01] + [0, 1000, -3]).astype(np.float32)


@pytest.mark.parametrize("feature_range", [(0.0, 1.0), (-1.0, 1.0), (2.0, 5.0)])
def test_minmax_matches_sklearn(device, feature_range):
    x = _data()
    ref = sk.MinMaxScaler(feature_range=feature_range).fit(x)
    ours = MinMaxScaler(feature_range).fit(torch.from_numpy(x).to(device))
    for name in ("data_min_", "data_max_", "data_range_", "scale_", "min_"):
        np.testing.assert_allclose(getattr(ours, name).cpu().numpy(), getattr(ref, name), rtol=1e-6)
    out = ours.transform(torch.from_numpy(x).to(device))
    assert out.dtype == torch.float32 and out.device.type == device.type
    # the float64 reference: float32 rounding of the result only
    exact = sk.MinMaxScaler(feature_range=feature_range).fit(x.astype(np.float64)).transform(x.astype(np.float64))
    np.testing.assert_allclose(out.cpu().numpy(), exact, rtol=2e-7, atol=2e-7 * (feature_range[1] - feature_range[0]))
    back = ours.inverse_transform(out)
    np.testing.assert_allclose(back.cpu().numpy(), x, rtol=1e-5, atol=1e-4)


def test_standard_matches_sklearn(device):
    x = _data(1)
    ref = sk.StandardScaler().fit(x)
    ours = StandardScaler().fit(torch.from_numpy(x).to(device))
    np.testing.assert_allclose(ours.mean_.cpu().numpy(), ref.mean_, rtol=1e-6)
    np.testing.assert_allclose(ours.var_.cpu().numpy(), ref.var_, rtol=1e-5)
    np.testing.assert_allclose(
        ours.transform(torch.from_numpy(x).to(device)).cpu().numpy(), ref.transform(x), rtol=1e-4, atol=1e-5
    )


def test_chunked_partial_fit_equals_sklearn_partial_fit(device):
    x = _data(2, n=1000)
    ref_mm, ref_std = sk.MinMaxScaler(), sk.StandardScaler()
    mm, std = MinMaxScaler(), StandardScaler()
    for chunk in np.array_split(x, 7):
        ref_mm.partial_fit(chunk)
        ref_std.partial_fit(chunk)
        mm.partial_fit(torch.from_numpy(chunk).to(device))
        std.partial_fit(torch.from_numpy(chunk).to(device))
    assert mm.scale_.device.type == device.type
    np.testing.assert_allclose(mm.scale_.cpu().numpy(), ref_mm.scale_, rtol=1e-6)
    np.testing.assert_allclose(std.mean_.cpu().numpy(), ref_std.mean_, rtol=1e-6)
    np.testing.assert_allclose(std.var_.cpu().numpy(), ref_std.var_, rtol=1e-5)
    assert int(mm.n_samples_seen_) == 1000


def test_constant_feature_and_nan_like_sklearn(device):
    x = np.array([[1.0, 5.0], [np.nan, 5.0], [3.0, 5.0]], dtype=np.float32)
    for ours, ref in ((MinMaxScaler(), sk.MinMaxScaler()), (StandardScaler(), sk.StandardScaler())):
        got = ours.fit_transform(torch.from_numpy(x).to(device)).cpu().numpy()
        np.testing.assert_allclose(got, ref.fit_transform(x), rtol=1e-6)
        assert np.isnan(got[1, 0]) and np.isfinite(got[:, 1]).all()
    flat = np.array([4.0, np.nan, -2.0, 7.0, np.nan], dtype=np.float32)  # one feature: the flat path
    got = MinMaxScaler().fit(torch.from_numpy(flat).to(device))
    assert (float(got.data_min_[0]), float(got.data_max_[0])) == (-2.0, 7.0)  # NaNs ignored, by hand


def test_one_dimensional_input_and_state_round_trip(device):
    x = torch.linspace(-2, 6, 9, device=device)
    s = MinMaxScaler((-1, 1)).fit(x)
    torch.testing.assert_close(s.transform(x), torch.linspace(-1, 1, 9, device=device))
    clone = MinMaxScaler((-1, 1)).load_state_dict(s.state_dict())
    torch.testing.assert_close(clone.transform(x), s.transform(x))
    std = StandardScaler().fit(x)
    torch.testing.assert_close(
        StandardScaler().load_state_dict(std.state_dict()).inverse_transform(std.transform(x)), x
    )


def test_scaler_errors():
    with pytest.raises(DevicepipeError, match="not fitted yet"):
        MinMaxScaler().transform(torch.ones(3))
    s = StandardScaler().fit(torch.ones(4, 2))
    with pytest.raises(DevicepipeError, match="x has 3 feature"):
        s.transform(torch.ones(4, 3))
    with pytest.raises(DevicepipeError, match="minimum must be below maximum"):
        MinMaxScaler((1, 0))
    with pytest.raises(DevicepipeError, match="only NaN"):
        MinMaxScaler().fit(torch.full((3,), float("nan")))
