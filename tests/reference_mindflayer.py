"""Plain-Python reference of MindFlayer's rounds (no jax, float64).

Written from docs/cluster_model.md, "MindFlayer: attempts under a time limit" (the rule, its
options and the prescription of the attempts) with the noise kinds of "Workers and their
times" (jaxnigt/cluster/timing.py's table of their forms) -- not from the jax code.  In the
page's words:

* worker ``i`` makes ``B_i`` attempts one after another from ``max(t0, busy_until_i)``;
  attempt ``k`` needs ``tau_{i,k}`` of work; it succeeds when ``tau_{i,k} <= t_i`` and ends
  when done, else it is abandoned once ``t_i`` of work went into it and the next starts at
  once; a worker that has made its attempts waits;
* the collection ends at ``T``, the end of the last attempt of the workers with ``B_i >= 1``;
  nothing is in flight; the successful attempts count, in completion order (ties: lower
  worker, then earlier attempt); an abandoned attempt wastes ``t_i`` of work, ``t_i / tau``
  of a trajectory;
* one AllReduce over all workers or the contributors (a success), the others receiving the
  point over their own link (docs/cluster_model.md, "In-flight work, the server link, the
  AllReduce"); under a power trace every time limit is on the worker's work clock;
* the time limits: ``median``, ``quantile:U`` (``h_i q_U``, ``q_U`` the smallest ``q`` with
  ``P(xi <= q) >= U``), a number ``c`` (``c h_i``) or the ``t_i``; the prescription:
  ``p_i = P(xi <= q_U)`` (``P(xi <= c)``, ``P(xi <= t_i / h_i)``); ``T*`` the least of the
  times ``k t_i`` (workers with ``p_i > 0``) at which ``sum_i p_i floor(T / t_i) >=
  M (1 - 1e-5)``; ``B_i = floor(T* / t_i)``, 0 where ``p_i = 0``.

The work clock, the exchanges and the AllReduce under a power trace are
``reference_power.Cluster``'s (written from the page's "Computation power").  Every discrete
choice that float32 rounding could flip is recorded: in a :class:`Close` (an attempt's work
against its limit, the expected count against ``M``, a multiple against ``T*``, two
successful completions' order) and in ``cl.near`` (the power trace's own), so a test compares
only the draws far from every flip.
"""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
from reference_power import Cluster

RTOL = 1e-5
PHI = statistics.NormalDist()


# --------------------------------------------------------------------- the noise laws


def _pareto_scale(alpha: float) -> float:
    """Pareto I's scale: mean 1 for a tail index above 1, else median 1."""
    return (alpha - 1) / alpha if alpha > 1 else 2.0 ** (-1.0 / alpha)


def _loglogistic_scale(beta: float) -> float:
    """Log-logistic's scale: mean 1 for a tail index above 1, else median 1."""
    b = math.pi / beta
    return math.sin(b) / b if beta > 1 else 1.0


def cdf(kind: str, params, x: float) -> float:
    """``P(xi <= x)`` of a noise kind."""
    p = [float(v) for v in params] + [0.0, 0.0, 0.0]
    if kind == "deterministic":
        return 1.0 if x >= 1 else 0.0
    if kind == "exponential":
        return 1.0 - math.exp(-x) if x > 0 else 0.0
    if kind == "lognormal":  # xi = exp(sigma z - sigma^2 / 2)
        if x <= 0:
            return 0.0
        return PHI.cdf((math.log(x) + p[0] ** 2 / 2) / p[0]) if p[0] > 0 else float(x >= 1)
    if kind == "uniform":
        lo, hi = p[0], p[1]
        return float(x >= lo) if hi <= lo else min(max((x - lo) / (hi - lo), 0.0), 1.0)
    if kind == "straggler":  # xi = FACTOR with probability P, else 1
        return (1 - p[0]) * (x >= 1) + p[0] * (x >= p[1])
    if kind == "pareto":  # P(xi > x) = (s / x)^alpha for x >= s
        s = _pareto_scale(p[0])
        return 0.0 if x < s else 1.0 - (s / x) ** p[0]
    if kind == "loglogistic":  # P(xi <= x) = 1 / (1 + (x / s)^-beta)
        s = _loglogistic_scale(p[0])
        return 0.0 if x <= 0 else 1.0 / (1.0 + (x / s) ** (-p[0]))
    raise ValueError(kind)


def quantile(kind: str, params, U: float) -> float:
    """``q_U``: the smallest ``q`` with ``P(xi <= q) >= U``."""
    p = [float(v) for v in params] + [0.0, 0.0, 0.0]
    if kind == "deterministic":
        return 1.0
    if kind == "exponential":
        return -math.log(1 - U)
    if kind == "lognormal":
        return math.exp(p[0] * PHI.inv_cdf(U) - p[0] ** 2 / 2)
    if kind == "uniform":
        return p[0] + U * (p[1] - p[0])
    if kind == "straggler":
        values = sorted({1.0, p[1]})
        return next(v for v in values if cdf(kind, params, v) >= U)
    if kind == "pareto":
        return _pareto_scale(p[0]) * (1 - U) ** (-1 / p[0])
    if kind == "loglogistic":
        return _loglogistic_scale(p[0]) * (U / (1 - U)) ** (1 / p[0])
    raise ValueError(kind)


def draw(rng: np.random.Generator, kind: str, params, shape) -> np.ndarray:
    """Draws of ``xi`` (numpy's own generator: the reference never replays jax's draws)."""
    p = [float(v) for v in params] + [0.0, 0.0, 0.0]
    if kind == "deterministic":
        return np.ones(shape)
    if kind == "exponential":
        return rng.exponential(1.0, shape)
    if kind == "lognormal":
        return np.exp(p[0] * rng.standard_normal(shape) - p[0] ** 2 / 2)
    if kind == "uniform":
        return rng.uniform(p[0], p[1], shape)
    if kind == "straggler":
        return np.where(rng.random(shape) < p[0], p[1], 1.0)
    if kind == "pareto":
        return _pareto_scale(p[0]) * (1 - rng.random(shape)) ** (-1 / p[0])
    if kind == "loglogistic":
        u = rng.uniform(1e-12, 1 - 1e-12, shape)
        return _loglogistic_scale(p[0]) * (u / (1 - u)) ** (1 / p[0])
    raise ValueError(kind)


# ----------------------------------------------------------------------- the options


def time_limits(spec, h, kind: str, params) -> list[float]:
    """Each worker's ``t_i`` of a time-limit spec."""
    if isinstance(spec, list | tuple):
        return [float(x) for x in spec]
    if spec == "median" or str(spec).startswith("quantile:"):
        U = 0.5 if spec == "median" else float(spec.split(":")[1])
        return [float(hi) * quantile(kind, params, U) for hi in h]
    return [float(spec) * float(hi) for hi in h]


def probabilities(spec, h, t, kind: str, params) -> list[float]:
    """Each worker's ``p_i`` of a time-limit spec."""
    if isinstance(spec, list | tuple):
        return [cdf(kind, params, ti / float(hi)) for ti, hi in zip(t, h, strict=True)]
    if spec == "median" or str(spec).startswith("quantile:"):
        U = 0.5 if spec == "median" else float(spec.split(":")[1])
        return [cdf(kind, params, quantile(kind, params, U))] * len(h)
    return [cdf(kind, params, float(spec))] * len(h)


class Close:
    """The smallest relative distances to a flip met so far, by kind (module docstring):
    ``success`` (an attempt's work against its limit), ``expected`` (the expected count
    against ``M``, over ``M``) and ``multiple`` (a multiple ``k t_i`` against ``T*``); and
    ``order``, the absolute time between two workers' successful completions (their slots'
    order)."""

    def __init__(self):
        self.success = self.expected = self.multiple = self.order = math.inf

    def note(self, kind: str, gap: float) -> None:
        setattr(self, kind, min(getattr(self, kind), abs(gap)))


def multiples(T: float, t: float) -> int:
    """How many of ``t, 2t, 3t, ...`` are at most ``T`` (``floor(T / t)``, exactly)."""
    k = max(math.floor(T / t), 0)
    while (k + 1) * t <= T:
        k += 1
    while k > 0 and k * t > T:
        k -= 1
    return k


def prescribe(close: Close, t, p, M: int) -> list[int]:
    """The prescribed ``B_i`` (module docstring), by walking the multiples ``k t_i`` in order."""
    n = len(t)
    need = M * (1 - RTOL)
    able = [i for i in range(n) if p[i] > 0]
    fits = lambda T: [multiples(T, t[i]) if i in able else 0 for i in range(n)]
    expected = lambda T: sum(p[i] * b for i, b in enumerate(fits(T)))
    most = math.ceil(M / min(p[i] for i in able)) + 2
    times = sorted({k * t[i] for i in able for k in range(1, most + 1)})
    previous = None
    for T in times:
        if expected(T) >= need:
            close.note("expected", (expected(T) - need) / M)
            if previous is not None:
                close.note("expected", (need - expected(previous)) / M)
            for i in able:  # a multiple within rounding of T* would flip B_i
                k = round(T / t[i])
                if k >= 1 and k * t[i] != T:
                    close.note("multiple", (k * t[i] - T) / T)
            return fits(T)
        previous = T
    raise AssertionError("the prescription found no T*")


# ----------------------------------------------------------------------- the rounds


def simulate_round(
    cl: Cluster,
    close: Close,
    tau,
    kappa,
    t0: float,
    busy_until,
    *,
    t,
    B,
    allreduce: str = "all",
    inflight: str = "cancel",
) -> dict:
    """One MindFlayer round from ``t0``: ``tau`` ``[n][K]`` the work of each worker's attempts,
    ``t`` the limits and ``B`` the attempts (``inflight`` makes no difference: nothing is in
    flight; it is taken to say so)."""
    del inflight
    n = cl.n
    begin = [max(float(t0), float(b)) for b in busy_until]
    successes = []  # (end, worker, k)
    counts = [0] * n
    finish = list(begin)
    wasted = traj = used = 0.0
    for i in range(n):
        now = begin[i]
        for k in range(B[i]):
            work = float(tau[i][k])
            if work != t[i]:
                close.note("success", (work - t[i]) / t[i])
            if work <= t[i]:
                now = cl.finish(i, now, work)
                successes.append((now, i, k))
                counts[i] += 1
                used += work
            else:
                now = cl.finish(i, now, t[i])
                wasted += t[i]
                traj += t[i] / work
        finish[i] = now
    T = max((finish[i] for i in range(n) if B[i] >= 1), default=float(t0))
    successes.sort()
    for a, b in itertools.pairwise(successes):
        if a[0] != b[0] and a[1] != b[1]:  # a worker's own attempts keep their order
            close.note("order", b[0] - a[0])
    members = [i for i in range(n) if allreduce == "all" or counts[i] >= 1]
    kappa_p = max((float(kappa[i]) for i in members), default=0.0)
    end = cl.allreduce(members, T, kappa_p)
    ready = [
        end if i in members else max(end, cl.exchange(i, T, float(kappa[i]))) for i in range(n)
    ]
    return {
        "counts": np.array(counts),
        "slots": [(i, k) for _, i, k in successes],
        "t_collect_end": T,
        "t_end": end,
        "comm_time": end - T,
        "busy_until": np.array(ready, np.float64),
        "time_wasted": wasted,
        "traj_wasted": traj,
        "time_used": used,
    }


def simulate_rounds(cl: Cluster, close: Close, taus, kappa, *, t, B, **kw) -> list[dict]:
    """Consecutive rounds from time 0: round ``r`` on ``taus[r]``."""
    t0, busy = 0.0, np.zeros(cl.n)
    out = []
    for tau in taus:
        res = simulate_round(cl, close, tau, kappa, t0, busy, t=t, B=B, **kw)
        out.append(res)
        t0, busy = res["t_end"], res["busy_until"]
    return out
