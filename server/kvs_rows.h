/* SPDX-License-Identifier: MIT */
/*
 * KV server: a row-sparse key's state (kvs_rows.c, which describes the
 * design), shared with the snapshots (kvs_snap_rows.c).  Van thread only.
 */
#ifndef PSCHED_SERVER_KVS_ROWS_H
#define PSCHED_SERVER_KVS_ROWS_H

#include "kvs.h"
#include "kvs_rowtab.h"

struct kvs_rows {
	uint64_t key;
	uint64_t total;
	uint64_t rowbytes;
	uint8_t dtype;
	uint64_t lo; /* rows [lo, lo + n) are this server's */
	uint64_t n;
	int creator;
	struct psd_rows_tab tab;     /* stored rows */
	struct psd_rows_arena val;   /* their values */
	struct psd_rows_arena state; /* optimizer states per stored row */
	uint64_t version;	     /* steps applied */
	/* the open step (version + 1) */
	uint32_t *got;		  /* [nworker] pieces received */
	uint32_t *want;		  /* [nworker] pieces announced, 0 = none yet */
	unsigned wdone;		  /* workers whose pieces are all in */
	struct psd_rows_tab mtab; /* row id -> merge slot */
	struct psd_rows_arena merge;
	struct psd_list pulls; /* struct psd_kvs_wait, ids in buf */
	struct psd_list held;  /* early pushes, payload in buf */
	uint64_t snap_step;    /* the snapshot it was last copied for */
	/* Restored row states are of this optimizer ("": none restored,
	 * or checked against the installed one already). */
	char state_opt[16];
};

struct psd_kvs_rows {
	struct psd_map keys; /* key -> struct kvs_rows */
	uint8_t *rbuf;	     /* pull answers are built here */
	uint64_t rcap;
	uint8_t *hbuf; /* prefix and ids of a push read in place */
	uint64_t hcap;
};

#endif
