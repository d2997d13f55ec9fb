"""What the actor-critic family (``a2c``, ``a3c``, ``impala``) shares: the critic beside the
policy, the optax update (Adam or RMSProp, traced learning rate) and the estimator.

The cluster's communication times are set before the critic is added: with ``scale_by_dim``
they scale with the policy's parameter count, so the critic's parameters travel uncharged (a
choice that favours these baselines)."""

from __future__ import annotations

import dataclasses

import optax

from jaxnigt.algorithms import core, updates
from jaxnigt.rl.critic import ActorCritic, actor_critic_gradient


def with_critic(setup: core.Setup) -> core.Setup:
    """The setup with its policy wrapped in an :class:`~jaxnigt.rl.critic.ActorCritic`."""
    return dataclasses.replace(setup, policy=ActorCritic(setup.policy, setup.horizon))


#: The ``hparams`` keys the family reads: the optimizer (static) and the loss's traced
#: coefficients (``gae_lambda`` only where advantages are GAE: ``a2c``, ``a3c``).
KEYS = ("ac_optimizer", "value_coef", "entropy_coef")
GAE = ("gae_lambda",)


def update(hparams) -> updates.Update:
    """Adam (default) or RMSProp with the traced learning rate; evaluate the policy part."""
    make_opt = {"adam": optax.adam, "rmsprop": optax.rmsprop}[hparams.ac_optimizer]
    return updates.Update(
        optimizer=lambda hyper: make_opt(hyper["learning_rate"]),
        eval_params=lambda state: state.params["policy"],
    )


def estimator(
    model,
    params,
    traj,
    weights,
    hyper,
    *,
    per_slot_params=False,
    behaviour=None,
    behaviour_log_prob=None,
):
    """The actor-critic loss's gradient (:func:`jaxnigt.rl.critic.actor_critic_gradient`).

    Args:
      model: the :class:`~jaxnigt.rl.critic.ActorCritic`.
      params: its parameters (per slot with ``per_slot_params``).
      traj: the trajectories.
      weights: ``[S]`` each trajectory's weight.
      hyper: the traced hyperparameters (the loss's coefficients, γ, λ).
      per_slot_params: ``params`` has a leading slot axis.
      behaviour: the behaviour parameters of each trajectory (V-trace), or None.
      behaviour_log_prob: ``[S, H]`` each step's behaviour log-probability, or None.

    Returns:
      ``(grads, stats)``.
    """
    return actor_critic_gradient(
        model,
        params,
        traj,
        weights,
        hyper,
        per_slot_params=per_slot_params,
        behaviour=behaviour,
        behaviour_log_prob=behaviour_log_prob,
    )
