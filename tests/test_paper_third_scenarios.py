"""scripts/paper/third_scenarios.py: which grid, model and look each scenario runs with."""

from paper import third, third_scenarios
from paper.third_scenarios import SCENARIOS


def test_the_locomotion_rows_run_at_the_papers_horizon_on_their_reduced_grid(tmp_path):
    from jaxnigt import config as config_lib

    for name in ("hopper_sqrt_dim", "walker2d_sqrt_dim"):
        pipe = third.Pipeline(SCENARIOS[name], tmp_path, tmp_path)
        assert pipe.grid == third_scenarios.LOCOMOTION_GRID  # the stated deviation
        raw = third.timed(third.scenario_raw(pipe.sc), pipe.sc.look, pipe.sc.look / 64)
        cfg = config_lib.from_dict(raw)
        assert (cfg.env.name, cfg.env.horizon, cfg.env.solver_iterations) == (name[:-9], 1000, 1)
        assert cfg.cluster.scale_by_dim and cfg.cluster.n == 10
    assert third.Pipeline(SCENARIOS["reacher_equal"], tmp_path, tmp_path).grid == (
        third_scenarios.PAPER_GRID
    )


def test_reacher_at_n100_and_heterogeneous_reacher_run_reduced_under_the_default_model(tmp_path):
    from jaxnigt import config as config_lib

    for name, n in (("reacher_n100", 100), ("reacher_hetero", 2)):
        pipe = third.Pipeline(SCENARIOS[name], tmp_path, tmp_path)
        grid = third_scenarios.REDUCED[name]
        look = {"reacher_n100": 15000.0, "reacher_hetero": 60000.0}[name]
        assert pipe.grid == grid and grid.eta == (0.1,) and pipe.sc.look == look
        # only the default model is tuned and run, and no matched-batch Sync NIGT
        assert [tag for tag, _ in pipe.tuning_tags()] == ["tune"]
        assert pipe.sc.models == (third.DEFAULT_MODEL,) and not pipe.sc.sensitivity
        # the report run is the fourth edition's first block: seeds 0-4, not point_mass's 15
        assert pipe.sc.seeds == 5
        cfg = config_lib.from_dict(third.timed(third.scenario_raw(pipe.sc), look, look / 64))
        assert (cfg.env.name, cfg.cluster.n, cfg.checkpoint_every) == ("reacher", n, 10)
    # point_mass keeps the third edition's scenario: every model, the matched batch, its grid
    pm = third.Pipeline(SCENARIOS["point_mass_n100"], tmp_path / "pm", tmp_path / "pm")
    assert pm.grid == third_scenarios.PAPER_GRID and pm.sc.sensitivity and len(pm.sc.models) == 4
