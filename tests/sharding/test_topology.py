"""Topology files and the topology-aware step prediction (autorec.sharding.topology)."""

import json

import pytest

from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.objectives import device_costs
from autorec.sharding.plans import Assignment
from autorec.sharding.tables import TableSet
from autorec.sharding.topology import Topology, TopologyError, compute_makespan, step_cost

ONE_CORE_EACH = dict(ranks_per_node=4, cores_per_node=4, intra_node_gbps=10.0, inter_node_gbps=10.0,
                     profiled_gbps=10.0)


def test_the_committed_topology_loads():
    topo = Topology.load("cost_models/cpu/topology.json")
    assert (topo.ranks_per_node, topo.cores_per_node) == (4, 2)


def test_round_trip(tmp_path):
    topo = Topology(**ONE_CORE_EACH)
    topo.save(tmp_path / "t.json", comment="four cores")
    assert Topology.load(tmp_path / "t.json") == topo


@pytest.mark.parametrize("doc, message", [
    ({**ONE_CORE_EACH, "cores": 2}, "unknown key(s) cores"),
    ({k: v for k, v in ONE_CORE_EACH.items() if k != "profiled_gbps"}, "missing key(s) profiled_gbps"),
    ({**ONE_CORE_EACH, "inter_node_gbps": 0}, "inter_node_gbps: expected a positive number, got 0"),
    ({**ONE_CORE_EACH, "ranks_per_node": 2.5}, "ranks_per_node: expected a positive integer, got 2.5"),
    ([1, 2], "expected a JSON object"),
])
def test_a_bad_file_names_the_file_and_key(tmp_path, doc, message):
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TopologyError, match=str(path)) as info:
        Topology.load(path)
    assert message in str(info.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(TopologyError, match="no such topology file"):
        Topology.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(TopologyError, match=r"bad.json: not JSON \(line 1"):
        Topology.load(tmp_path / "bad.json")


def test_makespan_is_the_larger_of_the_busiest_rank_and_the_shared_total():
    assert compute_makespan([4.0, 0.0, 0.0, 0.0], cores=2) == 4.0
    assert compute_makespan([1.0, 1.0, 1.0, 1.0], cores=2) == 2.0
    assert compute_makespan([1.0, 1.0, 1.0, 1.0], cores=4) == 1.0


def test_slower_links_between_nodes_lengthen_the_comm():
    topo = Topology(ranks_per_node=2, cores_per_node=2, intra_node_gbps=100.0, inter_node_gbps=10.0,
                    profiled_gbps=100.0)
    assert topo.comm_scale(2) == 1.0              # one node: the profiled link
    assert topo.comm_scale(4) == pytest.approx((1 * 1 + 2 * 10) / 3)


def test_one_core_per_rank_on_the_profiled_link_is_the_cost_models_own_figure():
    model, tables = ShardCostModel(hidden=8), TableSet.generate(8, seed=0)
    plan = Assignment.of([(i % 4,) for i in range(8)], tables, 4)
    shards, devices = plan.shards(tables)
    heads = model.device_head_costs(TableSet(tuple(shards)), devices, 4)
    expected = float((heads[:, 0] + heads[:, 1]).max() + heads[:, 2].max())
    assert step_cost(model, tables, plan, Topology(**ONE_CORE_EACH)) == pytest.approx(expected)
    assert device_costs(model, tables, plan).shape == (4,)
    # two cores shared by four ranks: never faster than one core each
    shared = Topology(**{**ONE_CORE_EACH, "cores_per_node": 2})
    assert step_cost(model, tables, plan, shared) >= expected - 1e-9
