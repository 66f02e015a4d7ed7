# SPDX-License-Identifier: MIT
"""Optimizers the KVStore applies where values are aggregated, named and
parameterised as ``mxnet.optimizer`` (SGD only, for now)."""
from . import _lib

__all__ = ["Optimizer", "SGD", "create"]


class Optimizer:
    """Base: the fields of struct psched_optimizer."""
    name = ""

    def __init__(self, learning_rate=0.01, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None):
        self.learning_rate = learning_rate
        self.wd = wd
        self.rescale_grad = rescale_grad
        self.clip_gradient = clip_gradient
        self.momentum = 0.0

    @property
    def lr(self):
        return self.learning_rate

    def __repr__(self):
        return ("%s(learning_rate=%r, momentum=%r, wd=%r, rescale_grad=%r, "
                "clip_gradient=%r)" % (type(self).__name__,
                                       self.learning_rate, self.momentum,
                                       self.wd, self.rescale_grad,
                                       self.clip_gradient))

    @staticmethod
    def to_c(opt):
        """struct psched_optimizer of @opt: a psched optimizer, or any
        object with the same attributes (mxnet.optimizer.SGD has them)."""
        from .kvstore import PSchedError
        if opt is None:  # back to the default: the aggregate replaces
            return _lib.Optimizer(name=b"", rescale_grad=1.0,
                                  clip_gradient=-1.0)
        name = getattr(opt, "name", None) or type(opt).__name__.lower()
        try:
            lr = getattr(opt, "learning_rate", None)
            if lr is None:
                lr = getattr(opt, "lr")
            clip = getattr(opt, "clip_gradient", None)
            o = _lib.Optimizer(
                name=str(name).encode(),
                learning_rate=float(lr),
                momentum=float(getattr(opt, "momentum", 0.0) or 0.0),
                wd=float(getattr(opt, "wd", 0.0) or 0.0),
                rescale_grad=float(getattr(opt, "rescale_grad", 1.0)),
                clip_gradient=-1.0 if clip is None else float(clip))
        except (AttributeError, TypeError, ValueError) as e:
            raise PSchedError("set_optimizer: %r is not an optimizer (%s)"
                              % (opt, e), -22) from None
        return o


class SGD(Optimizer):
    """SGD with momentum and weight decay (MXNet's rule)::

        g = clip(rescale_grad * grad, clip_gradient)
        m = momentum * m - learning_rate * (g + wd * w);  w += m
    """
    name = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, wd=0.0,
                 rescale_grad=1.0, clip_gradient=None, **kwargs):
        super().__init__(learning_rate=learning_rate, wd=wd,
                         rescale_grad=rescale_grad,
                         clip_gradient=clip_gradient)
        self.momentum = momentum


_REGISTRY = {"sgd": SGD}


def create(name, **kwargs):
    """``mxnet.optimizer.create``: an optimizer by name."""
    from .kvstore import PSchedError
    cls = _REGISTRY.get(str(name).lower())
    if cls is None:
        raise PSchedError("optimizer %r is not supported (supported: %s)"
                          % (name, ", ".join(sorted(_REGISTRY))), -22)
    return cls(**kwargs)
