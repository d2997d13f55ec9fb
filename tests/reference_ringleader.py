"""Plain-Python reference of Ringleader's rounds (no jax, float64).

Written from docs/cluster_model.md, "Ringleader: a round per cycle", with the conventions of
its sections "In-flight work, the server link, the AllReduce" and "Computation power" -- not
from the jax code.  In the page's words:

* each worker computes gradients back to back from ``max(t0, busy_until_i)`` and goes on
  after delivering;
* ``end: every``: the collection ends at ``T1``, the last of the workers' first completions;
  ``end: cycle``: the last finisher is the worker whose first completion is ``T1`` (the
  highest index among ties); every other worker completes one more gradient after ``T1`` and
  ``T`` is the last of those;
* every completion at or before ``T`` counts (``b_i``), at most ``capacity``; a round in which
  a worker's (capacity + 1)-th completion is at or before ``T`` sets ``overflow``; slots in
  completion order, ties to the lower worker, then the earlier gradient;
* ``table: mean``: worker ``i``'s entry is the mean of its ``b_i`` gradients; ``latest``: its
  latest alone, the ``b_i - 1`` earlier ones wasted work, and ``b_i`` reads 1;
* one AllReduce (over all workers, or the contributors with the others receiving the point
  over their own link); a gradient is in flight at ``T`` iff its worker has done some work on
  it by ``T`` (its work clock); in flight, it is cancelled (the work done on it wasted, that
  fraction of a trajectory) or discarded (it runs to its end, all of it wasted, one
  trajectory, and the worker is busy until then); the next round starts at the AllReduce's
  end and each worker is free at the later of the point's arrival and its discarded
  gradient's end.

The work clock, the exchanges and the AllReduce under a power trace are
``reference_power.Cluster``'s (written from the page's "Computation power"); it records the
trace's close calls in ``cl.margin`` (absolute).  The rule's own discrete choices -- a
completion against ``T`` or ``T1``, a first completion against ``T1`` (who the last finisher
is), the (capacity + 1)-th against ``T``, the start of a worker's next gradient against ``T``
-- are recorded relative to the round's time scale in :class:`Close`, so a test compares only
the draws far from every flip.
"""

from __future__ import annotations

import math

import numpy as np
from reference_power import Cluster

INF = math.inf


class Close:
    """The least relative distance to a flip of the rule's own choices (module docstring)."""

    def __init__(self):
        self.margin = INF

    def near(self, a: float, b: float) -> None:
        """Records ``a`` against ``b`` (an exact tie is a choice the docs make, not a flip)."""
        if a != b and math.isfinite(a) and math.isfinite(b):
            self.margin = min(self.margin, abs(a - b) / max(1.0, abs(a), abs(b)))


def _up_from(cl: Cluster, i: int, t: float) -> float:
    """The first time ``>= t`` at which worker ``i`` computes (speed > 0; inf: never)."""
    return next((a for a, _, v in cl.power[i].pieces(t) if v > 0), INF)


def simulate_round(
    cl: Cluster,
    close: Close,
    tau,
    kappa,
    t0: float,
    busy_until,
    *,
    capacity: int,
    end: str = "every",
    table: str = "mean",
    inflight: str = "cancel",
    allreduce: str = "all",
) -> dict:
    """One round from ``t0``.

    Args:
      cl: the cluster (its powers and ``down_exchange``).
      close: where the rule's close calls are recorded.
      tau: ``[n][capacity + 1]`` work of each worker's gradients of the round, in order.
      kappa: ``[n]`` exchange times.
      t0: the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      capacity: the most gradients of a worker that count.
      end: ``every`` or ``cycle``.
      table: ``mean`` or ``latest``.
      inflight: ``cancel`` or ``discard``.
      allreduce: ``all`` or ``contributors``.

    Returns:
      ``counts`` (as the update reads them), ``gradients`` (every completion at or before
      ``T``, capped), ``slots`` (``[(worker, k)]`` of the table's gradients in completion
      order), ``t_collect_end``, ``t_end``, ``comm_time``, ``busy_until``, ``time_used``,
      ``time_wasted``, ``traj_wasted`` and ``overflow`` (when it is set the other fields
      past ``T`` are not the docs': the run stops).
    """
    n = cl.n
    tau = [[float(x) for x in row] for row in tau]
    kappa = [float(x) for x in kappa]
    begin = [max(float(t0), float(b)) for b in busy_until]
    # every worker's completions of its capacity + 1 drawn gradients, back to back
    done = []
    for i in range(n):
        t, row = begin[i], []
        for w in tau[i][: capacity + 1]:
            t = cl.finish(i, t, w)
            row.append(t)
        done.append(row)
    firsts = [row[0] for row in done]
    T1 = max(firsts)
    finisher = max(i for i in range(n) if firsts[i] == T1)
    for i in range(n):
        close.near(firsts[i], T1)  # another worker would finish Phase 1 last
    overflow = False
    if end == "every":
        T = T1
    elif end == "cycle":
        nexts = []
        for i in range(n):
            if i == finisher:
                continue
            later = [c for c in done[i] if c > T1]
            for c in done[i]:
                close.near(c, T1)
            if not later:  # more than its capacity + 1 gradients by T1
                overflow = True
                later = [done[i][-1]]
            nexts.append(later[0])
        T = max([T1, *nexts])
    else:
        raise ValueError(end)
    events = sorted((c, i, k) for i in range(n) for k, c in enumerate(done[i][:capacity]))
    for c, _, _ in events:
        close.near(c, T)
    counted = [(i, k) for c, i, k in events if c <= T]
    gradients = [sum(1 for w, _ in counted if w == i) for i in range(n)]
    for i in range(n):
        close.near(done[i][capacity], T)
        if done[i][capacity] <= T:
            overflow = True
    if table == "mean":
        counts, slots = list(gradients), counted
    elif table == "latest":
        counts = [min(b, 1) for b in gradients]
        slots = [(i, k) for i, k in counted if k == gradients[i] - 1]
    else:
        raise ValueError(table)
    used = sum(tau[i][gradients[i] - 1] for i in range(n) if gradients[i] and table == "latest")
    if table == "mean":
        used = sum(sum(tau[i][: gradients[i]]) for i in range(n))
    idle = sum(sum(tau[i][: gradients[i]]) for i in range(n)) - used  # latest: earlier ones
    # --- the AllReduce
    members = [i for i in range(n) if allreduce == "all" or counts[i] >= 1]
    kappa_p = max((kappa[i] for i in members), default=0.0)
    t_end = cl.allreduce(members, T, kappa_p)
    ready = [t_end if i in members else max(t_end, cl.exchange(i, T, kappa[i])) for i in range(n)]
    # --- in-flight work: the worker's next gradient after its counted ones
    wasted, traj = idle, float(sum(gradients) - sum(counts))
    busy = []
    for i in range(n):
        b = gradients[i]
        last = done[i][b - 1] if b else begin[i]  # where its next gradient began
        close.near(last, T)
        close.near(begin[i], T)
        began = begin[i] < T
        w = cl.work(i, T) - cl.work(i, last) if began and last < T else 0.0
        if began and last < T:
            up = _up_from(cl, i, last)
            if up != last:  # down at its start: back before T (in flight) or not
                cl.near(up - T)
        in_flight = w > 0
        tau_next = tau[i][b]
        if inflight == "cancel":
            if in_flight:
                wasted += w
                traj += min(max(w / tau_next, 0.0), 1.0) if tau_next > 0 else 0.0
            busy.append(ready[i])
        elif inflight == "discard":
            if in_flight:
                wasted += tau_next
                traj += 1.0
                free = done[i][b]  # it runs to its end
            elif began:
                free = last
            else:  # busy with older work through the whole collection
                free = float(busy_until[i])
            busy.append(max(ready[i], free))
        else:
            raise ValueError(inflight)
    return {
        "counts": np.array(counts),
        "gradients": np.array(gradients),
        "slots": slots,
        "t_collect_end": T,
        "t_end": t_end,
        "comm_time": t_end - T,
        "busy_until": np.array(busy),
        "time_used": used,
        "time_wasted": wasted,
        "traj_wasted": traj,
        "overflow": overflow,
    }


def simulate_rounds(cl: Cluster, close: Close, taus, kappa, **kw) -> list[dict]:
    """Consecutive rounds from time 0, every worker free: round ``r`` on ``taus[r]``; the
    rounds after one that overflows are not simulated (the run stops there)."""
    t0, busy = 0.0, [0.0] * cl.n
    out = []
    for tau in taus:
        res = simulate_round(cl, close, tau, kappa, t0, busy, **kw)
        out.append(res)
        if res["overflow"]:
            break
        t0, busy = res["t_end"], res["busy_until"]
    return out


# --------------------------------------------------------------------- heavy-tailed draws


def draw_noise(rng: np.random.Generator, noise: str, shape) -> np.ndarray:
    """``xi`` of ``shape`` (float64) for a noise spec, by the forms of docs/cluster_model.md
    ("Workers and their times"): ``exponential``, ``lognormal:SIGMA`` (mean 1),
    ``uniform:LOW:HIGH``, ``pareto:ALPHA`` and ``loglogistic:BETA`` (by inverse CDF from one
    uniform each; mean 1 above index 1, else median 1; capped at 1e30)."""
    kind, *args = noise.split(":")
    p = [float(a) for a in args]
    if kind == "exponential":
        return rng.exponential(1.0, shape)
    if kind == "lognormal":
        return np.exp(p[0] * rng.standard_normal(shape) - p[0] ** 2 / 2)
    if kind == "uniform":
        return rng.uniform(p[0], p[1], shape)
    u = rng.random(shape)
    if kind == "pareto":
        a = p[0]
        s = (a - 1) / a if a > 1 else 2.0 ** (-1.0 / a)
        return np.minimum(s * (1 - u) ** (-1.0 / a), 1e30)
    if kind == "loglogistic":
        beta = p[0]
        b = math.pi / beta
        s = math.sin(b) / b if beta > 1 else 1.0
        with np.errstate(divide="ignore"):
            return np.minimum(s * (u / (1 - u)) ** (1.0 / beta), 1e30)
    raise ValueError(noise)


# ----------------------------------------------------------- the paper's cycles, per exchange


def simulate_cycles(
    cl: Cluster, first_tau, xi, h, kappa, t0: float, *, point: str = "held", link: str = "shared"
) -> list[dict]:
    """Ringleader ASGD's exchanges, written from docs/cluster_model.md, "Ringleader ASGD: the
    paper's cycles" (not from the jax code).

    The workers and the link are the event engine's (``reference_power.simulate_async``'s
    reading of the page): every worker starts at ``t0`` with work ``first_tau[i]``; the
    exchange of the worker whose work is done first (shared link: one exchange at a time,
    in the order of compute completion, ties to the lower worker; independent: each at its
    own completion) takes ``kappa_w`` of its up time, and at its end the worker starts its
    next gradient, work ``h_w * xi[e]`` (``e`` the exchange's index), update or not.

    The server, in the page's words: in Phase 1 every gradient joins its worker's entry of
    the cycle's table and nothing is updated, until the gradient that gives every worker an
    entry: that exchange is the cycle's first update, and every other worker is pending.  In
    Phase 2, a pending worker's gradient joins the cycle's table and is one more update, and
    the worker is no longer pending; any other worker's gradient joins the next cycle's
    table.  The update that leaves nobody pending ends the cycle: the next cycle's table
    becomes the cycle's (its entries count for Phase 1), the next one starts empty.  An
    exchange's worker takes the server's point when the exchange is an update (``held``) or
    always (``current``); a gradient's staleness is the updates made since its worker took
    its point.
    """
    n = cl.n
    kappa = [float(k) for k in kappa]
    t0 = float(t0)
    computed = [cl.finish(i, t0, float(first_tau[i])) for i in range(n)]
    arrives = [cl.exchange(i, computed[i], kappa[i]) for i in range(n)] if link != "shared" else []
    link_free = t0
    version, taken = 0, [0] * n  # updates made; the version each worker's point is
    table, later, pending = set(), set(), None  # pending None: Phase 1
    cycle, out = 0, []
    for e in range(len(xi)):
        ends = computed if link == "shared" else arrives
        w = min(range(n), key=lambda i: (ends[i], i))
        second = sorted(ends)[1] if n > 1 else INF
        if second != ends[w]:
            cl.near(second - ends[w])
        if link == "shared":
            t = cl.exchange(w, max(link_free, computed[w]), kappa[w])
            link_free = t
        else:
            t = arrives[w]
        into_next = pending is not None and w not in pending
        if pending is None:
            table.add(w)
            accepted = len(table) == n
            if accepted:
                pending = set(range(n)) - {w}
        elif w in pending:
            accepted = True
            pending.discard(w)
        else:
            accepted = False
            later.add(w)
        rotate = accepted and not pending
        out.append(
            {
                "worker": w,
                "time": t,
                "staleness": version - taken[w],
                "accepted": accepted,
                "into_next": into_next,
                "rotate": rotate,
                "cycle": cycle,
            }
        )
        version += int(accepted)
        if accepted or point == "current":
            taken[w] = version
        if rotate:
            table, later, pending, cycle = later, set(), None, cycle + 1
        computed[w] = cl.finish(w, t, float(h[w]) * float(xi[e]))
        if link != "shared":
            arrives[w] = cl.exchange(w, computed[w], kappa[w])
    return out


def table_directions(n: int, workers, accepted, into_next, rotate, grads) -> list:
    """The direction of each update: ``(1/n) sum_i G_i / b_i`` over the cycle's table after
    the update's gradient joined it (``G_i``, ``b_i``: the sum and count of worker ``i``'s
    gradients in that table), None for an exchange that is not an update."""
    cur, nxt, out = {}, {}, []
    for w, a, x, r, g in zip(workers, accepted, into_next, rotate, grads, strict=True):
        book = nxt if x else cur
        s, c = book.get(int(w), (0.0, 0))
        book[int(w)] = (s + np.asarray(g, np.float64), c + 1)
        if a:
            assert len(cur) == n, "an update with a worker missing from the table"
        out.append(sum(s / c for s, c in cur.values()) / n if a else None)
        if r:
            cur, nxt = nxt, {}
    return out
