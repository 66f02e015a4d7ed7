/* SPDX-License-Identifier: MIT */
/* What app/kvstore.c (calls, waits) and app/kvstore_life.c (create,
 * configure, destroy) share: the store, its keys and their requests. */
#ifndef PSCHED_APP_KVSTORE_INT_H
#define PSCHED_APP_KVSTORE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "map.h"
#include "updater.h"

enum kvstore_kind {
	KVSTORE_LOCAL = 0,
	KVSTORE_SYNC = 1,
	KVSTORE_ASYNC = 2,
};

enum kvstore_op_state {
	OP_PENDING = 0, /* issued, nobody waits yet */
	OP_WAITING = 1, /* a thread is in psched_wait() for it */
	OP_DONE = 2,
};

/* One issued request; referenced by the keys it names. */
struct kvstore_op {
	uint64_t req;
	int state;
	int err;
	bool reported;
	char *msg; /* on error */
	unsigned refs;
};

struct kvstore_key {
	uint64_t key;
	uint8_t dtype;
	uint64_t nbytes;
	uint8_t *value; /* "local": the stored value */
	struct kvstore_op **ops;
	unsigned nops;
	unsigned ops_cap;
};

struct psched_kvstore {
	enum kvstore_kind kind;
	char type[32]; /* the name it was created with */
	struct psched_node *node;
	int rank;
	int nworkers;
	pthread_mutex_t lock;	/* guards everything below */
	pthread_cond_t cond;	/* an op became done */
	struct psd_map keys;	/* key -> struct kvstore_key */
	struct psd_updater upd; /* "local" */
};

/* kvstore.c: drop a reference to @op (freed with the last). */
void psd_kvstore_op_put(struct kvstore_op *op);
/* kvstore_life.c: rank 0 configures the servers (sync mode @mode, or the
 * optimizer @opt), then every worker meets at a barrier. */
int psd_kvstore_configure(struct psched_kvstore *kv, const char *mode,
			  const struct psched_optimizer *opt);

#endif
