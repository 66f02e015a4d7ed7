# SPDX-License-Identifier: MIT
"""psched.torch: data-parallel PyTorch training over psched, with the API
of BytePS's ``byteps.torch`` (and Horovod's)::

    import psched.torch as pst
    pst.init()                                   # joins the job (DMLC_*)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt = pst.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    pst.broadcast_parameters(model.state_dict(), root_rank=0)
    pst.broadcast_optimizer_state(opt, root_rank=0)
    for x, y in data:                            # this worker's share
        opt.zero_grad()
        loss_fn(model(x), y).backward()          # gradients leave as made
        opt.step()                               # averaged over workers

Two modes:

- ``DistributedOptimizer``: the optimizer runs on every worker.  An
  autograd hook on every parameter pushes its gradient the moment
  autograd has accumulated it (priority by parameter order: front layers,
  needed first by the next forward, are more urgent); the servers sum the
  workers' gradients; ``step()`` waits for the averaged gradients and
  runs the wrapped ``torch.optim`` optimizer.
- ``ServerOptimizer``: the parameters live on the servers and a server
  optimizer (``"sgd"``, or any name the library's servers know) updates
  them; each gradient hook pushes the gradient and pulls the new weights
  straight into the parameter's storage, and a forward pre-hook on every
  module waits for that module's weights just before it runs.

Tensors are keyed by name (``named_parameters``; ``push_pull(name=...)``),
so two models in one process and re-created optimizers work.  dtypes:
float32, float64, float16, bfloat16 (where the library has it), int32,
int64.  CUDA tensors go to the library by device address
(``KVStore.issue_device``): it moves them between the GPU and the network
itself, after the tensor's stream has finished writing them.  A library
built without CUDA stages them through pinned host buffers here instead
(one copy each way per push_pull) and says so once.
Errors are ``psched.PSchedError`` with the library's message.
"""
import hashlib
import io
import os
import weakref

import numpy as np
import torch

from .. import _lib
from .. import optimizer as _optimizer
from ..kvstore import KVStore, PSchedError, _ckey, bfloat16 as _np_bf16
from ..kvstore import cuda_check
from . import _sparse

__all__ = ["init", "shutdown", "join", "snapshot", "size", "rank", "stats", "local_rank", "local_size",
           "push_pull", "push_pull_inplace", "push_pull_async",
           "push_pull_async_inplace", "poll", "synchronize",
           "broadcast_parameters", "broadcast_optimizer_state",
           "DistributedOptimizer", "ServerOptimizer", "Compression",
           "PSchedError"]

_NATIVE = {torch.float32, torch.float64, torch.float16, torch.int32,
           torch.int64}


class _Context:
    def __init__(self, kv):
        self.kv = kv
        self.size = kv.num_workers
        self.rank = kv.rank
        self.keys = {}       # name -> [key, shape, dtype, owner weakref]
        self.handles = {}    # handle id -> _Handle
        self.next_handle = 1
        self.auto_names = 0  # push_pull without a name
        self.generation = {}  # broadcast name -> times broadcast
        self.server_opt = None  # name of the servers' optimizer, if any
        self.averaged = False   # push_pull averaged gradients here
        self.grad_owner = {}    # gradient name -> parameter weakref


_ctx = None


def init(kvtype=None):
    """Join the job: a ``dist_sync`` KVStore when the environment
    describes one (``python3 -m psched.launch`` sets DMLC_*), else a
    one-process ``local`` store.  Idempotent."""
    global _ctx
    if _ctx is not None:
        return
    if kvtype is None:
        kvtype = "dist_sync" if "DMLC_ROLE" in os.environ else "local"
    _ctx = _Context(KVStore(kvtype))


def shutdown():
    """Wait for outstanding transfers and leave the job."""
    global _ctx
    if _ctx is not None:
        c, _ctx = _ctx, None
        c.kv.close()


def _c():
    if _ctx is None:
        raise PSchedError("psched.torch is not initialised: call "
                          "psched.torch.init() first", -22)
    return _ctx


def stats():
    """This worker's counters, as ``KVStore.stats()`` returns them
    (docs/metrics.md)."""
    return _c().kv.stats()


def join(timeout_sec=None):
    """This worker's data is exhausted: leave the job, the others go on
    without it from the next step, their averages over the workers still
    in (docs/elastic.md).  Then shutdown() as usual."""
    _c().kv.leave(timeout_sec)


def snapshot(step):
    """Every server writes what it holds (the weights and states of a
    ``ServerOptimizer``) as the snapshot of @step into its
    PS_SNAPSHOT_DIR (docs/snapshots.md).  Collective: call it on every
    worker between steps, after ``synchronize()``."""
    _c().kv.snapshot(step)


def size():
    """Number of workers."""
    return _c().size


def rank():
    """This worker's rank, 0 .. size()-1."""
    return _c().rank


def _env_int(names, default):
    for n in names:
        v = os.environ.get(n)
        if v is not None:
            try:
                return int(v)
            except ValueError:
                raise PSchedError("%s=%r is not an integer" % (n, v),
                                  -22) from None
    return default


def local_rank():
    """Rank among the workers on the local host (PSCHED_LOCAL_RANK, set by
    psched.launch; BYTEPS_LOCAL_RANK also read)."""
    _c()
    return _env_int(("PSCHED_LOCAL_RANK", "BYTEPS_LOCAL_RANK"), 0)


def local_size():
    """Workers on the local host (PSCHED_LOCAL_SIZE / BYTEPS_LOCAL_SIZE)."""
    _c()
    return _env_int(("PSCHED_LOCAL_SIZE", "BYTEPS_LOCAL_SIZE"), 1)


# -- tensors <-> the KVStore's numpy arrays ---------------------------------

def _check_dtype(t, what):
    if t.dtype in _NATIVE or t.dtype == torch.bfloat16:
        return
    raise PSchedError("%s: dtype %s is not supported (float32, float64, "
                      "float16, bfloat16, int32, int64)"
                      % (what, str(t.dtype).replace("torch.", "")), -22)


def _np_view(t):
    """The numpy array sharing the memory of the contiguous CPU tensor
    @t (bfloat16 as its bit patterns, typed for the library)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_np_bf16)
    return t.numpy()


def _key_of(kind, name):
    return "psched.torch/%s/%s" % (kind, name)


def _name_taken(n):
    return PSchedError(
        "parameter name %r is already used by a parameter of another live "
        "model: name the models' parameters apart (e.g. named_parameters="
        "[('G.' + n, p) for n, p in G.named_parameters()])" % (n,), -22)


def _declare(c, kind, names, tensors, values=None, owners=None):
    """Declare the keys of @names (collective: every worker declares the
    same names in the same order); keys declared before are checked for
    the same shape and dtype and reused.  @values: initial values
    (rank 0's win), zeros when None."""
    new_keys, new_vals, new_names = [], [], []
    for i, (n, t) in enumerate(zip(names, tensors)):
        if not isinstance(n, str):
            raise PSchedError("tensor name %r is not a str" % (n,), -22)
        rec = c.keys.get((kind, n))
        owner = owners[i] if owners else None
        if rec is not None:
            if rec[1] != tuple(t.shape) or rec[2] != t.dtype:
                raise PSchedError(
                    "tensor %r is %s %s but the name was first used for %s "
                    "%s: give different tensors different names"
                    % (n, str(t.dtype).replace("torch.", ""),
                       tuple(t.shape), str(rec[2]).replace("torch.", ""),
                       rec[1]), -22)
            prev = rec[3]() if rec[3] is not None else None
            if owner is not None and prev is not None and prev is not owner:
                raise _name_taken(n)
            if owner is not None:
                rec[3] = weakref.ref(owner)
            continue
        _check_dtype(t, "tensor %r" % (n,))
        src = values[i] if values is not None else t
        buf = torch.zeros(t.shape, dtype=t.dtype) if values is None else \
            src.detach().to("cpu", copy=True).contiguous()
        new_keys.append(_key_of(kind, n))
        new_vals.append(_np_view(buf))
        new_names.append((n, t, owner))
    if not new_keys:
        return
    c.kv.init(new_keys, new_vals)
    for (n, t, owner), k in zip(new_names, new_keys):
        c.keys[(kind, n)] = [k, tuple(t.shape), t.dtype,
                             weakref.ref(owner) if owner is not None
                             else None]


class _Handle:
    """An issued push_pull: where the result lands and what to do once
    the KVStore has it."""
    __slots__ = ("key", "out", "buf", "average", "size", "dest", "keep")

    def done(self):
        if self.buf is None:  # by device address (_issue_device)
            if self.dest is not None:
                self.dest.copy_(self.keep[1])
                self.out = self.dest
            self.keep = None
        elif self.dest is not None:  # staged: back into the device tensor
            self.dest.copy_(self.buf)
            self.out = self.dest
        elif self.buf.data_ptr() != self.out.data_ptr():
            self.out.copy_(self.buf)
        if self.average and self.size > 1:
            if self.out.is_floating_point():
                self.out.div_(self.size)
            else:
                self.out.copy_(torch.div(self.out, self.size,
                                         rounding_mode="floor"))
        return self.out


_device_ok = {}


def _device_path(dev):
    """True when the library moves tensors on CUDA device @dev itself;
    otherwise warn once and stage through pinned host memory."""
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    ok = _device_ok.get(idx)
    if ok is None:
        why = cuda_check(idx)
        ok = why is None
        if not ok:
            import warnings
            warnings.warn("psched.torch: CUDA tensors on cuda:%d are "
                          "staged through pinned host memory: %s"
                          % (idx, why), RuntimeWarning, stacklevel=4)
        _device_ok[idx] = ok
    return ok


def _issue_device(c, h, tensor, out, priority):
    """pushpull CUDA @tensor by address into @out (a CUDA tensor of the
    same shape); the handle keeps both alive until synchronize()."""
    src = tensor.detach()
    if not src.is_contiguous():
        src = src.contiguous()
    dst = out if out.is_contiguous() else torch.empty_like(src)
    # The library reads and writes on its own stream: what the caller's
    # stream queued on these tensors must be done first.
    torch.cuda.current_stream(src.device).synchronize()
    dtype = _np_bf16 if src.dtype == torch.bfloat16 else \
        str(src.dtype).replace("torch.", "")
    c.kv.issue_device("pushpull", [h.key], [src.data_ptr()],
                      [src.numel() * src.element_size()], dtype,
                      src.device.index, out_ptrs=[dst.data_ptr()],
                      priority=priority)
    h.buf, h.keep = None, (src, dst)
    h.dest = out if dst is not out else None


def _issue(c, name, tensor, out, average, priority):
    """pushpull @tensor's value under @name, the result into @out (may be
    @tensor); returns the handle id."""
    if c.server_opt is not None:
        raise PSchedError(
            "push_pull of %r: the servers apply the %r optimizer to every "
            "key (ServerOptimizer), so they would update this tensor "
            "instead of summing it" % (name, c.server_opt), -22)
    if not isinstance(tensor, torch.Tensor):
        raise PSchedError("push_pull of %r: expected a torch.Tensor, got %s"
                          % (name, type(tensor).__name__), -22)
    _check_dtype(tensor, "push_pull of %r" % (name,))
    _declare(c, "t", [name], [tensor])
    c.averaged = True
    h = _Handle()
    h.keep = None
    h.key = c.keys[("t", name)][0]
    h.average, h.size, h.out, h.dest = average, c.size, out, None
    if tensor.device.type == "cuda" and _device_path(tensor.device):
        _issue_device(c, h, tensor, out, priority)
    elif tensor.device.type != "cpu":
        h.buf = torch.empty(tensor.shape, dtype=tensor.dtype,
                            pin_memory=True)
        h.buf.copy_(tensor.detach())
        h.dest = out
    elif tensor.is_contiguous() and out is tensor:
        h.buf = tensor.detach()
    else:
        h.buf = tensor.detach().contiguous().clone()
    if h.buf is not None:
        c.kv.pushpull(h.key, _np_view(h.buf), priority=priority,
                      block=False)
    hid = c.next_handle
    c.next_handle += 1
    c.handles[hid] = h
    return hid


def _name_or_auto(c, name):
    if name is not None:
        return str(name)
    # Workers issue unnamed calls in the same order: the count names them.
    c.auto_names += 1
    return "push_pull.noname.%d" % c.auto_names


def push_pull_async(tensor, average=True, name=None, version=0, priority=0):
    """Start summing (@average: averaging) @tensor over the workers into a
    new tensor; returns a handle for poll() and synchronize().  @priority:
    larger = more urgent.  @version is accepted for BytePS's signature."""
    c = _c()
    name = _name_or_auto(c, name)
    out = torch.empty_like(tensor) if isinstance(tensor, torch.Tensor) \
        else None
    return _issue(c, name, tensor, out, average, priority)


def push_pull_async_inplace(tensor, average=True, name=None, version=0,
                            priority=0):
    """As push_pull_async, the result written into @tensor."""
    c = _c()
    return _issue(c, _name_or_auto(c, name), tensor, tensor, average,
                  priority)


def poll(handle):
    """True once the push_pull of @handle has completed (synchronize()
    then returns without waiting); never blocks."""
    c = _c()
    h = c.handles.get(handle)
    if h is None:
        raise PSchedError("poll: no push_pull handle %r (synchronized "
                          "already?)" % (handle,), -22)
    return c.kv._poll(h.key)


def synchronize(handle):
    """Wait for the push_pull of @handle; returns its output tensor."""
    c = _c()
    h = c.handles.pop(handle, None)
    if h is None:
        raise PSchedError("synchronize: no push_pull handle %r "
                          "(synchronized already?)" % (handle,), -22)
    c.kv.wait(h.key)
    if h.average:
        # The step's members, which a worker's leaving changes.
        h.size = c.kv._members(_ckey(h.key))
    return h.done()


def push_pull(tensor, average=True, name=None, version=0, priority=0):
    """Sum (@average: average) @tensor over the workers; a new tensor."""
    return synchronize(push_pull_async(tensor, average, name, version,
                                       priority))


def push_pull_inplace(tensor, average=True, name=None, version=0,
                      priority=0):
    return synchronize(push_pull_async_inplace(tensor, average, name,
                                               version, priority))


# -- broadcast --------------------------------------------------------------

def _as_words(t):
    """A contiguous CPU tensor the KVStore carries bit-exactly: native
    dtypes as they are, others (bool, uint8, int16, bfloat16...) as their
    bytes padded into int64 words."""
    t = t.detach().to("cpu").contiguous()
    if t.dtype in _NATIVE:
        return t.clone()
    raw = t.reshape(-1).view(torch.uint8) if t.numel() else \
        torch.zeros(0, dtype=torch.uint8)
    pad = (-raw.numel()) % 8
    raw = torch.cat([raw, torch.zeros(pad + (8 if raw.numel() == 0 else 0),
                                      dtype=torch.uint8)])
    return raw.view(torch.int64).clone()


def _from_words(w, like):
    if like.dtype in _NATIVE:
        return w.reshape(like.shape)
    n = like.numel() * like.element_size()
    return w.view(torch.uint8)[:n].view(like.dtype).reshape(like.shape)


def _broadcast_tensors(c, names, tensors, root_rank):
    """Every tensor gets root_rank's value (collective).  Each call uses
    fresh keys (name + generation) so a name can be broadcast again."""
    if isinstance(root_rank, bool) or not isinstance(root_rank, int) or \
            not 0 <= root_rank < c.size:
        raise PSchedError("broadcast: root_rank %r is not a worker rank "
                          "(0..%d)" % (root_rank, c.size - 1), -22)
    if root_rank != 0 and c.server_opt is not None:
        raise PSchedError(
            "broadcast from root_rank %d: the servers apply the %r "
            "optimizer to pushes (ServerOptimizer); broadcast from rank 0 "
            "(which needs no push) instead" % (root_rank, c.server_opt),
            -22)
    out = list(tensors)  # empty tensors have nothing to send
    live = [i for i, t in enumerate(tensors) if t.numel()]
    names = [names[i] for i in live]
    tensors = [tensors[i] for i in live]
    keys, words = [], []
    for n, t in zip(names, tensors):
        g = c.generation.get(n, 0)
        c.generation[n] = g + 1
        keys.append("psched.torch/bcast/%s/%d" % (n, g))
        words.append(_as_words(t))
    if not keys:
        return out
    arrays = [w.numpy() for w in words]
    if root_rank == 0:
        c.kv.init(keys, arrays)            # rank 0's values are stored
        c.kv.pull(keys, out=arrays)
    else:                                  # root's value + zeros: exact
        c.kv.init(keys, [np.zeros_like(a) for a in arrays])
        if c.rank != root_rank:
            for a in arrays:
                a[...] = 0
        c.kv.pushpull(keys, arrays)
    for i, w, t in zip(live, words, tensors):
        out[i] = _from_words(w, t)
    return out


def broadcast_parameters(params, root_rank=0):
    """Give every worker root_rank's values of @params: a state_dict, a
    dict or an iterable of (name, tensor) (model.named_parameters()).
    Tensors are updated in place."""
    c = _c()
    if isinstance(params, dict):
        items = list(params.items())
    else:
        try:
            items = list(params)
        except TypeError:
            raise PSchedError("broadcast_parameters: expected a state_dict "
                              "or (name, tensor) pairs, got %s"
                              % type(params).__name__, -22) from None
    for it in items:
        if not (isinstance(it, tuple) and len(it) == 2 and
                isinstance(it[1], torch.Tensor)):
            raise PSchedError("broadcast_parameters: %r is not a (name, "
                              "tensor) pair" % (it,), -22)
    names = ["param/%s" % n for n, _ in items]
    tensors = [t for _, t in items]
    for t, v in zip(tensors, _broadcast_tensors(c, names, tensors,
                                                root_rank)):
        with torch.no_grad():
            t.copy_(v)


def _broadcast_object(c, name, obj, root_rank):
    """Pickle @obj (torch.save) on root_rank, return it on every rank."""
    payload = b""
    if c.rank == root_rank:
        f = io.BytesIO()
        torch.save(obj, f)
        payload = f.getvalue()
    n = torch.tensor([len(payload)], dtype=torch.int64)
    n = _broadcast_tensors(c, [name + ".len"], [n], root_rank)[0]
    data = torch.zeros(int(n[0]), dtype=torch.uint8)
    if c.rank == root_rank:
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    data = _broadcast_tensors(c, [name], [data], root_rank)[0]
    return torch.load(io.BytesIO(data.numpy().tobytes()))


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Give every worker root_rank's optimizer state and hyperparameters
    (its state_dict, loaded into @optimizer everywhere else)."""
    c = _c()
    if not hasattr(optimizer, "state_dict"):
        raise PSchedError("broadcast_optimizer_state: %r is not a torch "
                          "optimizer" % (optimizer,), -22)
    state = _broadcast_object(c, "optimizer_state",
                              optimizer.state_dict(), root_rank)
    if c.rank != root_rank:
        optimizer.load_state_dict(state)


# -- compression ------------------------------------------------------------

class _NoCompression:
    @staticmethod
    def compress(t):
        return t, None

    @staticmethod
    def decompress(t, ctx):
        return t


class _FP16Compression:
    """Send float gradients as float16 (servers sum them in float32)."""
    @staticmethod
    def compress(t):
        if t.is_floating_point() and t.dtype != torch.float16:
            return t.to(torch.float16), t.dtype
        return t, None

    @staticmethod
    def decompress(t, ctx):
        return t if ctx is None else t.to(ctx)


class Compression:
    """Gradient compression on the way to the servers (BytePS's names)."""
    none = _NoCompression
    fp16 = _FP16Compression


# -- parameters, names, hooks -----------------------------------------------

def _named(optimizer_groups, named_parameters, what):
    """[(name, parameter)] of the optimizer's parameters in order."""
    params = [p for g in optimizer_groups for p in g["params"]]
    if named_parameters is None:
        return [("noname.%d" % i, p) for i, p in enumerate(params)]
    named = list(named_parameters)
    names = {}
    for it in named:
        if not (isinstance(it, tuple) and len(it) == 2):
            raise PSchedError("%s: named_parameters must be (name, "
                              "parameter) pairs, got %r" % (what, it), -22)
        n, p = it
        if id(p) in names:
            continue  # shared (tied) parameter: its first name
        if n in names.values():
            raise PSchedError("%s: parameter name %r appears twice in "
                              "named_parameters" % (what, n), -22)
        names[id(p)] = n
    missing = [i for i, p in enumerate(params) if id(p) not in names]
    if missing:
        raise PSchedError(
            "%s: named_parameters was given, but the optimizer's "
            "parameters %s are not in it" % (what, missing), -22)
    return [(names[id(p)], p) for p in params]


def _grad_accumulator(p):
    """The autograd node that accumulates @p's gradient: its hooks run
    once p.grad holds this backward pass's sum."""
    tmp = p.expand_as(p)
    return tmp.grad_fn.next_functions[0][0]


class _Bucket:
    """Small dense gradients sent as one tensor: one request (and one
    key) instead of one each.  Filled when the last of them is ready."""
    __slots__ = ("params", "offs", "numel", "name", "flat", "ready", "prio")


def _bucket_bytes():
    """PSCHED_TORCH_BUCKET_BYTES: gradients smaller than this are sent
    together, in buckets of up to this many bytes (0: each alone)."""
    v = _env_int(("PSCHED_TORCH_BUCKET_BYTES",), 1 << 20)
    if v < 0:
        raise PSchedError("PSCHED_TORCH_BUCKET_BYTES=%d is negative" % v,
                          -22)
    return v


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's class (see DistributedOptimizer)."""

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step):
        super(self.__class__, self).__init__(params)
        c = _c()
        if c.server_opt is not None:
            raise PSchedError(
                "DistributedOptimizer: the servers apply the %r optimizer "
                "(ServerOptimizer); gradients would be updated, not "
                "averaged" % (c.server_opt,), -22)
        if not isinstance(backward_passes_per_step, int) or \
                backward_passes_per_step < 1:
            raise PSchedError("DistributedOptimizer: backward_passes_per_"
                              "step must be an int >= 1, got %r"
                              % (backward_passes_per_step,), -22)
        self._ps_ctx = c
        self._ps_compression = compression
        self._ps_passes = backward_passes_per_step
        named = _named(self.param_groups, named_parameters,
                       "DistributedOptimizer")
        self._ps_params = [(n, p) for n, p in named if p.requires_grad]
        self._ps_index = {p: i for i, (_, p) in enumerate(self._ps_params)}
        self._ps_names = {p: n for n, p in self._ps_params}
        self._ps_handles = {}   # parameter -> (handle id, ctx, sent)
        self._ps_buckets = []   # _Bucket, made at the first synchronize()
        self._ps_bucket_of = {}  # parameter -> its _Bucket
        self._ps_bhandles = {}  # _Bucket -> (handle id, ctx, sent)
        self._ps_delay = {p: self._ps_passes for _, p in self._ps_params}
        self._ps_accs = []
        # Which gradients are sparse (nn.Embedding(sparse=True)) shows
        # only in the first backward pass, and a worker whose pass left
        # a parameter's gradient None cannot tell: the workers agree at
        # the first synchronize() (one float per parameter, summed), and
        # only then declare the dense gradient keys -- none for a sparse
        # table, which would cost its whole size on the servers.  The
        # first step's gradients therefore leave at synchronize(), not
        # from the hooks.
        self._ps_sparse = None   # parameter -> True/False once agreed
        self._ps_held = set()    # gradients of the first pass, not sent
        _declare(c, "t", [self._ps_kinds_name()],
                 [torch.zeros(max(len(self._ps_params), 1))])
        # A name another live model's parameter has (its gradient may
        # travel in a bucket, under no key of its own) is refused.
        for n, p in self._ps_params:
            prev = c.grad_owner.get(n)
            prev = prev() if prev is not None else None
            if prev is not None and prev is not p:
                raise _name_taken(n)
        for n, p in self._ps_params:
            c.grad_owner[n] = weakref.ref(p)
        # Names declared before (a re-created optimizer, or another live
        # model's): checked now, as the declaration would.
        known = [(n, p) for n, p in self._ps_params
                 if ("t", "grad/" + n) in c.keys]
        _declare(c, "t", ["grad/" + n for n, _ in known],
                 self._ps_grad_shapes(known), owners=[p for _, p in known])
        for _, p in self._ps_params:
            acc = _grad_accumulator(p)
            acc.register_hook(self._ps_make_hook(p))
            self._ps_accs.append(acc)

    def _ps_make_hook(self, p):
        # The hook lives in autograd's graph: a weak reference lets an
        # optimizer nobody holds any more go (and stop pushing).
        ref = weakref.ref(self)

        def hook(*_):
            self = ref()
            if self is None:
                return
            if self._ps_delay[p] <= 0:
                raise PSchedError(
                    "gradient of %r computed more than backward_passes_"
                    "per_step=%d times before step(): call step() or "
                    "synchronize() after every %d backward passes"
                    % (self._ps_names[p], self._ps_passes, self._ps_passes),
                    -22)
            self._ps_delay[p] -= 1
            if self._ps_delay[p] == 0:
                b = self._ps_bucket_of.get(p)
                if self._ps_sparse is None:
                    self._ps_held.add(p)   # sent by the first synchronize()
                elif b is None:
                    self._ps_push(p)
                else:
                    b.ready += 1
                    if b.ready == len(b.params):
                        self._ps_push_bucket(b)
        return hook

    def _ps_grad_shapes(self, named):
        return [self._ps_compression.compress(
            torch.zeros(0, dtype=p.dtype))[0].new_zeros(p.shape)
            for _, p in named]

    def _ps_kinds_name(self):
        # the same on every worker: the optimizer's parameter names
        names = "\0".join(n for n, _ in self._ps_params)
        return "grad.kinds/%d/%s" % (len(self._ps_params),
                                     hashlib.sha1(names.encode()).hexdigest())

    def _ps_agree(self):
        """First synchronize(): agree which parameters have sparse
        gradients (any worker's), then declare the dense ones' keys."""
        c = self._ps_ctx
        mine = torch.zeros(max(len(self._ps_params), 1))
        for i, (_, p) in enumerate(self._ps_params):
            if p.grad is not None and p.grad.is_sparse:
                mine[i] = 1
        hid = _issue(c, self._ps_kinds_name(), mine, mine, False, 0)
        kinds = synchronize(hid)
        self._ps_sparse = {p: bool(kinds[i] > 0)
                           for i, (_, p) in enumerate(self._ps_params)}
        dense = [(n, p) for n, p in self._ps_params
                 if not self._ps_sparse[p]]
        self._ps_make_buckets(dense)
        alone = [(n, p) for n, p in dense if p not in self._ps_bucket_of]
        _declare(c, "t", ["grad/" + n for n, _ in alone],
                 self._ps_grad_shapes(alone), owners=[p for _, p in alone])
        b = self._ps_buckets
        _declare(c, "t", [x.name for x in b],
                 [self._ps_compression.compress(torch.zeros(
                     0, dtype=x.flat.dtype))[0].new_zeros(x.numel)
                  for x in b])

    def _ps_make_buckets(self, dense):
        """Group the small dense gradients, in the order backward makes
        them (the last parameters first), into buckets of one dtype and
        device; the same on every worker (it follows the names)."""
        cap = _bucket_bytes()
        groups, cur, size = [], [], 0
        for n, p in reversed(dense):
            nbytes = p.numel() * p.element_size()
            if not cap or nbytes >= cap:
                continue
            if cur and (size + nbytes > cap or
                        p.dtype != cur[0][1].dtype or
                        p.device != cur[0][1].device):
                groups.append(cur)
                cur, size = [], 0
            cur.append((n, p))
            size += nbytes
        if cur:
            groups.append(cur)
        for g in groups:
            if len(g) < 2:
                continue   # one gradient alone: no copy
            b = _Bucket()
            b.params = [p for _, p in g]
            b.offs, b.numel = [], 0
            for p in b.params:
                b.offs.append(b.numel)
                b.numel += p.numel()
            names = "\0".join(n for n, _ in g)
            b.name = "gradb/%d/%s" % (
                len(g), hashlib.sha1(names.encode()).hexdigest())
            b.flat = torch.zeros(b.numel, dtype=b.params[0].dtype,
                                 device=b.params[0].device)
            b.ready = 0
            # as urgent as its frontmost parameter
            b.prio = -min(self._ps_index[p] for p in b.params)
            self._ps_buckets.append(b)
            for p in b.params:
                self._ps_bucket_of[p] = b

    def _ps_push_bucket(self, b):
        for p, off in zip(b.params, b.offs):
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            elif p.grad.is_sparse:
                p.grad = p.grad.to_dense()
            b.flat[off:off + p.numel()].copy_(p.grad.detach().reshape(-1))
        g, ctx = self._ps_compression.compress(b.flat)
        hid = _issue(self._ps_ctx, b.name, g, g, True, b.prio)
        self._ps_bhandles[b] = (hid, ctx, g)

    def _ps_push(self, p):
        if self._ps_sparse[p]:
            # nn.Embedding(sparse=True): only the touched rows (_sparse.py);
            # a worker whose pass did not touch the table pushes no rows
            # (it still takes part in the step and gets the average)
            grad = p.grad
            if grad is None:
                grad = torch.sparse_coo_tensor(
                    torch.zeros((1, 0), dtype=torch.long),
                    torch.zeros((0,) + tuple(p.shape[1:]), dtype=p.dtype),
                    tuple(p.shape))
            elif not grad.is_sparse:
                grad = grad.to_sparse(1)
            g = _sparse.push_pull(self._ps_ctx, self._ps_names[p], p, grad)
            self._ps_handles[p] = (None, None, g)
            return
        if p.grad is not None and p.grad.is_sparse:
            p.grad = p.grad.to_dense()  # sparse here, dense elsewhere
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        g, ctx = self._ps_compression.compress(p.grad.detach())
        # Front layers (low index) are more urgent: larger priority.
        hid = _issue(self._ps_ctx, "grad/" + self._ps_names[p], g, g,
                     True, -self._ps_index[p])
        self._ps_handles[p] = (hid, ctx, g)

    def synchronize(self):
        """Wait for the averaged gradients (pushing any a backward pass
        did not produce, so the workers stay in step)."""
        if self._ps_sparse is None:
            self._ps_agree()
        self._ps_held.clear()
        for b in self._ps_buckets:
            if b not in self._ps_bhandles:
                self._ps_push_bucket(b)
        for _, p in self._ps_params:
            if p not in self._ps_handles and p not in self._ps_bucket_of:
                self._ps_push(p)
        for b in reversed(self._ps_buckets):   # front layers first
            hid, ctx, _ = self._ps_bhandles.pop(b)
            out = self._ps_compression.decompress(synchronize(hid), ctx)
            for p, off in zip(b.params, b.offs):
                p.grad.copy_(out[off:off + p.numel()].view_as(p))
                self._ps_delay[p] = self._ps_passes
            b.ready = 0
        for _, p in self._ps_params:   # front layers first
            if p in self._ps_bucket_of:
                continue
            hid, ctx, g = self._ps_handles.pop(p)
            if hid is None:   # a sparse gradient, averaged already
                p.grad = g
                self._ps_delay[p] = self._ps_passes
                continue
            out = synchronize(hid)
            if ctx is not None or out.data_ptr() != p.grad.data_ptr():
                p.grad.copy_(self._ps_compression.decompress(out, ctx))
            self._ps_delay[p] = self._ps_passes

    def step(self, closure=None):
        self.synchronize()
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._ps_handles or self._ps_bhandles or self._ps_held:
            raise PSchedError(
                "zero_grad() was called after backward() but before step() "
                "or synchronize(): the gradients are still being averaged "
                "(call step() first)", -22)
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1):
    """Wrap a torch.optim optimizer: gradients are averaged over the
    workers (pushed from autograd hooks as backward produces them), then
    the optimizer steps on every worker.  The result is an instance of
    the optimizer's own class (its state starts empty, as a new one).

    @named_parameters: the model's named_parameters(); names key the
    gradients (give two models distinct names).  @compression:
    Compression.none or Compression.fp16.  @backward_passes_per_step:
    gradients of that many backward passes are accumulated (summed in
    p.grad) before they are sent; call step() after them."""
    _c()
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise PSchedError("DistributedOptimizer: %r is not a "
                          "torch.optim.Optimizer" % (optimizer,), -22)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step)


class ServerOptimizer:
    """Parameters on the servers, updated there by a server optimizer.

    @model: the nn.Module; @optimizer: a server optimizer name ("sgd",
    or any the servers know, e.g. "adam" where the library has it) with
    @hyperparameters (MXNet's names: learning_rate, momentum, wd, ...),
    or a psched.optimizer object.  rescale_grad defaults to 1/size() so
    the servers see the average gradient.  @prefix names the parameters
    apart when several models share a job.

    Each gradient leaves from its autograd hook once backward has
    accumulated @backward_passes_per_step passes, and the new weights
    come back into the parameter's own storage; the module's forward
    pre-hook waits for them just before the module runs.  After backward
    p.grad is None (the servers took the gradient); step() only pushes
    the gradients a pass did not produce; synchronize() waits for every
    parameter (before evaluating or saving without a forward pass)."""

    def __init__(self, model, optimizer="sgd", backward_passes_per_step=1,
                 prefix="", **hyperparameters):
        c = _c()
        if not isinstance(model, torch.nn.Module):
            raise PSchedError("ServerOptimizer: %r is not a torch.nn.Module"
                              % (model,), -22)
        if c.averaged:
            raise PSchedError(
                "ServerOptimizer: this job already averages tensors with "
                "push_pull/DistributedOptimizer; the servers cannot also "
                "run an optimizer on every key", -22)
        if isinstance(optimizer, str):
            hyperparameters.setdefault("rescale_grad", 1.0 / c.size)
            opt = _optimizer.create(optimizer, **hyperparameters)
        else:
            if hyperparameters:
                raise PSchedError("ServerOptimizer: hyperparameters go "
                                  "into the optimizer object", -22)
            opt = optimizer
        self._c = c
        self._passes = backward_passes_per_step
        seen, self._params = set(), []
        for n, p in model.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                if p.device.type != "cpu":
                    raise PSchedError(
                        "ServerOptimizer: parameter %r is on %s; server-side "
                        "mode keeps parameters in CPU memory for now"
                        % (n, p.device), -22)
                _check_dtype(p, "ServerOptimizer: parameter %r" % (n,))
                self._params.append((prefix + n, p))
        self._index = {p: i for i, (_, p) in enumerate(self._params)}
        self._names = {p: n for n, p in self._params}
        self._delay = {p: self._passes for _, p in self._params}
        self._sent = set()
        self._held = {}
        names = [n for n, _ in self._params]
        tensors = [p for _, p in self._params]
        _declare(c, "w", names, tensors, values=tensors, owners=tensors)
        self._keys = {p: c.keys[("w", n)][0] for n, p in self._params}
        # Every worker starts from the servers' (rank 0's) weights.
        c.kv.pull([self._keys[p] for p in tensors],
                  out=[_np_view(p.data) for p in tensors])
        c.kv.set_optimizer(opt)
        c.server_opt = getattr(opt, "name", None) or type(opt).__name__
        self.optimizer = opt
        self._hooks = []
        for _, p in self._params:
            acc = _grad_accumulator(p)
            self._hooks.append((acc, acc.register_hook(self._grad_hook(p))))
        for m in model.modules():
            mine = [p for p in m.parameters(recurse=False)
                    if p in self._index]
            if mine:
                self._hooks.append((m, m.register_forward_pre_hook(
                    self._wait_hook(mine))))

    def _grad_hook(self, p):
        ref = weakref.ref(self)

        def hook(*_):
            self = ref()
            if self is None:
                return
            self._delay[p] -= 1
            if self._delay[p] <= 0:
                self._push(p)
        return hook

    def _push(self, p):
        g = p.grad
        if g is None:
            g = torch.zeros_like(p)
        g = g.detach().contiguous()
        key = self._keys[p]
        if p in self._held:  # the previous step of this key first
            self._c.kv.wait(key)
        self._held[p] = g    # alive and unchanged until pulled
        self._c.kv.pushpull(key, _np_view(g), out=_np_view(p.data),
                            priority=-self._index[p], block=False)
        p.grad = None        # the servers have it now
        self._delay[p] = self._passes
        self._sent.add(p)

    def _wait_hook(self, params):
        keys = [self._keys[p] for p in params]
        ref = weakref.ref(self)

        def hook(module, inputs):
            self = ref()
            if self is None:
                return
            self._c.kv.wait(keys)
            for p in params:
                self._held.pop(p, None)
        return hook

    def step(self, closure=None):
        """End of a step: push the gradients no backward pass produced
        (zeros), so every worker pushes every key once per step.  Waits
        for nothing; forward pre-hooks wait per module."""
        loss = closure() if closure is not None else None
        for _, p in self._params:
            if p not in self._sent:
                self._push(p)
        self._sent.clear()
        return loss

    def zero_grad(self, set_to_none=True):
        """Gradients are handed to the servers (p.grad is None after
        backward); this clears any left by other code."""
        for _, p in self._params:
            p.grad = None

    def synchronize(self):
        """Wait until every parameter holds the servers' newest value."""
        self._c.kv.wait([self._keys[p] for _, p in self._params])
        self._held.clear()

    def remove(self):
        """Detach the hooks (the servers keep the parameters)."""
        self.synchronize()
        for _, h in self._hooks:
            h.remove()
        self._hooks = []
