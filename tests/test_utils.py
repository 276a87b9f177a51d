"""course.utils: seeding and the difference report the notebooks print."""

import torch

from course.utils import device, gap, seed_everything


def test_seed_everything_repeats_the_same_numbers():
    seed_everything(3)
    first = torch.randn(4)
    seed_everything(3)
    assert torch.equal(torch.randn(4), first)


def test_gap_reads_the_same_whatever_the_rounding_noise():
    a = torch.ones(3)
    assert gap(a, a) == "< 1e-6"
    assert gap(a, a + 3e-7) == "< 1e-6"
    assert gap(a, a + torch.tensor([0.0, 2e-3, 0.0])) == "2e-03"


def test_device_is_a_torch_device():
    assert isinstance(device(), torch.device)
