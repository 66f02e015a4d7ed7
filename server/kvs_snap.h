/* SPDX-License-Identifier: MIT */
/*
 * Snapshots, private to server/kvs_snap.c (taking, restoring, dense keys)
 * and kvs_snap_rows.c (row-sparse tables).  Van thread only.
 */
#ifndef PSCHED_SERVER_KVS_SNAP_H
#define PSCHED_SERVER_KVS_SNAP_H

#include <pthread.h>

#include "kvs.h"
#include "snapfile.h"

struct kvs_rows;

/* Dense record: u64 key, total, off, len, version; u8 dtype, 7 zero. */
#define SNAP_DENSE_HEAD 48u
/* States record: char optimizer name[16], then state records. */
#define SNAP_STATES_HEAD 16u
/* Rows record: u64 key, total, rowbytes, version, nrows, state bytes
 * per row; u8 dtype, 7 zero; char optimizer name[16]; then the ids, the
 * rows, the rows' states. */
#define SNAP_ROWS_HEAD 72u
#define SNAP_HEAD_MAX  SNAP_ROWS_HEAD

struct snap_item {
	uint32_t kind;
	uint8_t head[SNAP_HEAD_MAX];
	size_t head_len;
	void *data; /* the copy: malloc'd, or psd_big_alloc()'d when big */
	size_t data_len;
	bool big;
};

struct psd_kvs_snap {
	char dir[1024];
	uint64_t every;
	uint64_t step; /* being collected, 0: none */
	/* Added to a periodic snapshot's step in its file's label: the
	 * restored snapshot's step (steps count from 0 again after it). */
	uint64_t base;
	uint64_t last; /* the last step begun */
	struct snap_item *items;
	size_t nitems, cap;
	uint64_t captured; /* keys copied at step */
	uint64_t nstepped; /* keys with a step applied */
	uint64_t kept[2];  /* this server's last two files, older first */
	pthread_t th;
	bool th_live;
	bool rows_warned; /* periodic snapshots leave tables out: said */
	bool demand;	  /* the one being written was asked for */
	/* Restoring. */
	bool restoring;
	struct psd_snap_set set;
};

/* A new item of the snapshot being collected (zeroed), or NULL. */
struct snap_item *psd_snap_item_new(struct psd_kvs_snap *sn);

/* kvs_snap_rows.c */
/* Copy row-sparse key @e's stored rows (and their states). */
int psd_snap_rows_copy(struct psd_kvs *s, struct psd_kvs_snap *sn,
		       struct kvs_rows *e);
/* Is @body (@blen bytes) a well-formed rows record? */
bool psd_snap_rows_ok(const uint8_t *body, uint64_t blen);

#endif
