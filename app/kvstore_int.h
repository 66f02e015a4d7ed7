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
	uint8_t *value; /* "local": the stored value (row-sparse: the table) */
	uint64_t rows;	/* row-sparse keys (kvstore_rows.c): rows, else 0 */
	uint64_t width; /* elements per row */
	struct psd_map rowst; /* "local" row-sparse: row -> optimizer state */
	unsigned rowst_ns;    /* state arrays per element in rowst */
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
	bool opt_set;		/* an optimizer was set (and not removed) */
};

/* kvstore.c, lock held: the entry of @key (NULL if none); a new, empty
 * entry for @key (absent so far), or NULL for no memory. */
struct kvstore_key *psd_kvstore_key_find(struct psched_kvstore *kv,
					 uint64_t key);
struct kvstore_key *psd_kvstore_key_add(struct psched_kvstore *kv,
					uint64_t key);
/* kvstore_rows.c: free what a row-sparse key holds beyond the entry. */
void psd_kvstore_rows_fini(struct kvstore_key *k);
/* kvstore.c: drop a reference to @op (freed with the last). */
void psd_kvstore_op_put(struct kvstore_op *op);
/* kvstore_life.c: rank 0 configures the servers (sync mode @mode, or the
 * optimizer @opt), then every worker meets at a barrier. */
int psd_kvstore_configure(struct psched_kvstore *kv, const char *mode,
			  const struct psched_optimizer *opt);

#endif
