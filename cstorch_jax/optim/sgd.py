"""SGD with momentum, dampening, Nesterov, weight decay and maximize.

For a parameter p with gradient g (negated when maximizing):

    d  = g + weight_decay * p
    b' = momentum * b + (1 - dampening) * d          (b starts at zero)
    u  = d + momentum * b'  if nesterov  else  b'     (u = d when momentum == 0)
    p' = p - lr * u

Because b starts at zero, the first step with dampening != 0 moves by (1 - dampening)
of torch.optim.SGD's step (torch starts the buffer at d); with dampening == 0 the two agree.
"""
from __future__ import annotations

from .update_op import define_update


def sgd_rule(p, g, state, hp, *, momentum, dampening, nesterov, maximize):
    d = -g if maximize else g
    d = d + hp["weight_decay"].astype(p.dtype) * p
    if momentum != 0:
        b = momentum * state["momentum_buffer"] + (1 - dampening) * d
        state = {"momentum_buffer": b}
        d = d + momentum * b if nesterov else b
    return p - hp["lr"].astype(p.dtype) * d, state


sgd_update = define_update("sgd_update", sgd_rule)
