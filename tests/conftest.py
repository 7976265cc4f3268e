import pytest
import torch

from toyspt.data.tasks import TaskConfig, make_task

torch.set_num_threads(1)

SMALL_TASK = TaskConfig(T=16, n_train=128, n_val=64, n_test=64, seed=3)


@pytest.fixture(scope="session")
def small_data():
    """A tiny task for fast tests."""
    return make_task(SMALL_TASK)
