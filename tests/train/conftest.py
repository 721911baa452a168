import pytest
import torch

from autorec.data import InMemoryDataset, Jagged, Schema, SparseFeature, TabularData


def planted(n: int = 4000, seed: int = 0) -> InMemoryDataset:
    """Clicks follow a hidden score of user and item (plus noise): a model can learn it."""
    g = torch.Generator().manual_seed(seed)
    users, items = torch.randint(0, 50, (n,), generator=g), torch.randint(0, 40, (n,), generator=g)
    user_bias, item_bias = torch.randn(50, generator=g), torch.randn(40, generator=g)
    tags_len = torch.randint(1, 4, (n,), generator=g)
    tags = torch.randint(0, 10, (int(tags_len.sum()),), generator=g)
    dense = torch.randn(n, 2, generator=g)
    logit = 2 * user_bias[users] + 2 * item_bias[items] + dense[:, 0]
    labels = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    schema = Schema(dense=("a", "b"), sparse=(SparseFeature("user", 50), SparseFeature("item", 40),
                                               SparseFeature("tags", 10, multi_hot=True)))
    data = TabularData(schema, dense, (Jagged.single(users), Jagged.single(items),
                                       Jagged.from_lengths(tags, tags_len)), labels)
    return InMemoryDataset.from_table("planted", data, seed=0)


@pytest.fixture(scope="session")
def planted_data() -> InMemoryDataset:
    return planted()
