"""The reinforcement learning pieces every algorithm shares, independent of the cluster.

* :mod:`~jaxnigt.rl.policy`: the Gaussian MLP policy (flax).
* :mod:`~jaxnigt.rl.rollout`: batched trajectories of a task (refilled lanes for tasks that
  terminate) and the evaluation of a policy.
* :mod:`~jaxnigt.rl.estimator`: the policy-gradient estimator g_H of a batch of trajectories.
* :mod:`~jaxnigt.rl.critic`: the value function and advantages of the actor-critic family.
* :mod:`~jaxnigt.rl.collect`: a round's gradient, from its schedule's slots (rollouts of the
  slots that count, weighted, at the broadcast point).
* :mod:`~jaxnigt.rl.sharding`: the mesh axis and the constraint that splits a round's slots
  across devices (the runner's meshes, :mod:`jaxnigt.run.devices`, use that axis).
"""
