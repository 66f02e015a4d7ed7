/* SPDX-License-Identifier: MIT */
/*
 * psched KVStore: an MXNet-shaped key-value store over the node API
 * (include/psched.h), plus the server-side updaters it configures.
 *
 * A KVStore is created with a type:
 *   "local"      one process, no servers: push stores (or, with an
 *                optimizer, applies) the pushed value in this process;
 *   "dist_sync"  a worker of a psched job (DMLC_* environment): the
 *                servers sum the W workers' pushes of a step, then apply
 *                the updater; pulls see the result of the whole step;
 *   "dist_async" the servers apply every push at once.
 * ("device", "local_update_cpu", "local_allreduce_cpu" and
 * "local_allreduce_device" are taken as "local", "dist",
 * "dist_device_sync" and "dist_sync_device" as "dist_sync", as MXNet
 * scripts spell them; names match in any case, and psched_kvstore_type()
 * returns the name given, lower-cased, as MXNet's type.)
 *
 * Keys are uint64_t; a key's dtype and size are fixed by init.  Priority
 * follows MXNet: larger = more urgent (the node API's smaller = sooner is
 * its negation).  Every call returns 0 or a negative code (include/
 * psched.h), with psched_errmsg() naming the key; nothing aborts.
 *
 * Threads: a KVStore may be used from several threads; calls on one key
 * are issued in call order.
 */
#ifndef PSCHED_INCLUDE_PSCHED_KVSTORE_H
#define PSCHED_INCLUDE_PSCHED_KVSTORE_H

#include "../psched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libpsched is built with -fvisibility=hidden: what is declared here is
 * its whole exported interface. */
#pragma GCC visibility push(default)

/*
 * An optimizer applied where values are aggregated (on the servers, or in
 * process for "local"), with MXNet's update rules and parameter names.
 * Per element, with g the aggregate (the sum of the workers' pushes):
 *
 *   g  = rescale_grad * g, clipped to [-clip_gradient, clip_gradient] when
 *        clip_gradient > 0; lr = learning_rate * lr_mult[key],
 *        wd = wd * wd_mult[key] (multipliers default to 1)
 *   sgd      momentum == 0: w -= lr * (g + wd * w)
 *            else: m = momentum * m - lr * (g + wd * w); w += m
 *   nag      g += wd * w; m = momentum * m + lr * g;
 *            w -= momentum * m + lr * g
 *   adam     g += wd * w; m = beta1 * m + (1 - beta1) * g;
 *            v = beta2 * v + (1 - beta2) * g^2;
 *            w -= c * lr * m / (sqrt(v) + epsilon)
 *   adamw    (decoupled decay) m, v as adam on g without wd;
 *            w -= lr * (c * m / (sqrt(v) + epsilon) + wd * w)
 *            c = sqrt(1 - beta2^t) / (1 - beta1^t) (bias correction; t =
 *            the element's update count, from 1), or 1 when correct_bias
 *            is 0 (adamw only; adam always corrects)
 *   rmsprop  g += wd * w; centered == 0: n = gamma1 * n + (1 - gamma1) *
 *            g^2; w -= lr * g / sqrt(n + epsilon);
 *            centered: n as above, a = gamma1 * a + (1 - gamma1) * g,
 *            d = gamma2 * d - lr * g / sqrt(n - a^2 + epsilon); w += d;
 *            then w is clipped to [-clip_weights, clip_weights] when
 *            clip_weights > 0
 *   adagrad  g += wd * w; h += g^2; w -= lr * g / (sqrt(h) + epsilon)
 *   signum   g += wd * w; momentum > 0: m = momentum * m + (1 - momentum)
 *            * g, w = (1 - lr * wd_lh) * w - lr * sign(m); else
 *            w = (1 - lr * wd_lh) * w - lr * sign(g)
 *   test     w += rescale_grad * g (MXNet 1.x's test optimizer: no
 *            learning rate, weight decay or clipping)
 *
 * States start at 0 per key.  Float keys only (float16 and bfloat16 in
 * float32, float64 in float64); integer keys keep the default (the
 * aggregate replaces the value).  multi_precision: float16/bfloat16 keys
 * keep a float32 master copy of the weight that the rule updates (the
 * stored weight is its rounding), as MXNet's mp_* updates.
 * @name: "sgd", "nag", "adam", "adamw", "rmsprop", "adagrad", "signum",
 * "test", or "" / NULL for the default (no optimizer).  Fields an optimizer
 * does not use are ignored.
 */
struct psched_optimizer {
	const char *name;
	double learning_rate; /* finite (MXNet: negative too) */
	double momentum;      /* [0, 1): sgd, nag, signum */
	double wd;	      /* >= 0 */
	double rescale_grad;  /* > 0 */
	double clip_gradient; /* <= 0: no clipping */
	/* Fields below: since issue 13 (psched_optimizer_init() sets them). */
	double beta1;	     /* [0, 1): adam, adamw */
	double beta2;	     /* [0, 1): adam, adamw */
	double epsilon;	     /* > 0: adam, adamw, rmsprop, adagrad */
	double gamma1;	     /* [0, 1): rmsprop */
	double gamma2;	     /* [0, 1): rmsprop (centered) */
	double wd_lh;	     /* >= 0: signum */
	double clip_weights; /* <= 0: none; rmsprop */
	int centered;	     /* rmsprop */
	int correct_bias;    /* adamw */
	int multi_precision;
	/* Per-key multipliers: key mult_keys[i] uses lr_mult[i] and
	 * wd_mult[i] (either array may be NULL: 1).  Copied by the call that
	 * takes the optimizer. */
	size_t nmult;
	const uint64_t *mult_keys;
	const double *lr_mult; /* >= 0 */
	const double *wd_mult; /* >= 0 */
};

/* MXNet's SGD defaults: "sgd", lr 0.01, momentum 0, wd 0, rescale 1, no
 * clipping, and the defaults of every other optimizer's fields (beta1
 * 0.9, beta2 0.999, epsilon 1e-8, gamma1 0.9, gamma2 0.9, wd_lh 0,
 * correct_bias 1, no multipliers). */
void psched_optimizer_init(struct psched_optimizer *opt);
/*
 * psched_optimizer_init(), then MXNet's defaults of optimizer @name
 * (learning_rate 0.01 for sgd, nag, signum and adagrad, 0.001 for adam,
 * adamw and rmsprop; momentum 0.9 for signum; epsilon 1e-6 for adagrad).
 * -EINVAL (psched_errmsg() lists the names) for an unknown @name.
 */
int psched_optimizer_defaults(struct psched_optimizer *opt, const char *name);
/* 0, or -EINVAL with psched_errmsg() naming the bad field. */
int psched_optimizer_check(const struct psched_optimizer *opt);

/*
 * A custom updater: fold @merged (the aggregate of this step: the sum of
 * the workers' pushes, or one push in async mode) into @stored, in place.
 * Both hold @nbytes bytes of @dtype starting at byte @offset of key @key's
 * tensor (a server holds a byte range of every key).  Runs on the server's
 * receive thread (the caller's thread for "local"): it must not block and
 * must not call psched.  It replaces any optimizer, and vice versa.
 */
typedef void psched_updater_fn(uint64_t key, enum psched_dtype dtype,
			       uint64_t offset, void *stored,
			       const void *merged, uint64_t nbytes, void *arg);

/*
 * Server side: install @fn (NULL: back to the default, the aggregate
 * replaces the value) on a server node made with psched_node_create(), for
 * programs that embed a server:
 *
 *	psched_cfg_set(cfg, "role", "server");
 *	psched_node_create(cfg, &node);
 *	psched_server_set_updater(node, my_update, my_state);
 *	psched_node_run(node);
 *
 * Steps completed before the call used the previous updater.  Any thread.
 * -EINVAL if @node is not a server.
 */
int psched_server_set_updater(struct psched_node *node, psched_updater_fn *fn,
			      void *arg);

/*
 * Worker side: configure every server's store, and wait (at most
 * @timeout_ms, 0 = the node's request timeout) until each one accepted.
 * @mode: NULL (unchanged), "sync" or "async": switching is refused
 * (-EBUSY) once keys have been pushed.  @opt: NULL (unchanged) or the
 * optimizer to apply from the next step on (psched_optimizer_check()
 * rules; servers check again).  A server's refusal comes back as its
 * error code, psched_errmsg() naming the server and its reason.
 */
int psched_servers_configure(struct psched_node *node, const char *mode,
			     const struct psched_optimizer *opt,
			     unsigned timeout_ms);

/*
 * Application commands to the servers (MXNet's _send_command_to_servers
 * and its server controller).  A server's controller gets each command a
 * worker sends: @head and @len bytes of @body, on the server's receive
 * thread (@node is the server: it may call psched_server_set_updater()).
 * It returns 0 or a negative errno; then @msg (@msglen bytes, "" on entry)
 * may say why, and the worker's psched_servers_command() fails with that
 * code, naming the server and the reason.
 */
typedef int psched_server_controller_fn(struct psched_node *node, int head,
					const void *body, size_t len, char *msg,
					size_t msglen, void *arg);
/* Install @fn (NULL: none; commands are then refused) on server @node
 * (-EINVAL if it is not a server), or with @node NULL for every server
 * node of this process without its own; set that before
 * psched_node_create() so that no command can arrive before it. */
int psched_server_set_controller(struct psched_node *node,
				 psched_server_controller_fn *fn, void *arg);
/* Worker: send a command to every server's controller and wait (at most
 * @timeout_ms, 0 = the request timeout) until each one took it. */
int psched_servers_command(struct psched_node *node, int head, const void *body,
			   size_t len, unsigned timeout_ms);

/*
 * Worker, collective over the workers: every server copies what it holds
 * (dense keys and their optimizer states, row-sparse tables and their
 * rows' states) as the snapshot of @step (not 0) and writes it into its
 * PS_SNAPSHOT_DIR (docs/snapshots.md), off the van thread.  Call it
 * between steps, with this worker's requests complete: a barrier, rank 0
 * asks every server, a barrier.  Rank 0 returns a server's refusal (no
 * PS_SNAPSHOT_DIR; a step still open: -EBUSY), the others the barrier's
 * status.  Returns once the servers have copied, before the files are
 * on disk.
 */
int psched_snapshot(struct psched_node *node, uint64_t step,
		    unsigned timeout_ms);

struct psched_kvstore;

/*
 * Create a KVStore of @type.  For a dist type, @cfg (NULL: defaults, then
 * the DMLC_* / PS_* environment) describes the job; the call joins it as
 * a worker (psched_node_create()), and rank 0 sets the servers' mode.
 * Collective over the workers.  On 0 *@out is the caller's, freed with
 * psched_kvstore_destroy().
 */
int psched_kvstore_create(const char *type, const struct psched_cfg *cfg,
			  struct psched_kvstore **out);
/* Wait for outstanding requests, leave the job, free.  NULL is a no-op.
 * Returns 0 or the first error seen. */
int psched_kvstore_destroy(struct psched_kvstore *kv);
/* The type name @kv was created with (e.g. "device", "dist"). */
const char *psched_kvstore_type(const struct psched_kvstore *kv);
int psched_kvstore_rank(const struct psched_kvstore *kv);
int psched_kvstore_num_workers(const struct psched_kvstore *kv);
/* The worker node of a dist store (NULL for "local"). */
struct psched_node *psched_kvstore_node(struct psched_kvstore *kv);

/*
 * Declare @nkeys keys, key i holding @lens[i] bytes of @dtype, with
 * initial values @vals (collective: rank 0's values win, every worker
 * returns once they are stored).  A key is initialised once (-EEXIST).
 */
int psched_kvstore_init(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys, const void *const *vals,
			const uint64_t *lens, enum psched_dtype dtype);

/*
 * push: add @vals to the keys' aggregate of this step.
 * pull: copy each key's value into @outs[i] (@lens[i] = buffer bytes, at
 * least the key's size; only the key's size is written) once it includes
 * this worker's pushes so far.
 * pushpull: both, in one round trip.
 * The keys must be initialised, distinct, and of @dtype; @lens must match
 * (push) or hold (pull) each key's size: otherwise PSCHED_EUNKNOWNKEY,
 * -EINVAL (dtype, duplicate key) or PSCHED_ESIZE, before anything is sent.
 *
 * Asynchronous for dist stores: they return once the request is issued.
 * The buffers are used in place and must stay valid (and unchanged for a
 * push) until psched_kvstore_wait() covering the keys returns; that call
 * reports the request's error.  For "local" they complete before return.
 */
int psched_kvstore_push(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys, const void *const *vals,
			const uint64_t *lens, enum psched_dtype dtype,
			int priority);
int psched_kvstore_pull(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys, void *const *outs, const uint64_t *lens,
			enum psched_dtype dtype, int priority);
int psched_kvstore_pushpull(struct psched_kvstore *kv, const uint64_t *keys,
			    size_t nkeys, const void *const *vals,
			    void *const *outs, const uint64_t *lens,
			    enum psched_dtype dtype, int priority);

/*
 * The same with every buffer in memory of CUDA device @device (e.g. torch
 * CUDA tensors' data_ptr()): staged by the worker through pinned host
 * memory, never copied by the caller (psched.h, psched_request() with
 * on_device).
 * Dist stores only (-EINVAL for "local"); -ENODEV when this build, the
 * machine or @device has no CUDA, with psched_errmsg() saying which.
 */
int psched_kvstore_push_device(struct psched_kvstore *kv, const uint64_t *keys,
			       size_t nkeys, const void *const *vals,
			       const uint64_t *lens, enum psched_dtype dtype,
			       int device, int priority);
int psched_kvstore_pull_device(struct psched_kvstore *kv, const uint64_t *keys,
			       size_t nkeys, void *const *outs,
			       const uint64_t *lens, enum psched_dtype dtype,
			       int device, int priority);
int psched_kvstore_pushpull_device(struct psched_kvstore *kv,
				   const uint64_t *keys, size_t nkeys,
				   const void *const *vals, void *const *outs,
				   const uint64_t *lens,
				   enum psched_dtype dtype, int device,
				   int priority);

/*
 * Row-sparse keys (MXNet's row_sparse values; embedding tables) in every
 * store type: key @key is a table of @rows rows of @width elements of
 * @dtype.  init declares it with rows @ids (@nids of them; @vals: @nids x
 * width elements, row i for id @ids[i]) holding those values and every
 * other row zero (collective for dist stores: rank 0's rows are stored,
 * the others' ignored, through one step every worker takes; NULL / 0: all
 * zero).  push folds @nrows rows (@rows: @nrows x width elements, row i
 * for @ids[i]; repeated ids summed; @nrows 0 is a step too) into the
 * table: by default each row pushed is replaced by the step's sum of it
 * (dist_async: the sum is added), an optimizer or updater updates only
 * the rows pushed (lazy update), rows not pushed keep their values.
 * pull copies rows @ids (any order, repeats allowed) into @out (@nrows x
 * width elements).  pushpull is a push of (@ids, @rows) and a pull of the
 * same ids into @out once that step is applied.  Dist stores use the
 * node's row-sparse requests (psched_request() of PSCHED_FAMILY_ROWS,
 * include/psched.h), "local" stores keep the table in this process.
 * All four block until done.  -EINVAL for a row id >= rows, a bad shape
 * or dtype, a dense key (and a row-sparse key in the dense calls),
 * PSCHED_EUNKNOWNKEY for a key never initialised, -EEXIST for a second
 * init.  Dist stores: init with rows after an optimizer was set is
 * refused on rank 0 (-EINVAL, the key is declared zero): the rows would
 * go through the optimizer.
 */
int psched_kvstore_row_sparse_init(struct psched_kvstore *kv, uint64_t key,
				   uint64_t rows, uint64_t width,
				   enum psched_dtype dtype, size_t nids,
				   const uint64_t *ids, const void *vals);
int psched_kvstore_row_sparse_push(struct psched_kvstore *kv, uint64_t key,
				   size_t nrows, const uint64_t *ids,
				   const void *rows, int priority);
int psched_kvstore_row_sparse_pull(struct psched_kvstore *kv, uint64_t key,
				   size_t nrows, const uint64_t *ids, void *out,
				   int priority);
int psched_kvstore_row_sparse_pushpull(struct psched_kvstore *kv, uint64_t key,
				       size_t nrows, const uint64_t *ids,
				       const void *rows, void *out,
				       int priority);

/*
 * Wait for every request issued so far on @keys (all keys when @keys is
 * NULL).  Returns 0 or the first failed request's error (psched_errmsg()
 * names its key); each failure is reported once.
 */
int psched_kvstore_wait(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys);

/*
 * Have the requests issued so far on @keys (all keys when NULL) completed?
 * 1 yes (a psched_kvstore_wait() on them returns at once), 0 not yet, or
 * a negative error.  Never blocks.
 */
int psched_kvstore_test(struct psched_kvstore *kv, const uint64_t *keys,
			size_t nkeys);

/* Wait until every worker reaches the barrier (no-op for "local"). */
int psched_kvstore_barrier(struct psched_kvstore *kv);

/*
 * Apply @opt where values are aggregated from now on (collective for dist
 * stores: rank 0 configures the servers, then the workers meet at a
 * barrier).  Call it before pushing.
 */
int psched_kvstore_set_optimizer(struct psched_kvstore *kv,
				 const struct psched_optimizer *opt);
/*
 * "local" only: a custom updater (NULL: default).  Dist stores take theirs
 * on the servers (psched_server_set_updater()); -EOPNOTSUPP here.
 */
int psched_kvstore_set_updater(struct psched_kvstore *kv, psched_updater_fn *fn,
			       void *arg);

/*
 * Save the optimizer states of every key (momentum, moments, update
 * counts, float32 master weights: what the installed optimizer keeps)
 * to file @path, or load them from it, in the format of
 * docs/optimizers.md (magic, version, optimizer name, records of key
 * byte ranges, CRC-32).  Dist stores fetch or send the states of every
 * server (collective: rank 0 does the transfer, then the workers meet at
 * a barrier; as with set_optimizer, rank 0 returns the transfer's error,
 * the others the barrier's); records map by byte range, so a file loads
 * into any server count or partition size.  Load needs the same optimizer
 * (name and state layout) installed, and every key initialised with the
 * file's dtype and size: else -EINVAL naming the key, and nothing is
 * changed on the refusing server.  Call both between steps (no pushes
 * outstanding).  -EIO/-errno for file errors, -EPROTO for a corrupt file.
 */
int psched_kvstore_save_optimizer_states(struct psched_kvstore *kv,
					 const char *path);
int psched_kvstore_load_optimizer_states(struct psched_kvstore *kv,
					 const char *path);
/* Dist stores: this worker's requests waited for, then psched_snapshot()
 * of @step.  -EOPNOTSUPP for a local store (it has no servers). */
int psched_kvstore_snapshot(struct psched_kvstore *kv, uint64_t step);

/*
 * Gradient compression (MXNet's set_gradient_compression) of this
 * worker's float32 pushes: @type "2bit" (threshold > 0: each element goes
 * out as +threshold, -threshold or 0), "1bit" (+1 or -1, by which side of
 * @threshold it is on), or "none" / NULL (off).  Error feedback: what an
 * element did not send is kept in a per-key residual and added to its
 * next push.  Servers dequantise before summing (common/compress.h has
 * the wire format); other dtypes and pulls are not compressed.  Pushes
 * issued before the call keep their form; a new type or threshold starts
 * the residuals over.  -EINVAL naming the bad type or threshold.
 * node: a worker node; kvstore: a dist store (every worker calls it;
 * "local" has no transfers to compress: -EOPNOTSUPP).
 */
int psched_node_set_gradient_compression(struct psched_node *node,
					 const char *type, double threshold);
int psched_kvstore_set_gradient_compression(struct psched_kvstore *kv,
					    const char *type, double threshold);

/*
 * For launchers that run one script in every role (MXNet's dmlc-tracker
 * style): when the DMLC_ROLE environment says "server" or "scheduler",
 * run that node until the job shuts down and return 0 or its error;
 * otherwise return 1 at once (the caller is a worker).
 */
int psched_kvstore_run_node_from_env(void);
/* The same, a server running with @ctl as its controller (set before it
 * serves); for the Python package's DMLC_ROLE=server path. */
int psched_kvstore_run_server_from_env(psched_server_controller_fn *ctl,
				       void *arg);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
