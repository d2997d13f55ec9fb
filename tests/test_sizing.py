"""The memory estimates made before anything of size n exists (jaxnigt.run.sizing)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxnigt.run import sizing

LIMIT = (10 * 2**30, "a test device")


@pytest.mark.parametrize("limit", [0, 1, 99, 100, 12_345, 10**9])
def test_largest_fitting_is_the_brute_force_answer(limit):
    needed = lambda m: 7 * m + 3 * (m // 5) + 5
    brute = max([m for m in range(0, 2001) if needed(m) <= limit], default=0)
    assert sizing.largest_fitting(needed, limit, 2000) == min(brute, 2000)


def test_a_size_over_the_limit_is_one_line_with_estimate_limit_and_largest_n():
    needed = lambda m: 100 * m
    n = 10**9
    with pytest.raises(sizing.SizeError) as e:
        sizing.check("the test arrays", needed, n, LIMIT)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("cluster.n = 1,000,000,000: the test arrays needs at least 93.1 GiB")
    assert "more than the 10.0 GiB of a test device" in text
    fits = sizing.largest_fitting(needed, LIMIT[0], n)
    assert f"the largest n that fits is about {fits:,}" in text
    assert needed(fits) <= LIMIT[0] < needed(fits + 1)
    assert sizing.problem("the test arrays", needed, fits, LIMIT) is None
    sizing.check("the test arrays", needed, fits, LIMIT)  # fits: no error


def test_nothing_fits_says_so():
    text = sizing.problem("x", lambda m: 2**40 + m, 10, LIMIT)
    assert text.endswith("no n fits")


def test_clock_bytes_grow_with_workers_and_with_rows_of_the_round_rules():
    one = sizing.clock_bytes(10**6, 1, per_round=True)
    assert sizing.clock_bytes(2 * 10**6, 1, per_round=True) == 2 * one
    assert sizing.clock_bytes(10**6, 11, per_round=True) - one == (
        10 * sizing.CLOCK_ROUND_BYTES_PER_WORKER_ROUND * 10**6
    )
    # The per-arrival rules keep one row per arrival, not per worker and row.
    assert (
        sizing.clock_bytes(10**6, 11, per_round=False)
        - sizing.clock_bytes(10**6, 1, per_round=False)
        == 10 * sizing.CLOCK_BYTES_PER_ROW
    )


def test_largest_array_looks_into_nested_programs():
    def f(x):
        def body(c, _):
            big = jnp.zeros((1000, 10), jnp.float32) + c  # 40,000 bytes, inside a scan
            return c + big.sum(), None

        return jax.lax.scan(body, x, None, length=3)[0]

    size, kind = sizing.largest_array(jax.make_jaxpr(f)(jnp.float32(0.0)))
    assert size == 40_000
    assert kind == "float32[1000,10]"
    inner = jax.jit(f)
    assert sizing.largest_array(jax.make_jaxpr(inner)(jnp.float32(0.0)))[0] == 40_000


def test_program_bytes_from_shapes_alone():
    n = 10**8  # 400 MB per array if it were allocated: only its shape is traced

    def init(key):
        return {"w": jnp.zeros((n,), jnp.float32), "key": key}

    def step(state):
        return {"w": jnp.stack([state["w"]] * 3).sum(0), "key": state["key"]}

    out = sizing.program_bytes(init, step, jax.random.key(0))
    state = 4 * n + 8
    assert out["state"] == state
    assert out["step"] == 2 * state + 3 * 4 * n  # in and out, and the stacked [3, n]
    assert out["largest"] == f"float32[3,{n}]"


def test_tree_bytes_counts_shapes_and_arrays():
    tree = {"a": jax.ShapeDtypeStruct((3, 4), np.float32), "b": np.zeros(5, np.int64)}
    assert sizing.tree_bytes(tree) == 48 + 40


def test_device_limit_is_positive():
    limit, where = sizing.device_limit()
    assert limit > 0 and where
    assert sizing.host_available() > 0


def test_a_size_other_than_n_is_named_in_the_message():
    text = sizing.problem(
        "the rollouts", lambda m: 100 * m, 10**9, LIMIT, name="hparams.M", symbol="hparams.M"
    )
    assert text.startswith("hparams.M = 1,000,000,000: the rollouts needs at least 93.1 GiB")
    assert text.endswith(f"the largest hparams.M that fits is about {LIMIT[0] // 100:,}")


# ------------------------------------------------------------------ power traces


@pytest.mark.parametrize(
    "spec, horizon",
    [
        ("constant", None),
        ("periodic:2:0", 9.0),
        ("periodic:0.3:0.5", 10.0),
        ("periodic:7:0", 3.0),
        ("outages:5:1", 50.0),
        ("outages:sqrt:2", 30.0),
    ],
)
def test_trace_stretches_are_those_the_trace_is_built_with(spec, horizon):
    """K from the spec alone (nothing n × K built) is the K ``power_sources.build`` lays out;
    outages are drawn per run."""
    from jaxnigt.cluster import power, power_sources

    size = sizing.trace_size(spec, 3, horizon)
    built = power_sources.build(spec, 3, horizon)
    if built is None:
        assert size is None
        return
    assert size == (spec, power.stretches(built), isinstance(built, power.Outages))
    assert size.bytes(3, 5) == 3 * size.stretches * 32 * (5 if size.per_run else 1)


def test_trace_stretches_of_a_file_count_its_rows(tmp_path):
    """Worker 1 changes at 0 and 2 (2 stretches), worker 2 at 1.5 and 6 (3: speed 1 before
    its first row), worker 3 is not listed (1)."""
    from jaxnigt.cluster import power, power_sources

    path = tmp_path / "t.csv"
    path.write_text("worker,start,speed\n1,0,0.5\n1,2,1\n2,1.5,0\n2,6,1\n")
    assert sizing.trace_size(f"trace:{path}", 3, None) == (f"trace:{path}", 3, False)
    assert power.stretches(power_sources.build(f"trace:{path}", 3, None)) == 3
    built = power_sources.build(f"trace:{path}", 3, None)
    held = sum(x.nbytes for x in jax.tree.leaves(built))  # what the trace's arrays hold
    assert sizing.trace_bytes(3, 3) == held == 3 * 3 * power.BYTES_PER_STRETCH
    assert sizing.trace_bytes(10, 25, 5) == 10 * 25 * 8 * 4 * 5
