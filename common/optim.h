/* SPDX-License-Identifier: MIT */
/*
 * Optimizers, private to common/: the update rules of
 * include/psched/kvstore.h (optim_rules.c), the state records that
 * save/load moves (optim_state.c), and the ServerCommand form of an
 * optimizer (optim_proto.c).  common/updater.c ties them together.
 */
#ifndef PSCHED_COMMON_OPTIM_H
#define PSCHED_COMMON_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "psched/kvstore.h"

enum psd_opt_kind {
	PSD_OPT_SGD = 0,
	PSD_OPT_NAG,
	PSD_OPT_ADAM,
	PSD_OPT_ADAMW,
	PSD_OPT_RMSPROP,
	PSD_OPT_ADAGRAD,
	PSD_OPT_SIGNUM,
	PSD_OPT_TEST, /* MXNet's test optimizer: w += rescale_grad * g */
	PSD_OPT_COUNT,
};

/* Most state arrays a rule keeps per element (centered rmsprop). */
#define PSD_OPT_MAX_STATE 3

/* The scalars a rule reads, with the key's multipliers applied. */
struct psd_opt_params {
	enum psd_opt_kind kind;
	double lr, wd, rescale, clip, momentum;
	double beta1, beta2, eps, gamma1, gamma2, wd_lh, clip_weights;
	bool centered, correct_bias;
};

/* The kind of optimizer @name, or -1. */
int psd_opt_kind_of(const char *name);
const char *psd_opt_name(enum psd_opt_kind kind);
/* State arrays per element that @o keeps (0..PSD_OPT_MAX_STATE). */
unsigned psd_opt_nstate(const struct psched_optimizer *o);
/* @p from @o, for a key with multipliers @lr_mult, @wd_mult. */
void psd_opt_params_of(const struct psched_optimizer *o, double lr_mult,
		       double wd_mult, struct psd_opt_params *p);
/* One element: weight @w, gradient @g, states @s[0..nstate), @t the
 * update count including this one (>= 1). */
void psd_opt_step(const struct psd_opt_params *p, double *w, double g,
		  double *s, uint32_t t);

/*
 * State records (docs/optimizers.md), little-endian:
 *   u64 key, u64 total (key bytes), u64 off, u64 len (the byte range),
 *   u8 dtype, u8 nstate, u8 master (0/1), u8 esize (4 or 8 bytes per
 *   state element), u32 zero; then nstate state arrays, the master
 *   array (float32) when master, and u32 update counts, each of
 *   len / dtype size elements.
 */
#define PSD_OPT_REC_HDR 40

struct psd_opt_rec {
	uint64_t key, total, off, len;
	uint8_t dtype, nstate, master, esize;
	uint64_t n;				   /* elements */
	const uint8_t *arr[PSD_OPT_MAX_STATE + 1]; /* states, then master */
	const uint8_t *cnt;			   /* u32 per element */
};

/* Bytes of a record of @n elements. */
uint64_t psd_opt_rec_size(uint64_t n, unsigned nstate, bool master,
			  unsigned esize);
/* Parse the record at @buf (@len bytes left): 0 and *@used, or -EPROTO
 * with psched_errmsg() saying why. */
int psd_opt_rec_parse(const uint8_t *buf, size_t len, struct psd_opt_rec *r,
		      size_t *used);
/* Write a record header at @buf. */
void psd_opt_rec_put_hdr(uint8_t *buf, const struct psd_opt_rec *r);

/* File: "PSCHOPTS", u32 version 1, char name[16] (NUL padded),
 * records..., u32 CRC-32 (IEEE) of everything before it. */
#define PSD_OPT_FILE_MAGIC   "PSCHOPTS"
#define PSD_OPT_FILE_VERSION 1u
#define PSD_OPT_FILE_HDR     28

/* Write @name's header, @recs, the CRC to @path (via a temporary file
 * renamed into place).  0 or -errno, psched_errmsg() set. */
int psd_opt_file_write(const char *path, const char *name, const void *recs,
		       size_t len);
/* Read and check @path: *@buf (caller frees) holds the whole file,
 * records at *@recs for *@len bytes, *@name the optimizer. */
int psd_opt_file_read(const char *path, uint8_t **buf, const uint8_t **recs,
		      size_t *len, char name[16]);

/* optim_proto.c: the ServerCommand form.  to_proto points into @o (keep
 * it alive while @po is used); from_proto points into @po; -EINVAL when
 * the multiplier lists differ in length. */
struct Psched__Optimizer;
void psd_opt_to_proto(const struct psched_optimizer *o,
		      struct Psched__Optimizer *po);
int psd_opt_from_proto(const struct Psched__Optimizer *po,
		       struct psched_optimizer *o);

/* Bytes of optimizer records per ServerCommand / CommandAck. */
#define PSD_OPT_PIECE (768u << 10)

#endif
