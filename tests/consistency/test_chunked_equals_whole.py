"""Work split into chunks gives the answer of the whole: streaming scaler fits."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devicepipe.scale import MinMaxScaler, StandardScaler


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=6), st.integers(0, 10_000))
def test_any_chunking_gives_the_whole_fit(sizes, seed):
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((sum(sizes), 2)) * 10)
    whole = StandardScaler().fit(x)
    chunked = StandardScaler()
    for part in torch.split(x, sizes):
        chunked.partial_fit(part)
    torch.testing.assert_close(chunked.mean_, whole.mean_)
    torch.testing.assert_close(chunked.var_, whole.var_)
    mm_whole, mm_chunked = MinMaxScaler().fit(x), MinMaxScaler()
    for part in torch.split(x, sizes):
        mm_chunked.partial_fit(part)
    torch.testing.assert_close(mm_chunked.min_, mm_whole.min_)
