# SPDX-License-Identifier: MIT
"""Reference optimizers in numpy, written from the rules documented in
include/psched/kvstore.h (MXNet's update rules), independently of the C
code: whole arrays, float64 arithmetic, and the stored precision applied
where the library stores (weights and states rounded to the key's
float type after every step; float16/bfloat16 keys keep float32 states,
and float32 master weights with multi_precision).  Also the reference
gradient compression (MXNet's 2bit and 1bit with error feedback).
"""
import numpy as np

BF16 = np.dtype([("bfloat16", "<u2")])


def bf16_round(x):
    """float64/32 values -> the float32 values bfloat16 can hold (round
    to nearest even), computed on the bit pattern."""
    b = np.asarray(x, np.float32).copy().view(np.uint32)
    keep = ((b >> 16) & 1) + 0x7fff
    b = ((b.astype(np.uint64) + keep) >> 16 << 16).astype(np.uint32)
    return b.view(np.float32)


def store_round(x, kind):
    """Round @x to what a key of @kind ('float32', 'float64', 'float16',
    'bfloat16') stores."""
    if kind == "float64":
        return np.asarray(x, np.float64)
    if kind == "float16":
        return np.asarray(x, np.float64).astype(np.float16).astype(
            np.float64)
    if kind == "bfloat16":
        return bf16_round(np.asarray(x, np.float64)).astype(np.float64)
    return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


class Ref:
    """One key's optimizer: step(grad) updates self.w."""

    def __init__(self, name, w0, kind="float32", learning_rate=None,
                 momentum=None, wd=0.0, rescale_grad=1.0, clip_gradient=None,
                 beta1=0.9, beta2=0.999, epsilon=None, gamma1=0.9,
                 gamma2=0.9, centered=False, clip_weights=None, wd_lh=0.0,
                 correct_bias=True, multi_precision=False, lr_mult=1.0,
                 wd_mult=1.0):
        defaults_lr = {"adam": 0.001, "adamw": 0.001, "rmsprop": 0.001}
        self.name = name
        self.kind = kind
        self.lr = (defaults_lr.get(name, 0.01) if learning_rate is None
                   else learning_rate) * lr_mult
        if momentum is None:
            momentum = 0.9 if name == "signum" else 0.0
        if epsilon is None:
            epsilon = 1e-6 if name == "adagrad" else 1e-8
        self.mom, self.wd = momentum, wd * wd_mult
        self.rescale, self.clip = rescale_grad, clip_gradient
        self.b1, self.b2, self.eps = beta1, beta2, epsilon
        self.g1, self.g2, self.centered = gamma1, gamma2, centered
        self.cw, self.wd_lh, self.cb = clip_weights, wd_lh, correct_bias
        self.w = store_round(np.asarray(w0, np.float64), kind)
        half = kind in ("float16", "bfloat16")
        self.master = self.w.copy() if (multi_precision and half) else None
        n = self.w.size
        self.s = [np.zeros(n) for _ in range(3)]
        self.t = 0

    def _state_round(self, x):
        return store_round(x, "float64" if self.kind == "float64"
                           else "float32")

    def step(self, grad):
        w = self.master if self.master is not None else self.w
        g = np.asarray(grad, np.float64) * self.rescale
        if self.clip is not None and self.clip > 0:
            g = np.clip(g, -self.clip, self.clip)
        self.t += 1
        m, v, d = self.s
        lr, wd = self.lr, self.wd
        nm = self.name
        if nm == "sgd":
            if self.mom > 0:
                m = self.mom * m - lr * (g + wd * w)
                w = w + m
            else:
                w = w - lr * (g + wd * w)
        elif nm == "nag":
            g = g + wd * w
            if self.mom > 0:
                m = self.mom * m + lr * g
                w = w - (self.mom * m + lr * g)
            else:
                w = w - lr * g
        elif nm in ("adam", "adamw"):
            if nm == "adam":
                g = g + wd * w
            m = self.b1 * m + (1 - self.b1) * g
            v = self.b2 * v + (1 - self.b2) * g * g
            c = 1.0
            if nm == "adam" or self.cb:
                c = np.sqrt(1 - self.b2 ** self.t) / (1 - self.b1 ** self.t)
            if nm == "adam":
                w = w - c * lr * m / (np.sqrt(v) + self.eps)
            else:
                w = w - lr * (c * m / (np.sqrt(v) + self.eps) + wd * w)
        elif nm == "rmsprop":
            g = g + wd * w
            m = self.g1 * m + (1 - self.g1) * g * g
            if not self.centered:
                w = w - lr * g / np.sqrt(m + self.eps)
            else:
                v = self.g1 * v + (1 - self.g1) * g
                d = self.g2 * d - lr * g / np.sqrt(m - v * v + self.eps)
                w = w + d
            if self.cw is not None and self.cw > 0:
                w = np.clip(w, -self.cw, self.cw)
        elif nm == "adagrad":
            g = g + wd * w
            m = m + g * g
            w = w - lr * g / (np.sqrt(m) + self.eps)
        elif nm == "signum":
            g = g + wd * w
            if self.mom > 0:
                m = self.mom * m + (1 - self.mom) * g
                g = m
            w = (1 - lr * self.wd_lh) * w - lr * np.sign(g)
        else:
            raise ValueError(nm)
        self.s = [self._state_round(x) for x in (m, v, d)]
        if self.master is not None:
            self.master = store_round(w, "float32")
            self.w = store_round(self.master, self.kind)
        else:
            self.w = store_round(w, self.kind)
        return self.w


class RefCompression:
    """MXNet's gradient compression on one worker's pushes of one key:
    the residual collects what was not sent (error feedback)."""

    def __init__(self, kind, threshold, n):
        self.kind, self.th = kind, threshold
        self.res = np.zeros(n, np.float32)

    def quantize(self, grad):
        """The values the server receives for @grad (float32)."""
        r = self.res + np.asarray(grad, np.float32)
        th = np.float32(self.th)
        if self.kind == "2bit":
            out = np.where(r >= th, th, np.where(r <= -th, -th,
                                                 np.float32(0)))
        else:  # 1bit: the sign side of the threshold
            out = np.where(r > th, np.float32(1), np.float32(-1))
        self.res = (r - out).astype(np.float32)
        return out.astype(np.float32)
