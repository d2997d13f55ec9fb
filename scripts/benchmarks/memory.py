"""Memory of one ``rennala_nigt`` round against M: per-trajectory gradients never exist.

The estimator reduces ``Σ_j w_j g_H(τ_j, θ)`` with ONE backward pass of a surrogate, so a
round's memory grows with M only by what each trajectory must hold anyway (its MJX state
while rolling out, its recorded observations/actions/rewards), never by d floats per
trajectory. Each M runs in a fresh process (reacher, H = 50, n = 10) and reports:

* ``peak_rss``: peak RSS (``VmHWM``, i.e. ``ru_maxrss`` without the parent's inherited
  peak) of running the compiled round,
  with the peak reset after compilation (``/proc/self/clear_refs``; XLA compilation's own
  peak, reported separately, is several times larger), and its growth over the RSS just
  before the run;
* ``xla_temp``: XLA's own buffer accounting of the compiled round
  (``compiled.memory_analysis()``: temporaries + outputs), exact and noise-free;
* for contrast, XLA's accounting of the policy-gradient step alone on a recorded batch in
  both forms: the one-backward-pass estimator and ``vmap(grad)`` per trajectory (which
  materializes ``[M, d]`` gradients).

The slopes over M (least squares) are reported in KB per trajectory next to ``d · 4`` bytes,
the size one materialized float32 gradient would take.

Usage::

    python scripts/bench.py memory [--quick]
"""

from __future__ import annotations

import numpy as np
from benchmarks.common import format_table, run_child

MS = (100, 300, 1000)


def _rss_now_mb() -> float:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _maxrss_mb() -> float:
    # VmHWM, the peak RSS of this process's own memory map. ru_maxrss would be the same
    # here except that it also keeps the peak inherited across fork+exec from the parent
    # (a large benchmark process), which would hide the child's figure.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KB


def _reset_peak() -> bool:
    # Linux >= 4.0: writing 5 to clear_refs resets the peak RSS that ru_maxrss reports, so
    # the round's own peak is not hidden under the (larger) peak of XLA compilation.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _xla_bytes(compiled) -> float:
    ma = compiled.memory_analysis()
    if ma is None:
        return float("nan")
    return float(ma.temp_size_in_bytes + ma.output_size_in_bytes)


def measure(M: int, env: str = "reacher", horizon: int = 50, n: int = 10) -> dict:
    """Runs in a child process (see :func:`run`)."""
    import jax
    import jax.numpy as jnp
    from benchmarks.common import make_config

    from jaxnigt.rl.estimator import policy_gradient, surrogate
    from jaxnigt.rl.rollout import Trajectories
    from jaxnigt.run.trainer import make_trainer

    tr = make_trainer(make_config(env, n=n, M=M, horizon=horizon), "rennala_nigt")
    state = jax.block_until_ready(jax.jit(tr.init)(jax.random.key(0), tr.hyper()))
    rss_before = _rss_now_mb()
    peak_before = _maxrss_mb()
    compiled = jax.jit(lambda s: tr.run_chunk(s, 1)).lower(state).compile()
    peak_compiled = _maxrss_mb()
    reset = _reset_peak()
    rss_before_run = _rss_now_mb()
    jax.block_until_ready(compiled(state))
    peak_run = _maxrss_mb()
    round_bytes = _xla_bytes(compiled)

    # The estimator alone on a recorded batch: one backward pass vs per-trajectory grads.
    task, policy, params = tr.setup.task, tr.setup.policy, state.params
    H = tr.setup.horizon
    traj = Trajectories(
        obs=jnp.zeros((M, H, task.obs_size)),
        u=jnp.zeros((M, H, task.action_size)),
        rewards=jnp.zeros((M, H)),
        mask=jnp.ones((M, H)),
        returns=jnp.zeros((M,)),
        lengths=jnp.full((M,), H, jnp.int32),
    )
    w = jnp.full((M,), 1.0 / M)
    one_pass = jax.jit(lambda p, t: policy_gradient(policy, p, t, w, 0.99)[0])

    def per_traj(p, t):
        def g(tj, wj):
            t1 = jax.tree.map(lambda x: x[None], tj)
            return jax.grad(lambda q: surrogate(policy, q, t1, wj[None], 0.99))(p)

        return jax.vmap(g)(t, w)

    est_one = _xla_bytes(one_pass.lower(params, traj).compile())
    est_per = _xla_bytes(jax.jit(per_traj).lower(params, traj).compile())
    state_bytes = sum(
        x.size * x.dtype.itemsize
        for x in jax.tree.leaves(jax.eval_shape(task.env.reset, jax.random.key(0)))
    )
    return {
        "env": env,
        "H": H,
        "n": n,
        "M": M,
        "d": tr.dim,
        "rss_before_compile_mb": rss_before,
        "peak_before_compile_mb": peak_before,
        "peak_after_compile_mb": peak_compiled,
        "peak_reset": reset,
        "rss_before_run_mb": rss_before_run,
        "peak_rss_mb": peak_run,
        "run_growth_mb": peak_run - rss_before_run,
        "xla_round_mb": round_bytes / 2**20,
        "xla_estimator_mb": est_one / 2**20,
        "xla_per_traj_grads_mb": est_per / 2**20,
        "env_state_kb": state_bytes / 1024,
        "record_kb": H * (task.obs_size + task.action_size + 2) * 4 / 1024,
    }


def run(quick: bool = False, Ms: tuple[int, ...] | None = None) -> list[dict]:
    """One child process per M (quick: M = 100 and 1000 only, enough for the slope)."""
    Ms = Ms or ((100, 1000) if quick else MS)
    rows = [run_child("memory", "measure", {"M": M}) for M in Ms]
    Mv = np.asarray([r["M"] for r in rows], float)
    slope = lambda key: float(np.polyfit(Mv, [r[key] for r in rows], 1)[0]) * 1024  # KB/traj
    summary = {
        "kb_per_traj_peak_rss": slope("peak_rss_mb"),
        "kb_per_traj_run_growth": slope("run_growth_mb"),
        "kb_per_traj_xla_round": slope("xla_round_mb"),
        "kb_per_traj_xla_estimator": slope("xla_estimator_mb"),
        "kb_per_traj_xla_per_traj_grads": slope("xla_per_traj_grads_mb"),
        "kb_per_traj_d4": rows[0]["d"] * 4 / 1024,
    }
    for r in rows:
        r.update(summary)
    return rows


COLUMNS = (
    ("M", "M", "d"),
    ("d", "d", ",d"),
    ("rss_before_compile_mb", "RSS pre-compile MB", ".0f"),
    ("peak_after_compile_mb", "peak compile MB", ".0f"),
    ("rss_before_run_mb", "RSS pre-run MB", ".0f"),
    ("peak_rss_mb", "peak run MB", ".0f"),
    ("run_growth_mb", "run growth MB", ".1f"),
    ("xla_round_mb", "XLA round MB", ".2f"),
    ("xla_estimator_mb", "XLA 1-pass est MB", ".2f"),
    ("xla_per_traj_grads_mb", "XLA per-traj grads MB", ".2f"),
)

SLOPES = (
    ("kb_per_traj_peak_rss", "peak RSS of the run"),
    ("kb_per_traj_run_growth", "RSS growth during the run"),
    ("kb_per_traj_xla_round", "XLA round (temp + out)"),
    ("kb_per_traj_xla_estimator", "XLA one-pass estimator"),
    ("kb_per_traj_xla_per_traj_grads", "XLA vmap(grad) per trajectory"),
    ("kb_per_traj_d4", "d · 4 bytes (one float32 gradient)"),
)


def format_rows(rows: list[dict]) -> str:
    lines = [format_table(rows, COLUMNS), "", "slope over M (KB per trajectory):"]
    if rows:
        r = rows[0]
        for key, label in SLOPES:
            lines.append(f"  {label:<38} {r[key]:10.2f}")
        lines.append(
            f"  (per trajectory: MJX state {r['env_state_kb']:.1f} KB, "
            f"record obs/u/r/mask {r['record_kb']:.1f} KB)"
        )
    return "\n".join(lines)
