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
 * ("device" is taken as "local", "dist", "dist_device_sync" and
 * "dist_sync_device" as "dist_sync", as MXNet scripts spell them.)
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
 * process for "local"), as MXNet's server-side updater:
 *   g = rescale_grad * merged, clipped to [-clip_gradient, clip_gradient]
 *       when clip_gradient > 0;
 *   momentum == 0: w -= learning_rate * (g + wd * w)
 *   else:          m = momentum * m - learning_rate * (g + wd * w); w += m
 * (m starts at 0 per key).  Applies to float keys (float16 in float32);
 * integer keys keep the default (the aggregate replaces the value).
 * @name: "sgd", or "" / NULL for the default (no optimizer).
 */
struct psched_optimizer {
	const char *name;
	double learning_rate; /* >= 0 */
	double momentum;      /* [0, 1) */
	double wd;	      /* >= 0 */
	double rescale_grad;  /* > 0 */
	double clip_gradient; /* <= 0: no clipping */
};

/* MXNet's SGD defaults: "sgd", lr 0.01, momentum 0, wd 0, rescale 1. */
void psched_optimizer_init(struct psched_optimizer *opt);
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
 *	psched_node_create(&cfg, &node);     // cfg.role = PSCHED_ROLE_SERVER
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
/* "local", "dist_sync" or "dist_async". */
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
 * memory, never copied by the caller (psched.h, psched_push_device()).
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
 * Wait for every request issued so far on @keys (all keys when @keys is
 * NULL).  Returns 0 or the first failed request's error (psched_errmsg()
 * names its key); each failure is reported once.
 */
int psched_kvstore_wait(struct psched_kvstore *kv, const uint64_t *keys,
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
 * For launchers that run one script in every role (MXNet's dmlc-tracker
 * style): when the DMLC_ROLE environment says "server" or "scheduler",
 * run that node until the job shuts down and return 0 or its error;
 * otherwise return 1 at once (the caller is a worker).
 */
int psched_kvstore_run_node_from_env(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
