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


def estimator(model, params, traj, weights, hyper, *, per_slot_params=False, behaviour=None,
              behaviour_log_prob=None):  # fmt: skip
    """The actor-critic loss's gradient (:func:`jaxnigt.rl.critic.actor_critic_gradient`)."""
    return actor_critic_gradient(
        model, params, traj, weights, hyper, per_slot_params=per_slot_params,
        behaviour=behaviour, behaviour_log_prob=behaviour_log_prob,
    )  # fmt: skip
