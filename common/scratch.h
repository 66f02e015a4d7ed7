/* SPDX-License-Identifier: MIT */
/*
 * A cache of big scratch buffers for requests that need one per call (a
 * row-sparse push packs its distinct rows, a pull lands its answers, the
 * ids are sorted through a pair array).  malloc hands a freed block of a
 * few hundred KiB or more back to the kernel (munmap, or a heap trim), so
 * a request of the same size next step faults its pages in and clears
 * them again: at 8,192 rows of 256 bytes a step, that was a quarter of a
 * worker's time.  A buffer put back here is kept (up to PSD_SCRATCH_SLOTS
 * buffers and PSD_SCRATCH_MAX_BYTES in all) and the next get of at most
 * its size takes it, pages still mapped.
 *
 * Thread-safe (its own mutex): a get and a put may run on any thread.
 */
#ifndef PSCHED_COMMON_SCRATCH_H
#define PSCHED_COMMON_SCRATCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define PSD_SCRATCH_SLOTS     16
#define PSD_SCRATCH_MAX_BYTES (256ull << 20)
/* Smaller buffers are plain malloc/free: malloc keeps them itself. */
#define PSD_SCRATCH_MIN_BYTES (64ull << 10)

struct psd_scratch {
	pthread_mutex_t lock;
	void *buf[PSD_SCRATCH_SLOTS]; /* kept buffers (their data), or NULL */
	size_t cap[PSD_SCRATCH_SLOTS];
	size_t kept;	 /* bytes kept */
	uint64_t reused; /* gets served from a kept buffer */
};

/* 0 or -errno. */
int psd_scratch_init(struct psd_scratch *s);
/* Frees what is kept; safe after a failed init (zeroed storage). */
void psd_scratch_fini(struct psd_scratch *s);
/*
 * At least @bytes bytes (uninitialised, 16-byte aligned): the smallest
 * kept buffer that fits, else a new one.  NULL without memory.  Give it
 * back with psd_scratch_put() (never free()).
 */
void *psd_scratch_get(struct psd_scratch *s, size_t bytes);
/* Give back @p (from psd_scratch_get of @s; NULL is a no-op): kept when
 * there is room (evicting a smaller kept buffer if need be), else freed. */
void psd_scratch_put(struct psd_scratch *s, void *p);

/* The process's blocks of raw-family messages (psched_raw_alloc(),
 * psched_raw_keep()). */
extern struct psd_scratch psd_raw_blocks;

#endif
