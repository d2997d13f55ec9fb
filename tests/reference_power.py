"""Plain-Python reference of the cluster under computation power (no jax, float64).

Written from docs/cluster_model.md, "Computation power: workers that slow down and
disconnect", and the conventions of its sections on the rules, in-flight work, the server
link and the AllReduce -- not from the jax code.  The model, in the words of the page:

* Worker ``i`` computes at a piecewise-constant power ``v_i(t) >= 0`` (``speed[j]`` from
  ``start[j]`` on; the last speed holds for ever).  Its work clock is ``W_i(t) = int_0^t v_i``;
  a gradient of work ``tau`` begun at ``s`` ends at the first ``T`` with ``W_i(T) = W_i(s) +
  tau``.  A worker at speed 0 is down.
* ``down_exchange: wait``: an exchange of length ``kappa`` needs ``kappa`` of the worker's up
  time (it pauses while it is down; length 0 is instantaneous); an AllReduce over ``P`` needs
  ``kappa_P = max_{i in P} kappa_i`` of time during which every member is up.  ``free``:
  exchanges ignore the power.
* Round rules (Rennala, Malenia, sync, m-sync) keep their logic in work and read completions
  in simulated time: every worker computes its gradients back to back from ``max(t0,
  busy_until_i)``; the AllReduce (over all workers or the contributors, the others receiving
  the point over their own link) ends the round.  A gradient that is not used is *in flight*
  at ``T`` iff the worker has done a positive amount of work on it by ``T``, on the work clock:
  ``W_i(T) > W_i(its start)`` ("In-flight work" and "Computation power": a gradient that has
  done no work is not in flight).  In flight, it is cancelled (the work done on it is wasted)
  or discarded (it runs to its end, all of it wasted, and the worker is busy until then).  One
  on which no work was done -- it would begin at ``T``, or the worker has been down from its
  start until ``T`` -- wastes nothing and keeps nobody busy: the worker takes the new point
  when it has it and starts afresh there.
* The per-arrival engine: a worker computes, then exchanges with the server (one FIFO link in
  compute-completion order, or a link of its own) and is re-dispatched at its arrival.
* Central inference's per-step clock (SEED RL): every step's compute share is work on the work
  clock, every step's exchange waits while the worker is down.

The rules are simulated event by event (each worker's gradients one after the other, the
server's choices one at a time), where the jax code maps prefix sums of work through
``W_i^{-1}`` in array form; the two agree to float32 precision.

**Close calls.**  The model is discontinuous where a discrete choice flips: two completions
that trade places around ``T``, work that runs out just as a worker goes down (a few
float32 ulps more and it ends after the outage), an AllReduce that fits just before a member
disconnects.  Every simulator here records in ``Cluster.margin`` the smallest distance to such
a flip that it met; a comparison with the float32 jax code is meaningful only when that
margin is well above float32 rounding (the tests skip the draws where it is not).
"""

from __future__ import annotations

import math

import numpy as np

INF = math.inf
MALENIA_RTOL = 1e-5  # the harmonic-mean rule's slack for exact ties (as the rules define it)


class Power:
    """One worker's power: ``speed[j]`` on ``[start[j], start[j + 1])``, the last for ever."""

    def __init__(self, start, speed):
        self.start = [float(x) for x in start]
        self.speed = [float(x) for x in speed]
        assert self.start[0] == 0.0 and len(self.start) == len(self.speed)
        assert all(b >= a for a, b in zip(self.start, self.start[1:], strict=False))
        assert all(v >= 0 for v in self.speed)

    def speed_at(self, t: float) -> float:
        """The speed at ``t`` (the last stretch whose start is ``<= t``)."""
        j = max(j for j, s in enumerate(self.start) if s <= t)
        return self.speed[j]

    def pieces(self, t: float) -> list[tuple[float, float, float]]:
        """``[(a, b, v)]``: the constant pieces from ``t`` on (the last one ends at inf)."""
        out = []
        K = len(self.start)
        for j in range(K):
            a = max(t, self.start[j])
            b = self.start[j + 1] if j + 1 < K else INF
            if b > a:
                out.append((a, b, self.speed[j]))
        return out

    def integral(self, t: float, rate) -> float:
        """``int_0^t rate(v(u)) du`` (a stretch of rate 0 adds nothing, also up to ``t = inf``)."""
        return sum(rate(v) * (min(b, t) - a) for a, b, v in self.pieces(0.0) if a < t and rate(v))

    def next_up(self, t: float) -> float:
        """The first time ``>= t`` at which the speed is positive (inf: never again)."""
        return next((a for a, _, v in self.pieces(t) if v > 0), INF)

    def next_change(self, t: float) -> float:
        """The first start strictly after ``t`` (inf: none)."""
        return min((s for s in self.start if s > t), default=INF)


def _work(v: float) -> float:
    return v


def _up(v: float) -> float:
    return 1.0 if v > 0 else 0.0


class Cluster:
    """``n`` workers' powers and exchange times, with the model's ``down_exchange`` choice.

    Attributes:
      margin: the smallest distance to a discontinuity met so far (see the module docstring).
    """

    def __init__(self, start, speed, *, down_exchange: str = "wait"):
        start, speed = np.asarray(start, np.float64), np.asarray(speed, np.float64)
        self.power = [Power(a, v) for a, v in zip(start, speed, strict=True)]
        self.n = len(self.power)
        self.down_exchange = down_exchange
        self.margin = INF

    def near(self, gap: float) -> None:
        """Records a distance to a discontinuity."""
        self.margin = min(self.margin, abs(gap))

    # ------------------------------------------------------------------ clocks

    def work(self, i: int, t: float) -> float:
        """``W_i(t)``."""
        return self.power[i].integral(t, _work)

    def _reach(self, i: int, s: float, amount: float, rate) -> float:
        """The first ``T >= s`` at which the clock of slope ``rate(v)`` has run ``amount``
        further than at ``s`` (``s`` for ``amount = 0``; inf when it never does)."""
        if amount <= 0:
            return s
        pieces = self.power[i].pieces(s)
        left = amount
        for j, (a, b, v) in enumerate(pieces):
            r = rate(v)
            if r <= 0:
                continue
            stalls = j + 1 < len(pieces) and rate(pieces[j + 1][2]) <= 0
            room = r * (b - a)
            if stalls:  # the clock stops at b: a target within rounding of it is a flip
                self.near(room - left)
            if left <= room:
                return a + left / r
            left -= room
        return INF

    def finish(self, i: int, s: float, tau: float) -> float:
        """When worker ``i`` has done work ``tau`` begun at ``s``."""
        return self._reach(i, s, tau, _work)

    def exchange(self, i: int, s: float, kappa: float) -> float:
        """When worker ``i``'s exchange of length ``kappa`` begun at ``s`` ends."""
        if self.down_exchange == "free":
            return s + kappa
        return self._reach(i, s, kappa, _up)

    def all_up(self, members, t: float) -> bool:
        return all(self.power[i].speed_at(t) > 0 for i in members)

    def allreduce(self, members, s: float, kappa: float) -> float:
        """When an AllReduce over ``members`` begun at ``s`` ends: ``kappa`` of time with every
        member up, paused whenever one is down (``free``: ``s + kappa``)."""
        members = list(members)
        if kappa <= 0 or not members:
            return s
        if self.down_exchange == "free":
            return s + kappa
        t, left = s, kappa
        while True:
            nxt = min(self.power[i].next_change(t) for i in members)
            if self.all_up(members, t):
                seg = nxt - t
                if nxt < INF and not self.all_up(members, nxt):
                    self.near(seg - left)  # fits just before a member goes down
                if left <= seg:
                    return t + left
                left -= seg
            elif nxt == INF:
                return INF
            t = nxt


# ---------------------------------------------------------------------- round rules


def _malenia_holds(counts, n: int, M: int) -> bool:
    return min(counts) >= 1 and sum(1.0 / b for b in counts) <= n * n / M * (1 + MALENIA_RTOL)


def simulate_round(
    cl: Cluster,
    rule: str,
    tau,
    kappa,
    t0: float,
    busy_until,
    *,
    M: int = 1,
    capacity: int = 1,
    per_worker: int = 1,
    m: int = 1,
    inflight: str = "cancel",
    allreduce: str = "all",
) -> dict:
    """One round of ``rule`` (rennala | malenia | sync | msync) from ``t0``.

    Args:
      cl: the cluster (its powers and ``down_exchange``).
      rule: the collection rule.
      tau: ``[n][K]`` work of each worker's gradients of the round, in order.
      kappa: ``[n]`` exchange times.
      t0: the round's start.
      busy_until: ``[n]`` when each worker is free to start.
      M, capacity, per_worker, m: the rules' sizes.
      inflight: ``cancel`` or ``discard``.
      allreduce: ``all`` or ``contributors``.

    Returns:
      ``counts``, ``t_collect_end``, ``t_end``, ``comm_time``, ``busy_until``,
      ``time_wasted``, ``traj_wasted`` (work and trajectories of in-flight gradients),
      ``time_used`` (work of the used gradients), ``overflow`` (Malenia) and ``stalled``
      (``[n]`` bool: the worker went on to a next gradient before ``T`` but did no work on it
      by ``T``, down since it began: not in flight).
    """
    n = cl.n
    tau = [[float(x) for x in row] for row in tau]
    kappa = [float(x) for x in kappa]
    begin = [max(float(t0), float(b)) for b in busy_until]
    # Each worker computes its gradients back to back: ``done[i]`` the completions so far,
    # ``nxt[i]`` the end of the gradient it is computing.
    done: list[list[float]] = [[] for _ in range(n)]
    nxt = [cl.finish(i, begin[i], tau[i][0]) for i in range(n)]
    # sync: b per worker, then it stops; msync: one; malenia: at most ``capacity`` count.
    most = {"rennala": M, "malenia": capacity, "sync": per_worker, "msync": 1}[rule]
    # the gradients a worker may begin: Rennala and Malenia one more (the one in flight)
    columns = most + 1 if rule in ("rennala", "malenia") else most

    def pending():
        """``(time, worker, k)`` of each worker's next completion that may still count."""
        return sorted((nxt[i], i, len(done[i])) for i in range(n) if len(done[i]) < most)

    def complete(i):
        done[i].append(nxt[i])
        k = len(done[i])
        nxt[i] = cl.finish(i, nxt[i], tau[i][k]) if k < columns else INF

    overflow = False
    if rule in ("rennala", "msync"):
        take = M if rule == "rennala" else m
        for _ in range(take):
            t, i, _ = pending()[0]
            complete(i)
        T = t
        rest = pending()
        if rest:
            cl.near(rest[0][0] - T)  # the next completion after the M-th (m-th)
    elif rule == "sync":
        while pending():
            complete(pending()[0][1])
        T = max(d[-1] for d in done)
    elif rule == "malenia":
        holds = False
        T = None
        while pending():
            queue = pending()
            t, i, _ = queue[0]
            # b_i counts every completion <= T: evaluate the rule when the instant is over.
            if len(queue) > 1 and queue[1][0] != t:
                j = queue[1][1]
                other = [len(d) + (w == j) for w, d in enumerate(done)]
                if _malenia_holds(other, n, M):  # the rule would hold had j come first
                    cl.near(queue[1][0] - t)
            complete(i)
            T = t
            if pending() and pending()[0][0] == t:
                continue
            if _malenia_holds([len(d) for d in done], n, M):
                holds = True
                break
        rest = pending()
        if holds and rest:
            cl.near(rest[0][0] - T)
        # a worker at its capacity whose next completion is by T needed more room
        overflow = (not holds) or any(len(done[i]) >= capacity and nxt[i] <= T for i in range(n))
        for i in range(n):
            if len(done[i]) >= capacity and nxt[i] != T:
                cl.near(nxt[i] - T)
    else:
        raise ValueError(rule)

    counts = [len(d) for d in done]
    # --- the AllReduce
    members = [i for i in range(n) if allreduce == "all" or counts[i] >= 1]
    kappa_p = max((kappa[i] for i in members), default=0.0)
    end = cl.allreduce(members, T, kappa_p)
    ready = [end if i in members else max(end, cl.exchange(i, T, kappa[i])) for i in range(n)]
    # --- in-flight work
    wasted = traj = used = 0.0
    busy, stalled = [], []
    for i in range(n):
        used += sum(tau[i][: counts[i]])
        last = done[i][-1] if done[i] else begin[i]  # where its next gradient began
        began = begin[i] < T
        if begin[i] != T:
            cl.near(begin[i] - T)
        if last != T:
            cl.near(last - T)
        # the worker goes on with a next gradient (sync: none; msync: one that delivered waits)
        goes_on = rule != "sync" and began and (rule != "msync" or counts[i] == 0)
        # In flight: the work done on that gradient by T, on the work clock, is positive.
        # Down from its start until T, the worker has done none: not in flight.
        w = cl.work(i, T) - cl.work(i, last) if goes_on and last < T else 0.0
        in_flight = w > 0
        stalled.append(goes_on and last < T and not in_flight)
        if goes_on and last < T:
            up = cl.power[i].next_up(last)
            if up != last:  # down at its start: it comes back before T (in flight) or not
                cl.near(up - T)
        tau_next = tau[i][counts[i]] if counts[i] < len(tau[i]) else 0.0
        if inflight == "cancel":
            if in_flight:
                wasted += w
                traj += min(max(w / tau_next, 0.0), 1.0) if tau_next > 0 else 0.0
            busy.append(ready[i])
        else:
            if in_flight:
                wasted += tau_next
                traj += 1.0
                free = nxt[i]  # it runs to its end
            elif began:
                free = last
            else:  # busy with older work through the whole collection
                free = float(busy_until[i])
            busy.append(max(ready[i], free))
    return {
        "counts": np.array(counts),
        "t_collect_end": T,
        "t_end": end,
        "comm_time": end - T,
        "busy_until": np.array(busy),
        "time_wasted": wasted,
        "traj_wasted": traj,
        "time_used": used,
        "overflow": overflow,
        "stalled": np.array(stalled),
    }


def simulate_rounds(cl: Cluster, rule: str, taus, kappa, **kw) -> list[dict]:
    """Consecutive rounds from time 0, every worker free: round ``r`` on ``taus[r]``."""
    t0, busy = 0.0, [0.0] * cl.n
    out = []
    for tau in taus:
        res = simulate_round(cl, rule, tau, kappa, t0, busy, **kw)
        out.append(res)
        t0, busy = res["t_end"], res["busy_until"]
    return out


# ---------------------------------------------------------------------- per-arrival engine


def _first(cl: Cluster, values) -> int:
    """The index of the smallest value (ties: the lower index); the gap to the runner-up is a
    close call."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    if len(order) > 1 and values[order[1]] != values[order[0]]:
        cl.near(values[order[1]] - values[order[0]])
    return order[0]


def simulate_async(
    cl: Cluster, first_tau, xi, h, kappa, t0: float, link: str = "shared"
) -> list[dict]:
    """The asynchronous engine's arrivals: every worker dispatched at ``t0`` with work
    ``first_tau[i]``; the ``j``-th arrival re-dispatches its worker at once with work
    ``h_w * xi[j]``.

    ``shared``: one server link serving the exchanges one at a time, first come first served
    in the order of the compute completions (ties: lower worker id): an exchange starts at
    ``max(link free, compute end)`` and holds the link until it ends (``kappa_w`` of the
    worker's up time).  ``independent``: each worker's exchange starts at its compute end.
    """
    n = cl.n
    kappa = [float(k) for k in kappa]
    version = 0
    computed = [cl.finish(i, float(t0), float(first_tau[i])) for i in range(n)]
    dispatched = [float(t0)] * n
    dispatch_version = [0] * n
    grads = [0] * n
    # independent links: when each worker's exchange would end (computed once per gradient)
    arrives = [cl.exchange(i, computed[i], kappa[i]) for i in range(n)] if link != "shared" else []
    link_free = float(t0)
    out = []
    for j in range(len(xi)):
        if link == "shared":
            w = _first(cl, computed)
            start = max(link_free, computed[w])
            t = cl.exchange(w, start, kappa[w])
            link_free = t
        else:
            w = _first(cl, arrives)
            start, t = computed[w], arrives[w]
        out.append(
            {
                "worker": w,
                "time": t,
                "compute_end": computed[w],
                "dispatch_time": dispatched[w],
                "staleness": version - dispatch_version[w],
                "link_wait": start - computed[w],
                "grad_index": grads[w],
            }
        )
        version += 1
        dispatched[w], dispatch_version[w] = t, version
        grads[w] += 1
        computed[w] = cl.finish(w, t, float(h[w]) * float(xi[j]))
        if link != "shared":
            arrives[w] = cl.exchange(w, computed[w], kappa[w])
    return out


def simulate_ringmaster(
    cl: Cluster, first_tau, xi, h, kappa, t0: float, *, R: int, stops: bool, link: str = "shared"
) -> list[dict]:
    """Ringmaster ASGD's bounded delay over the per-arrival engine, one exchange at a time.

    The exchange's gradient has delay ``version - its dispatch version`` (server updates
    since its point): below ``R`` it is applied (an update), else discarded (1 trajectory
    wasted); either way the worker takes the current point at the exchange's end and begins
    its next gradient (work ``h_w * xi[e]``, ``e`` the exchange's index).  With ``stops``,
    after every update each worker whose gradient's delay has reached ``R`` is cut at once:
    the fraction of the work it had done is wasted (work clock: ``(W(t) - W(dispatch)) /
    tau``, at most 1), it joins the link at that moment (a worker already done computing
    keeps its place) and its exchange only fetches the point.
    """
    n = cl.n
    kappa = [float(k) for k in kappa]
    t0 = float(t0)
    tau_now = [float(x) for x in first_tau]
    computed = [cl.finish(i, t0, tau_now[i]) for i in range(n)]
    dispatched = [t0] * n
    dispatch_version = [0] * n
    cut: list[float | None] = [None] * n  # the fraction done when its gradient was cut
    version = 0
    link_free = t0
    out = []
    for e in range(len(xi)):
        if link == "shared":
            w = _first(cl, computed)
            t = cl.exchange(w, max(link_free, computed[w]), kappa[w])
            link_free = t
        else:
            arrives = [cl.exchange(i, computed[i], kappa[i]) for i in range(n)]
            w = _first(cl, arrives)
            t = arrives[w]
        delay = version - dispatch_version[w]
        if cut[w] is not None:
            accepted, wasted = False, cut[w]
        else:
            accepted = delay < R
            wasted = 0.0 if accepted else 1.0
        out.append(
            {"worker": w, "time": t, "staleness": delay, "accepted": accepted, "wasted": wasted}
        )
        version += int(accepted)
        dispatched[w], dispatch_version[w], cut[w] = t, version, None
        tau_now[w] = float(h[w]) * float(xi[e])
        computed[w] = cl.finish(w, t, tau_now[w])
        if stops and accepted:
            for i in range(n):
                if cut[i] is None and version - dispatch_version[i] >= R:
                    work = cl.work(i, t) - cl.work(i, dispatched[i])
                    cut[i] = min(max(work / tau_now[i], 0.0), 1.0) if tau_now[i] > 0 else 1.0
                    computed[i] = min(computed[i], t)
    return out


# ---------------------------------------------------------------------- per-step clock


def simulate_steps(
    cl: Cluster,
    tau,
    message,
    inference: float,
    horizon: int,
    batch: int,
    updates: int,
    learner_time: float,
    link: str = "shared",
) -> tuple[list[list[dict]], list[float], dict]:
    """Central inference's per-step clock (SEED RL) under power, from time 0.

    ``tau[i][k]``: the work of worker ``i``'s trajectory ``k``, ``tau / horizon`` per step.
    A step's compute share is done on the worker's work clock from the end of its previous
    step (the trajectory's start: the previous trajectory's end); its exchange (``message_i``
    of up time) is served by the learner's link (``shared``: one at a time, first come first
    served in request order, ties lower id; ``independent``: at once), with the learner's
    version whose update completed by the end of the exchange; the step ends ``inference``
    later.  Every ``batch`` completed trajectories the learner updates, from ``max(previous
    update done, last completion)`` for ``learner_time``.

    Returns:
      The batches (each a list of ``{"worker", "traj", "time", "versions"}``), the updates'
      completion times, and totals (``messages``, ``link_busy``, ``time``).
    """
    n = cl.n
    message = [float(x) for x in message]
    share = [float(tau[i][0]) / horizon for i in range(n)]
    request = [cl.finish(i, 0.0, share[i]) for i in range(n)]
    served_at = []  # independent links: when each actor's next exchange would end
    if link != "shared":
        served_at = [cl.exchange(i, request[i], message[i]) for i in range(n)]
    step, traj = [0] * n, [0] * n
    versions = [[0] * horizon for _ in range(n)]
    link_free = 0.0
    done: list[float] = []
    batches: list[list[dict]] = []
    completed: list[dict] = []
    totals = {"messages": 0, "link_busy": 0.0, "time": 0.0}
    while len(batches) < updates:
        if link == "shared":
            w = _first(cl, request)
            served = cl.exchange(w, max(link_free, request[w]), message[w])
            link_free = served
        else:
            w = _first(cl, served_at)
            served = served_at[w]
        for d in done:
            cl.near(served - d)
        versions[w][step[w]] = sum(d <= served for d in done)
        end = served + float(inference)
        totals["messages"] += 1
        totals["link_busy"] += message[w]
        totals["time"] = end
        if step[w] == horizon - 1:
            completed.append(
                {"worker": w, "traj": traj[w], "time": end, "versions": list(versions[w])}
            )
            traj[w] += 1
            step[w] = 0
            share[w] = float(tau[w][traj[w]]) / horizon
            if len(completed) == batch:
                previous = done[-1] if done else -INF
                done.append(max(previous, end) + float(learner_time))
                batches.append(completed)
                completed = []
        else:
            step[w] += 1
        request[w] = cl.finish(w, end, share[w])
        if link != "shared":
            served_at[w] = cl.exchange(w, request[w], message[w])
    return batches, done, totals


# ---------------------------------------------------------------------- random traces


def random_trace(rng: np.random.Generator, n: int, K: int, *, mean_length: float = 1.5):
    """``(start, speed)`` ``[n, K]`` float32: outage-like stretches of exponential lengths,
    speed 0 with probability 0.35 and otherwise uniform in [0.25, 2] (fractional speeds),
    sometimes down from time 0; the last stretch is up (no worker is down for ever)."""
    lengths = rng.exponential(mean_length, (n, K - 1)) + 0.05
    start = np.concatenate([np.zeros((n, 1)), np.cumsum(lengths, axis=1)], axis=1)
    speed = np.where(rng.random((n, K)) < 0.35, 0.0, rng.uniform(0.25, 2.0, (n, K)))
    speed[:, -1] = rng.uniform(0.25, 2.0, n)
    return start.astype(np.float32), speed.astype(np.float32)


def random_kappa(rng: np.random.Generator, n: int) -> np.ndarray:
    """``[n]`` float32 exchange times: all 0 one time in four, else each 0 with probability
    0.3 and otherwise uniform in [0.05, 1]."""
    if rng.random() < 0.25:
        return np.zeros(n, np.float32)
    k = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0.05, 1.0, n))
    return k.astype(np.float32)
