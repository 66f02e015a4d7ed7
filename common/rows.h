/* SPDX-License-Identifier: MIT */
/*
 * Row-sparse tensors (embedding tables): the rules worker and server must
 * agree on.  A table of `rows` rows of `rowbytes` bytes each is placed on
 * the servers by row range (server s of S holds rows [rows*s/S,
 * rows*(s+1)/S)), so a request touches only the servers owning its rows.
 * The payload layouts of PSD_F_ROWS messages are in common/wire.h.
 */
#ifndef PSCHED_COMMON_ROWS_H
#define PSCHED_COMMON_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

/* Rows [*lo, *lo + *n) of a table of @rows rows held by server rank @s of
 * @nserver (*n may be 0 when rows < nserver). */
void psd_rows_place(uint64_t rows, unsigned nserver, unsigned s, uint64_t *lo,
		    uint64_t *n);
/* Server rank holding row @id (< @rows). */
unsigned psd_rows_owner(uint64_t rows, unsigned nserver, uint64_t id);

/* The prefix of a PSD_F_ROWS push or pull payload. */
struct psd_rows_prefix {
	uint32_t nrows;	 /* row ids that follow */
	uint32_t pieces; /* push: this worker's pieces of the step here */
};
void psd_rows_prefix_put(uint8_t *buf, const struct psd_rows_prefix *p);
void psd_rows_prefix_get(const uint8_t *buf, struct psd_rows_prefix *p);

/*
 * Check a PSD_F_ROWS push or pull payload (@h already passed
 * psd_hdr_decode()) against the rows [@lo, @lo + @n) its receiver holds:
 * the prefix's row count matches the length, the push's piece count is
 * not zero, every row id is within [lo, lo + n) and the ids are strictly
 * increasing (sorted, no duplicates: the worker sums duplicates before
 * sending).  0, or -EPROTO with the reason in @why (@len bytes).
 */
int psd_rows_check(const struct psd_hdr *h, const uint8_t *payload, uint64_t lo,
		   uint64_t n, char *why, unsigned len);

/* dst += src for @bytes bytes of elements of @dtype (float16 and bfloat16
 * added in float32; raw: src replaces dst). */
void psd_rows_add(uint8_t dtype, void *dst, const void *src, uint64_t bytes);

#endif
