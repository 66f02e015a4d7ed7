# SPDX-License-Identifier: MIT
"""Optimizers the KVStore applies where values are aggregated (the
servers, or this process for ``local``), named and parameterised as
``mxnet.optimizer``: SGD, NAG, Adam, AdamW, RMSProp, AdaGrad, Signum,
and MXNet's Test (``w += rescale_grad * grad``).
The rules are the C library's (include/psched/kvstore.h); these classes
only carry the parameters.  Per-key learning-rate and weight-decay
multipliers: ``opt.set_lr_mult({key: mult})``, ``opt.set_wd_mult(...)``
(keys as the KVStore's: int or str).  ``multi_precision=True`` keeps
float32 master weights for float16 and bfloat16 keys."""
import ctypes

from . import _lib

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdamW", "RMSProp", "AdaGrad",
           "Signum", "Test", "create", "register"]


def _error(msg):
    from .kvstore import PSchedError
    return PSchedError(msg, -22)


class Optimizer:
    """Base: the fields of struct psched_optimizer every optimizer has.
    Unknown keyword arguments are refused (PSchedError naming them)."""
    name = ""
    _own = ()  # the optimizer's own parameter names

    def __init__(self, learning_rate=0.01, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None, multi_precision=False, **kwargs):
        if kwargs:
            raise _error(
                "optimizer %s has no parameter%s %s (parameters: %s)"
                % (self.name or type(self).__name__,
                   "s" if len(kwargs) > 1 else "",
                   ", ".join(repr(k) for k in sorted(kwargs)),
                   ", ".join(self.param_names())))
        self.learning_rate = learning_rate
        self.wd = wd
        self.rescale_grad = rescale_grad
        self.clip_gradient = clip_gradient
        self.multi_precision = bool(multi_precision)
        self.lr_mult = {}
        self.wd_mult = {}

    @classmethod
    def param_names(cls):
        return ["learning_rate", "wd", "rescale_grad", "clip_gradient",
                "multi_precision"] + list(cls._own)

    @property
    def lr(self):
        return self.learning_rate

    def set_learning_rate(self, lr):
        self.learning_rate = lr

    def set_lr_mult(self, args_lr_mult):
        """MXNet's set_lr_mult: {key: multiplier} (replaces the old)."""
        self.lr_mult = dict(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        """MXNet's set_wd_mult: {key: multiplier} (replaces the old)."""
        self.wd_mult = dict(args_wd_mult)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join(
            "%s=%r" % (k, getattr(self, k)) for k in self.param_names()))

    @staticmethod
    def to_c(opt):
        """struct psched_optimizer of @opt: a psched optimizer, or any
        object with the same attributes (mxnet.optimizer objects have
        them).  The arrays it points to live on the returned object."""
        from .kvstore import _ckey
        if opt is None:  # back to the default: the aggregate replaces
            return _lib.Optimizer(name=b"", rescale_grad=1.0,
                                  clip_gradient=-1.0)
        name = getattr(opt, "name", None) or type(opt).__name__.lower()
        name = str(name).lower()
        lib = _lib.load()
        o = _lib.Optimizer()
        if lib.psched_optimizer_defaults(ctypes.byref(o), name.encode()):
            raise _error(lib.psched_errmsg().decode())
        o.name = name.encode()
        try:
            lr = getattr(opt, "learning_rate", None)
            if lr is None:
                lr = getattr(opt, "lr")
            o.learning_rate = float(lr)
            for f in ("momentum", "wd", "rescale_grad", "beta1", "beta2",
                      "epsilon", "gamma1", "gamma2", "wd_lh"):
                v = getattr(opt, f, None)
                if v is not None:
                    setattr(o, f, float(v))
            clip = getattr(opt, "clip_gradient", None)
            o.clip_gradient = -1.0 if clip is None else float(clip)
            cw = getattr(opt, "clip_weights", None)
            o.clip_weights = -1.0 if cw is None else float(cw)
            for f in ("centered", "correct_bias", "multi_precision"):
                v = getattr(opt, f, None)
                if v is not None:
                    setattr(o, f, 1 if v else 0)
            lrm = dict(getattr(opt, "lr_mult", None) or {})
            wdm = dict(getattr(opt, "wd_mult", None) or {})
        except (AttributeError, TypeError, ValueError) as e:
            raise _error("set_optimizer: %r is not an optimizer (%s)"
                         % (opt, e)) from None
        keys = list(dict.fromkeys(list(lrm) + list(wdm)))
        if keys:
            n = len(keys)
            try:
                ks = (_lib.c_u64 * n)(*[_ckey(k) for k in keys])
                lm = (ctypes.c_double * n)(
                    *[float(lrm.get(k, 1.0)) for k in keys])
                wm = (ctypes.c_double * n)(
                    *[float(wdm.get(k, 1.0)) for k in keys])
            except (TypeError, ValueError) as e:
                raise _error("set_optimizer: bad lr_mult/wd_mult (%s)"
                             % e) from None
            o.nmult = n
            o.mult_keys = ctypes.cast(ks, _lib.c_u64_p)
            o.lr_mult = ctypes.cast(lm, ctypes.POINTER(ctypes.c_double))
            o.wd_mult = ctypes.cast(wm, ctypes.POINTER(ctypes.c_double))
            o._keep = (ks, lm, wm)
        return o


class SGD(Optimizer):
    """m = momentum * m - lr * (g + wd * w); w += m (no m: w -= lr * (g +
    wd * w)); g = clip(rescale_grad * grad, clip_gradient)."""
    name = "sgd"
    _own = ("momentum",)

    def __init__(self, learning_rate=0.01, momentum=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum


class NAG(Optimizer):
    """g += wd * w; m = momentum * m + lr * g; w -= momentum * m + lr * g."""
    name = "nag"
    _own = ("momentum",)

    def __init__(self, learning_rate=0.01, momentum=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum


class Adam(Optimizer):
    """g += wd * w; m, v moments; w -= lr * c * m / (sqrt(v) + epsilon),
    c the bias correction sqrt(1 - beta2^t) / (1 - beta1^t)."""
    name = "adam"
    _own = ("beta1", "beta2", "epsilon")

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999,
                 epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon


class AdamW(Optimizer):
    """Adam with decoupled weight decay: w -= lr * (c * m / (sqrt(v) +
    epsilon) + wd * w); c = 1 when correct_bias is False."""
    name = "adamw"
    _own = ("beta1", "beta2", "epsilon", "correct_bias")

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999,
                 epsilon=1e-8, correct_bias=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.correct_bias = bool(correct_bias)


class RMSProp(Optimizer):
    """Tieleman & Hinton (centered=False) or Graves (centered=True), with
    MXNet 1.x's names gamma1 (decay) and gamma2 (momentum, centered)."""
    name = "rmsprop"
    _own = ("gamma1", "gamma2", "epsilon", "centered", "clip_weights")

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9,
                 epsilon=1e-8, centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1, self.gamma2, self.epsilon = gamma1, gamma2, epsilon
        self.centered = bool(centered)
        self.clip_weights = clip_weights


class AdaGrad(Optimizer):
    """g += wd * w; h += g^2; w -= lr * g / (sqrt(h) + epsilon)."""
    name = "adagrad"
    _own = ("epsilon",)

    def __init__(self, learning_rate=0.01, epsilon=1e-6, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.epsilon = epsilon


class Signum(Optimizer):
    """g += wd * w; m = momentum * m + (1 - momentum) * g;
    w = (1 - lr * wd_lh) * w - lr * sign(m) (momentum 0: sign(g))."""
    name = "signum"
    _own = ("momentum", "wd_lh")

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum, self.wd_lh = momentum, wd_lh


class Test(Optimizer):
    """MXNet 1.x's test optimizer: w += rescale_grad * grad (no learning
    rate, weight decay or clipping), as MXNet's own kvstore tests use."""
    name = "test"


_REGISTRY = {c.name: c for c in (SGD, NAG, Adam, AdamW, RMSProp, AdaGrad,
                                 Signum, Test)}


def register(cls):
    """``mxnet.optimizer.register``: only names the C library knows."""
    if cls.name not in _REGISTRY:
        raise _error("optimizer %r: the servers have no rule for it "
                     "(supported: %s)" % (cls.name,
                                          ", ".join(sorted(_REGISTRY))))
    _REGISTRY[cls.name] = cls
    return cls


def create(name, **kwargs):
    """``mxnet.optimizer.create``: an optimizer by name."""
    cls = _REGISTRY.get(str(name).lower())
    if cls is None:
        raise _error("optimizer %r is not supported (supported: %s)"
                     % (name, ", ".join(sorted(_REGISTRY))))
    return cls(**kwargs)
