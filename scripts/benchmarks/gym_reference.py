"""Versus the paper-style CPU simulation: a Python loop over workers stepping gymnasium.

The *reference* is how asynchronous-SGD papers simulate a cluster on one CPU: a plain Python
loop over the workers, each owning a ``gymnasium`` environment (native MuJoCo, Hopper-v5 /
Humanoid-v5), rolling out its trajectories one step at a time with the policy evaluated in
numpy, then one gradient + optimizer step per round. Everything that is not the simulation
itself is taken from jaxnigt so that both sides compute the same rounds:

* **policy**: the same 2×64 tanh Gaussian MLP (``make_policy(task)``; parameters from the
  trainer's ``init``, i.e. ``policy.init(key)``), evaluated in numpy float32 per step;
  Humanoid-v5 observes 348 numbers where brax's humanoid observes 244, so there the MLP has
  the same architecture sized for gymnasium (``GaussianPolicy(348, 17, action_scale=0.4)``);
* **schedule**: ``jaxnigt.cluster.schedules.rennala`` on the trainer's time model with the trainer's
  own key sequence (``key, k_sched, k_roll = split(key, 3)`` per round), so round r has
  exactly the slot list of jaxnigt's round r (checked: the simulated end time matches);
* **horizon** H. Two reference modes: ``terminating`` (gymnasium's default: a trajectory
  stops at termination and the steps after it are never computed, so the reference pays
  only for *alive* steps; with the initial policy hopper falls within ~35 steps) and
  ``full_h`` (``terminate_when_unhealthy=False``: every trajectory runs all H steps, the
  cost per round of a policy that survives the horizon, i.e. later in training);
* **gradient**: the collected batch padded to ``[M, H]`` and passed to a jitted
  ``policy_gradient`` + NIGT update (jaxnigt's estimator and optimizer; compiled before
  timing, its compile time reported separately).

jaxnigt's side is ``jit(Trainer.run_chunk(state, R))`` of ``rennala_nigt`` on brax MJX,
timed after compilation (compile reported separately), once with brax's default solver and
once with ``env.solver_iterations: 1, env.ls_iterations: 4``. gymnasium's MuJoCo models keep
MuJoCo's default solver (Hopper-v5: Newton, 100 iterations, 50 line-search iterations). Each
reference mode is paired with the jaxnigt programs that do the matching work:
``terminating`` with the library default, lanes refilled as trajectories terminate
(``env.lanes`` default) and, side by side, without refill (``env.lanes: 1``: a batch runs
until its longest trajectory ends); ``full_h`` with the early exit off (the task with
``terminates=False``: all R·M·H steps computed, the cost once trajectories survive the
horizon). The candidates are timed interleaved; ``speedup = wall(reference) /
wall(jaxnigt)`` for the same R rounds (one row per reference mode, jaxnigt variant and MJX
solver setting). ``alive %`` estimates the share of jaxnigt's computed lane-steps that
belong to living episodes, from the lengths of round 0's trajectories.

Usage::

    python scripts/bench.py gym [--quick]   # quick: hopper, H = 200, M = 20, n = 10, R = 2
    python scripts/bench.py gym --envs hopper,humanoid --horizon 1000 --rounds 3
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from benchmarks.common import (
    compile_timed,
    compiled_chunk,
    format_table,
    interleaved,
    make_config,
)

from jaxnigt.algorithms.updates import nigt_optimizer
from jaxnigt.cluster import aggregators, schedules
from jaxnigt.rl.estimator import policy_gradient
from jaxnigt.rl.policy import GaussianPolicy, num_params
from jaxnigt.rl.rollout import Trajectories
from jaxnigt.run.trainer import make_task

GYM_IDS = {"hopper": "Hopper-v5", "humanoid": "Humanoid-v5"}
TARGET = 2.0
#: Targets of the refilled rollout against the terminating reference, per MJX solver.
REFILL_TARGET = {"default": 1.5, "1/4": 4.0}
#: (label, solver_iterations, ls_iterations) of the jaxnigt runs; None = brax default.
SOLVERS = (("default", None, None), ("1/4", 1, 4))
#: Reference modes: gymnasium's default termination, or every trajectory H steps long.
MODES = ("terminating", "full_h")
#: The jaxnigt programs each reference mode is compared with:
#: (variant, rollout early exit, env.lanes; None = the library default).
VARIANTS = {
    "terminating": (("refill", True, None), ("no refill", True, 1.0)),
    "full_h": (("full H", False, 1.0),),
}


class NumpyPolicy:
    """:class:`~jaxnigt.rl.policy.GaussianPolicy` evaluated in numpy float32 for one state."""

    def __init__(self, policy: GaussianPolicy, params: Any):
        if not policy.state_dependent_std or not policy.squash:
            raise ValueError("NumpyPolicy supports the default (state-dependent, tanh) policy")
        self.policy = policy
        self.load(params)

    def load(self, params: Any) -> None:
        p = jax.tree.map(lambda x: np.asarray(x, np.float32), params)["params"]
        self.hidden = [
            (p[f"hidden_{i}"]["kernel"], p[f"hidden_{i}"]["bias"])
            for i in range(len(self.policy.hidden))
        ]
        self.mean_w, self.mean_b = p["mean"]["kernel"], p["mean"]["bias"]
        self.std_w, self.std_b = p["std"]["kernel"], p["std"]["bias"]
        # softplus⁻¹(init_std − std_floor): σ is init_std where the std head outputs 0
        x = self.policy.init_std - self.policy.std_floor
        self.offset = np.float32(x + math.log(-math.expm1(-x)))

    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(u, action)`` for one observation, as ``GaussianPolicy.sample``."""
        x = obs
        for w, b in self.hidden:
            x = np.tanh(x @ w + b)
        mean = x @ self.mean_w + self.mean_b
        z = x @ self.std_w + self.std_b + self.offset
        std = np.logaddexp(0.0, z) + np.float32(self.policy.std_floor)  # softplus
        u = (mean + std * rng.standard_normal(mean.shape)).astype(np.float32)
        return u, self.policy.action_scale * np.tanh(u)


class Reference:
    """The paper-style simulation of R rounds (see the module docstring); call :meth:`run`."""

    def __init__(self, env: str, tr: Any, state: Any, *, seed: int = 0):
        import gymnasium as gym

        self.gym_id = GYM_IDS[env]
        self.tr = tr
        self.n, self.M, self.H = tr.setup.n, tr.setup.M, tr.setup.horizon
        # Per mode, one env per worker: "terminating" is gymnasium's default; "full_h" sets
        # terminate_when_unhealthy=False, so every trajectory runs all H steps.
        self.envs = {
            mode: [
                gym.make(self.gym_id, terminate_when_unhealthy=(mode == "terminating"))
                for _ in range(self.n)
            ]
            for mode in MODES
        }
        space = self.envs["terminating"][0].observation_space
        act = self.envs["terminating"][0].action_space
        obs_size, action_size = int(space.shape[0]), int(act.shape[0])
        scale = float(np.max(act.high))
        if not np.allclose(act.low, -scale) or not np.allclose(act.high, scale):
            raise ValueError(f"{self.gym_id}: asymmetric action bounds")
        task_policy = tr.setup.policy
        self.policy = GaussianPolicy(
            obs_size, action_size, hidden=task_policy.hidden, action_scale=scale
        )
        if (obs_size, action_size) == (task_policy.obs_size, task_policy.action_size):
            params = state.params  # same MLP, the trainer's initial parameters
        else:  # humanoid: gymnasium observes more; same architecture sized for it
            params = self.policy.init(jax.random.key(seed))
        self.d = num_params(params)
        self.obs_size, self.action_size = obs_size, action_size
        self.params0, self.key0 = params, state.key
        self.hyper = state.hyper
        self.opt_state0 = jax.jit(lambda p, h: nigt_optimizer(h).init(p))(params, self.hyper)
        self.seed = seed
        M, cluster = self.M, tr.setup.cluster
        policy = self.policy

        def schedule(key, t0, busy):
            key, k_sched, _ = jax.random.split(key, 3)  # the trainer's split (round_engine)
            sched = schedules.rennala(cluster, k_sched, t0, busy, M=M)
            return key, sched, aggregators.rennala_weights(sched)

        def update(params, opt_state, traj, weights, hyper):
            grads, stats = policy_gradient(policy, params, traj, weights, hyper["gamma"])
            opt = nigt_optimizer(hyper)
            upd, opt_state = opt.update(jax.tree.map(jnp.negative, grads), opt_state, params)
            return optax.apply_updates(params, upd), opt_state, stats["sum_length"]

        # Compile both helpers before any timing (reported as compile_s).
        t0 = jnp.zeros([], jnp.float32)
        busy = jnp.zeros((self.n,), jnp.float32)
        self.schedule, lo1, co1 = compile_timed(schedule, self.key0, t0, busy)
        _, _, w = self.schedule(self.key0, t0, busy)
        self.update, lo2, co2 = compile_timed(
            update, params, self.opt_state0, self._empty(), w, self.hyper
        )
        self.compile_s = lo1 + co1 + lo2 + co2
        self.np_policy = NumpyPolicy(self.policy, params)

    def _empty(self) -> Trajectories:
        M, H = self.M, self.H
        return Trajectories(
            obs=np.zeros((M, H, self.obs_size), np.float32),
            u=np.zeros((M, H, self.action_size), np.float32),
            rewards=np.zeros((M, H), np.float32),
            mask=np.zeros((M, H), np.float32),
            returns=np.zeros((M,), np.float32),
            lengths=np.zeros((M,), np.int32),
        )

    def run(self, rounds: int, mode: str = "terminating") -> dict:
        """R rounds from the initial state; wall seconds per phase and step counts."""
        rng = np.random.default_rng(self.seed)
        envs = self.envs[mode]
        for i, e in enumerate(envs):
            e.reset(seed=self.seed * 1000 + i)
        params, opt_state, key = self.params0, self.opt_state0, self.key0
        self.np_policy.load(params)
        t_sim = jnp.zeros([], jnp.float32)
        busy = jnp.zeros((self.n,), jnp.float32)
        walls = {"schedule": 0.0, "rollout": 0.0, "update": 0.0}
        alive = 0
        for _ in range(rounds):
            c0 = time.perf_counter()
            key, sched, weights = self.schedule(key, t_sim, busy)
            slot_worker = np.asarray(sched.slot_worker)
            slot_valid = np.asarray(sched.slot_valid)
            t_sim, busy = sched.t_end, sched.busy_until
            c1 = time.perf_counter()
            traj = self._empty()
            for i in range(self.n):  # the plain Python loop over workers
                env = envs[i]
                for s in np.flatnonzero(slot_valid & (slot_worker == i)):
                    obs, _ = env.reset()
                    total, length = 0.0, 0
                    for t in range(self.H):
                        o = obs.astype(np.float32)
                        u, action = self.np_policy.sample(o, rng)
                        obs, reward, terminated, _, _ = env.step(action)
                        traj.obs[s, t], traj.u[s, t] = o, u
                        traj.rewards[s, t], traj.mask[s, t] = reward, 1.0
                        total += float(reward)
                        length += 1
                        if terminated:
                            break
                    traj.returns[s], traj.lengths[s] = total, length
            c2 = time.perf_counter()
            params, opt_state, steps = self.update(params, opt_state, traj, weights, self.hyper)
            self.np_policy.load(params)  # blocks until the update is done
            alive += int(steps)
            c3 = time.perf_counter()
            walls["schedule"] += c1 - c0
            walls["rollout"] += c2 - c1
            walls["update"] += c3 - c2
        return {**walls, "alive_steps": alive, "sim_time": float(t_sim)}


def _lane_steps(lengths: np.ndarray, horizon: int, lanes: int) -> int:
    """Lane-steps a rollout computes for trajectories of these lengths on ``lanes`` lanes:
    without refill (lanes = S) the batch runs in blocks until its longest episode ends; with
    refill, a lane takes the next trajectory every REFILL_EVERY steps once its own ended.
    A block is what ``jaxnigt.rl.rollout`` steps per loop turn for a task that can terminate:
    the largest divisor of H up to 10 (a rule of the library with no public name)."""
    from jaxnigt.rl.rollout import REFILL_EVERY

    S = len(lengths)
    if lanes >= S:
        block = max(d for d in range(1, min(10, horizon) + 1) if horizon % d == 0)
        return S * block * math.ceil(max(int(lengths.max()), 1) / block)
    free = np.zeros(lanes, np.int64)  # when each lane can take the next trajectory
    for length in lengths:
        i = int(np.argmin(free))
        free[i] += REFILL_EVERY * math.ceil(max(int(length), 1) / REFILL_EVERY)
    return lanes * int(free.max())


def _alive_share(tr, state, rounds_keys=None) -> float:
    """Share of round 0's computed lane-steps that are alive (from its trajectory lengths)."""
    from jaxnigt.rl.collect import slot_keys
    from jaxnigt.rl.rollout import num_lanes, rollout

    setup = tr.setup
    _, k_sched, k_roll = jax.random.split(state.key, 3)
    sched = schedules.rennala(setup.cluster, k_sched, 0.0, state.busy_until, M=setup.M)
    keys = slot_keys(k_roll, sched.slot_worker, sched.slot_rank)
    types = jnp.zeros(setup.M, jnp.int32)
    traj = rollout(setup.task, setup.policy, state.params, keys, types)
    lengths = np.asarray(traj.lengths)
    if not setup.task.terminates:
        return float(lengths.sum() / (setup.M * setup.horizon))
    lanes = num_lanes(setup.task, setup.M)
    return float(lengths.sum() / _lane_steps(lengths, setup.horizon, lanes))


def _programs(env, horizon, M, n, rounds, solvers, modes):
    """``{label: ({(mode, variant): (tr, state, run, compile_s)}, si, ls)}``."""
    trainers = {}
    seen: dict[tuple[int, int], str] = {}
    for label, si, ls in solvers:
        cfg = make_config(env, n=n, M=M, horizon=horizon, solver_iterations=si, ls_iterations=ls)
        opt = make_task(cfg).env.sys.opt
        effective = (int(opt.iterations), int(opt.ls_iterations))
        if effective in seen:  # e.g. humanoid: brax's default already is 1/4
            print(f"  gym {env}: solver {label} = {seen[effective]} (same program), skipped")
            continue
        seen[effective] = label
        progs = {}
        for mode in modes:
            for variant, early_exit, lanes in VARIANTS[mode]:
                c = make_config(
                    env, n=n, M=M, horizon=horizon, solver_iterations=si, ls_iterations=ls,
                    lanes=lanes,
                )  # fmt: skip
                progs[mode, variant] = compiled_chunk(
                    c, "rennala_nigt", rounds, early_exit=early_exit
                )
        trainers[label] = (progs, *effective)
    return trainers


def bench_env(
    env: str,
    *,
    horizon: int,
    M: int,
    n: int,
    rounds: int,
    reps: int,
    solvers: tuple = SOLVERS,
    modes: tuple[str, ...] = MODES,
) -> list[dict]:
    """One row per (jaxnigt solver setting, reference mode, variant), timed interleaved."""
    trainers = _programs(env, horizon, M, n, rounds, solvers, modes)
    tr0, state0 = next(iter(trainers[solvers[0][0]][0].values()))[:2]
    ref = Reference(env, tr0, state0)
    last: dict[str, Any] = {}

    def ref_call(mode):
        last[mode] = ref.run(rounds, mode)

    fns = {mode: (lambda mode=mode: ref_call(mode)) for mode in modes}
    for label, (progs, *_rest) in trainers.items():
        for key, (_, state, run, _c) in progs.items():
            fns[label, *key] = lambda run=run, state=state: run(state)
    med = interleaved(fns, reps)
    rows = []
    for label, (progs, si, ls) in trainers.items():
        for (mode, variant), (tr, state, run, compile_s) in progs.items():
            rows.append(
                _row(env, ref, last[mode], med, label, mode, variant, tr, state, run, compile_s)
                | {"solver_iterations": si, "ls_iterations": ls, "solver_effective": f"{si}/{ls}"}
                | {"H": horizon, "M": M, "n": n, "rounds": rounds, "reps": reps}
            )
    return rows


def _row(env, ref, r, med, label, mode, variant, tr, state, run, compile_s) -> dict:
    _, metrics = run(state)
    rounds = int(np.asarray(metrics["round"]).shape[0])
    steps = rounds * tr.setup.M * tr.setup.horizon
    alive = float(metrics["env_steps"][-1] - state.counters.env_steps)
    jax_s = med[label, mode, variant]
    speedup = med[mode] / jax_s
    target = REFILL_TARGET.get(label) if variant == "refill" else TARGET
    return {
        "env": env,
        "gym_id": ref.gym_id,
        "reference": mode,
        "variant": variant,
        "solver": label,
        "d_jaxnigt": tr.dim,
        "d_reference": ref.d,
        "ref_s": med[mode],
        "jaxnigt_s": jax_s,
        "jaxnigt_early_exit": "on" if mode == "terminating" else "off",
        "speedup": speedup,
        "target": target,
        "met": bool(speedup >= target) if target else None,
        "alive_share": _alive_share(tr, state),
        "ref_alive_steps": r["alive_steps"],
        "ref_alive_steps_per_s": r["alive_steps"] / med[mode],
        "ref_rollout_s": r["rollout"],
        "ref_update_s": r["update"],
        "ref_schedule_s": r["schedule"],
        "ref_compile_s": ref.compile_s,
        "jaxnigt_steps": steps,
        "jaxnigt_alive_steps": alive,
        "jaxnigt_steps_per_s": steps / jax_s,
        "jaxnigt_alive_steps_per_s": alive / jax_s,
        "jaxnigt_compile_s": compile_s,
        "same_schedule": bool(
            math.isclose(float(metrics["sim_time"][-1]), r["sim_time"], rel_tol=1e-6)
        ),
    }


def run(
    quick: bool = False,
    envs: tuple[str, ...] | None = None,
    *,
    horizon: int | None = None,
    M: int = 20,
    n: int = 10,
    rounds: int | None = None,
    reps: int | None = None,
) -> list[dict]:
    """Quick: hopper, H = 200, R = 2, 2 reps; full: hopper and humanoid, H = 1000, R = 3."""
    envs = envs or (("hopper",) if quick else ("hopper", "humanoid"))
    horizon = horizon or (200 if quick else 1000)
    rounds = rounds or (2 if quick else 3)
    reps = reps or (2 if quick else 3)
    rows = []
    for env in envs:
        rows += bench_env(env, horizon=horizon, M=M, n=n, rounds=rounds, reps=reps)
    return rows


COLUMNS = (
    ("env", "env", ""),
    ("H", "H", "d"),
    ("M", "M", "d"),
    ("rounds", "R", "d"),
    ("reference", "reference", ""),
    ("variant", "jaxnigt", ""),
    ("solver", "MJX solver", ""),
    ("solver_effective", "iters/ls", ""),
    ("jaxnigt_early_exit", "jaxnigt exit", ""),
    ("ref_s", "reference s", ".2f"),
    ("jaxnigt_s", "jaxnigt s", ".2f"),
    ("speedup", "speedup", ".2f"),
    ("target", "target", ".1f"),
    ("met", "met", ""),
    ("alive_share", "alive %", ".0%"),
    ("ref_alive_steps_per_s", "ref alive/s", ",.0f"),
    ("jaxnigt_steps_per_s", "jaxnigt steps/s", ",.0f"),
    ("jaxnigt_alive_steps_per_s", "jaxnigt alive/s", ",.0f"),
    ("ref_rollout_s", "ref rollout s", ".2f"),
    ("ref_update_s", "ref update s", ".2f"),
    ("jaxnigt_compile_s", "jaxnigt compile s", ".1f"),
    ("same_schedule", "same sched", ""),
)


def format_rows(rows: list[dict]) -> str:
    return format_table(rows, COLUMNS)
