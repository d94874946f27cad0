"""NumPy oracles for the loss and return helpers, written from the papers' equations with plain loops.

Every oracle follows the signature of `reference_agents.oracles.common`:
``fn(inputs, weights, config) -> outputs``; maths runs in float64 and is cast
back to the input's dtype (float32 results come back as float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _time_major(x: np.ndarray, time_major: bool) -> np.ndarray:
    return x if time_major else np.swapaxes(x, 0, 1)


def discounted_returns(rewards: np.ndarray, terminals: np.ndarray, gamma: float) -> np.ndarray:
    """``R_t = r_t + gamma (1 - d_t) R_{t+1}``, ``R_T = 0``, for time-major ``[T, B]`` (Sutton & Barto 2018, eq. 3.9).

    Written as the explicit sum ``R_t = sum_{k>=0} gamma^k r_{t+k}`` up to and
    including the first terminal step at or after ``t``.
    """
    r = np.asarray(rewards, np.float64)
    out = np.zeros_like(r)
    length = r.shape[0]
    for b in range(r.shape[1]):
        for t in range(length):
            total, scale = 0.0, 1.0
            for k in range(t, length):
                total += scale * r[k, b]
                if terminals[k, b]:
                    break
                scale *= gamma
            out[t, b] = total
    return out


def _discounted_sums(inputs: dict[str, Any], config: dict[str, Any], time_major: bool) -> np.ndarray:
    rewards = np.asarray(inputs["rewards"])
    out = discounted_returns(_time_major(rewards, time_major), _time_major(np.asarray(inputs["terminals"]), time_major),
                             float(config.get("gamma", 0.99)))
    return _time_major(out, time_major).astype(rewards.dtype)


def discounted_sums_time_major(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                               config: dict[str, Any]) -> np.ndarray:
    """Oracle of `DiscountedReturns.discounted_sums` on time-major ``[T, B]`` inputs."""
    return _discounted_sums(inputs, config, True)


def discounted_sums_batch_major(inputs: dict[str, Any], weights: dict[str, np.ndarray],
                                config: dict[str, Any]) -> np.ndarray:
    """Oracle of `DiscountedReturns.discounted_sums` on batch-major ``[B, T]`` inputs."""
    return _discounted_sums(inputs, config, False)


def _dqn_items(inputs: dict[str, Any], config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """Per-item losses and TD errors of the DQN loss, item by item.

    Mnih et al. 2015 (Methods, eq. 3 and the clipped error term): ``y = r`` for a
    terminal transition, else ``y = r + gamma^n max_a' Q_target(s', a')``; double
    Q (van Hasselt et al. 2016, eq. 4) evaluates ``argmax_a' Q_online(s', a')``
    with ``Q_target`` instead. The Huber loss (Huber 1964) with threshold ``d``
    is ``0.5 x^2`` for ``|x| <= d``, else ``d (|x| - d/2)``; prioritized replay
    (Schaul et al. 2016, Algorithm 1 line 12) multiplies it by ``w_i``. Fed
    ``discounts`` replace ``gamma^n`` per item.
    """
    q = np.asarray(inputs["q_values"])
    dtype = q.dtype
    gamma = float(config.get("gamma", 0.99))
    n = int(config.get("n_step", 1))
    double_q = bool(config.get("double_q", True))
    delta = config.get("huber_delta", 1.0)
    weighted = bool(config.get("importance_weights", True))
    losses, errors = [], []
    for i in range(q.shape[0]):
        target_row = np.asarray(inputs["next_q_values_target"][i], np.float64)
        if double_q:
            online_row = np.asarray(inputs["next_q_values_online"][i], np.float64)
            next_value = target_row[int(np.argmax(online_row))]
        else:
            next_value = float(np.max(target_row))
        y = float(inputs["rewards"][i])
        if not inputs["terminals"][i]:
            discount = gamma ** n if inputs.get("discounts") is None else float(inputs["discounts"][i])
            y += discount * next_value
        err = y - float(q[i, int(inputs["actions"][i])])
        if delta is None or abs(err) <= delta:
            item = 0.5 * err * err
        else:
            item = delta * (abs(err) - 0.5 * delta)
        if weighted:
            item *= float(inputs["importance_weights"][i])
        losses.append(item)
        errors.append(err)
    return np.array(losses, np.float64), np.array(errors, np.float64), dtype


def dqn_loss(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> tuple:
    """Oracle of `DQNLoss.loss`: ``(mean of the per-item losses, TD errors)``; see `_dqn_items`."""
    losses, errors, dtype = _dqn_items(inputs, config)
    return np.asarray(losses.mean(), dtype), errors.astype(dtype)


def dqn_loss_per_item(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> np.ndarray:
    """Oracle of `DQNLoss.loss_per_item`; see `_dqn_items`."""
    losses, _, dtype = _dqn_items(inputs, config)
    return losses.astype(dtype)


def vtrace_targets(log_rhos: np.ndarray, discounts: np.ndarray, rewards: np.ndarray, values: np.ndarray,
                   bootstrap_value: np.ndarray, config: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets and advantages from the sums of Espeholt et al. 2018, eq. 1 and section 4.2 (float64).

    ``v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t``,
    ``delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))``, ``V(x_T)`` the
    bootstrap value; ``A_s = rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s))`` with
    ``v_T = V(x_T)``; ``gamma_t = gamma * discounts_t``; clips of None mean none.
    """
    def clip(x: float, bar: Any) -> float:
        return x if bar is None else min(float(bar), x)

    gamma = float(config.get("gamma", 0.99))
    rho_bar, c_bar, rho_bar_pg = (config.get(k, 1.0) for k in ("rho_bar", "c_bar", "rho_bar_pg"))
    lr, d, r, v = (np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values))
    boot = np.asarray(bootstrap_value, np.float64)
    length, batch = lr.shape
    vs, adv = np.zeros_like(v), np.zeros_like(v)
    for b in range(batch):
        value_at = list(v[:, b]) + [boot[b]]
        ratio = np.exp(lr[:, b])
        disc = gamma * d[:, b]
        delta = [clip(ratio[t], rho_bar) * (r[t, b] + disc[t] * value_at[t + 1] - value_at[t]) for t in range(length)]
        for s in range(length):
            total, trace = 0.0, 1.0
            for t in range(s, length):
                total += trace * delta[t]
                trace *= disc[t] * clip(ratio[t], c_bar)
            vs[s, b] = value_at[s] + total
        for s in range(length):
            next_v = vs[s + 1, b] if s + 1 < length else boot[b]
            adv[s, b] = clip(ratio[s], rho_bar_pg) * (r[s, b] + disc[s] * next_v - value_at[s])
    return vs, adv


def vtrace(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> tuple:
    """Oracle of `VTrace.vtrace`; see `vtrace_targets`."""
    dtype = np.asarray(inputs["values"]).dtype
    vs, adv = vtrace_targets(inputs["log_rhos"], inputs["discounts"], inputs["rewards"], inputs["values"],
                             inputs["bootstrap_value"], config)
    return vs.astype(dtype), adv.astype(dtype)


def impala_loss(inputs: dict[str, Any], weights: dict[str, np.ndarray], config: dict[str, Any]) -> tuple:
    """Oracle of `IMPALALoss.loss`: ``(total, pg, baseline, entropy)`` (Espeholt et al. 2018, section 4.2).

    ``log pi(a|x) = z_a - log sum_b exp z_b`` per step; ``log_rhos = log pi(a_t) -
    log mu(a_t)``; V-trace by `vtrace_targets`; ``pg = -sum log pi(a_t) A_t``,
    ``baseline = 0.5 sum (v_t - V(x_t))^2``, ``entropy = sum_t sum_a pi log pi``,
    summed (or averaged, ``reduction="mean"``) over time and batch; with ``normalize_advantages``
    ``A_t`` is first scaled to a unit root mean square over the batch, ``A / (sqrt(mean A^2) + 1e-8)``;
    ``total = pg + baseline_cost * baseline + entropy_cost * entropy``.
    """
    logits = np.asarray(inputs["logits"], np.float64)
    behaviour = np.asarray(inputs["behaviour_logits"], np.float64)
    actions = np.asarray(inputs["actions"])
    values = np.asarray(inputs["values"])
    length, batch, _ = logits.shape
    log_pi, log_rhos, neg_entropy = (np.zeros((length, batch)) for _ in range(3))
    for t in range(length):
        for b in range(batch):
            z, zb = logits[t, b], behaviour[t, b]
            log_p = z - (z.max() + np.log(np.sum(np.exp(z - z.max()))))
            log_mu = zb - (zb.max() + np.log(np.sum(np.exp(zb - zb.max()))))
            a = int(actions[t, b])
            log_pi[t, b] = log_p[a]
            log_rhos[t, b] = log_p[a] - log_mu[a]
            neg_entropy[t, b] = float(np.sum(np.exp(log_p) * log_p))
    vtrace_config = {k: config[k] for k in ("rho_bar", "c_bar", "rho_bar_pg", "gamma") if k in config}
    vs, adv = vtrace_targets(log_rhos, inputs["discounts"], inputs["rewards"], values, inputs["bootstrap_value"],
                             vtrace_config)
    reduce = np.sum if config.get("reduction", "sum") == "sum" else np.mean
    if config.get("normalize_advantages", False):
        adv = adv / (np.sqrt(np.mean(adv ** 2)) + 1e-8)
    pg = -reduce(log_pi * adv)
    baseline = 0.5 * reduce((vs - values.astype(np.float64)) ** 2)
    entropy = reduce(neg_entropy)
    total = pg + config.get("baseline_cost", 0.5) * baseline + config.get("entropy_cost", 0.01) * entropy
    return tuple(np.asarray(x, values.dtype) for x in (total, pg, baseline, entropy))
