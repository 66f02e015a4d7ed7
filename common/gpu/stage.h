/* SPDX-License-Identifier: MIT */
/*
 * Staging of device (GPU) tensors through pinned host memory.
 *
 * A pool of pinned host memory (one arena of @nslots slots of @slot_bytes,
 * allocated once, reused for every message) and the push pipeline of one
 * sender thread: while chunk i goes out on the network, the device-to-host
 * copy of chunk i+1 runs ("ahead").  Pulls land in a run of slots and are
 * copied host-to-device from there.
 *
 * The copies themselves are behind struct psd_copy_ops, so the pipeline
 * (order, reuse, overlap) runs and is tested without a GPU: the CUDA copier
 * is in gpu.h (psd_gpu_copy_ops), a fake one in tests/unit/test_stage.c.
 *
 * Locking: every function takes s->lock itself; the push pipeline
 * (psd_stage_push_*) has one caller thread at a time (the worker's sender).
 */
#ifndef PSCHED_COMMON_GPU_STAGE_H
#define PSCHED_COMMON_GPU_STAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum psd_copy_dir {
	PSD_COPY_D2H = 0,
	PSD_COPY_H2D = 1,
};

struct psd_copy_ops {
	/* Pinned host memory of @len bytes into *@out; 0 or -errno. */
	int (*host_alloc)(void *ctx, size_t len, void **out);
	void (*host_free)(void *ctx, void *p);
	/* Start copying @len bytes from @src to @dst on stream @stream of
	 * @device; returns before the copy is done.  0 or -errno. */
	int (*copy)(void *ctx, enum psd_copy_dir dir, int device, void *dst,
		    const void *src, size_t len, unsigned stream);
	/* Wait until every copy started on @stream is done; 0 or the error
	 * of a failed copy. */
	int (*sync)(void *ctx, unsigned stream);
	/* Message of the last failed call, for error texts (may be NULL). */
	const char *(*errmsg)(void *ctx);
};

/* A run of slots held by one message. */
struct psd_stage_buf {
	uint8_t *host;
	size_t len;
	unsigned first; /* first slot */
	unsigned n;	/* slots; 0 = holds nothing */
	unsigned stream;
};

struct psd_stage_stats {
	uint64_t d2h;		/* device-to-host copies started */
	uint64_t h2d;		/* host-to-device copies started */
	uint64_t ahead_hits;	/* takes served by a copy started ahead */
	uint64_t ahead_dropped; /* copies ahead thrown away (order changed) */
	uint64_t waits;		/* gets that had to wait for a slot */
	unsigned max_used;	/* high-water mark of slots in use */
	unsigned allocs;	/* host_alloc calls (1: the arena) */
};

struct psd_stage {
	const struct psd_copy_ops *ops;
	void *ctx;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a slot came free */
	uint8_t *arena;
	size_t slot_bytes;
	unsigned nslots; /* 1..64 */
	uint64_t used;	 /* bit i: slot i in use */
	unsigned nstreams;
	unsigned next_stream;
	/* The push pipeline's copy started ahead. */
	bool ahead_on;
	uint64_t ahead_tag;
	const void *ahead_src;
	int ahead_dev;
	struct psd_stage_buf ahead;
	struct psd_stage_stats st;
};

#define PSD_STAGE_MAX_SLOTS 64u

/* 0, -EINVAL (bad sizes, named by psd_set_errmsg) or the allocator's
 * error. */
int psd_stage_init(struct psd_stage *s, const struct psd_copy_ops *ops,
		   void *ctx, size_t slot_bytes, unsigned nslots,
		   unsigned nstreams);
/* Waits for a copy still running ahead; frees the arena. */
void psd_stage_fini(struct psd_stage *s);
/* Bytes of the largest message the pool can stage. */
size_t psd_stage_capacity(const struct psd_stage *s);

/* A contiguous run of slots for @len bytes.  -EAGAIN: none free now;
 * -E2BIG: larger than the pool.  psd_stage_get_wait() waits up to
 * @timeout_ms for one (-ETIMEDOUT). */
int psd_stage_get(struct psd_stage *s, size_t len, struct psd_stage_buf *b);
int psd_stage_get_wait(struct psd_stage *s, size_t len, unsigned timeout_ms,
		       struct psd_stage_buf *b);
/* Give @b's slots back (a no-op for an empty @b). */
void psd_stage_put(struct psd_stage *s, struct psd_stage_buf *b);

/* Copy @len bytes from @b (or any host memory @src) to device memory
 * @dst and wait for it.  0 or the copier's error. */
int psd_stage_h2d(struct psd_stage *s, int device, void *dst, const void *src,
		  size_t len);

/*
 * Push pipeline.  psd_stage_push_take() returns in @b the @len bytes at
 * device address @src, copied and complete: from the copy started ahead
 * for @tag if there is one (a hit), else copied now (a copy ahead for
 * another tag is waited for and dropped first).  psd_stage_push_ahead()
 * starts the copy of the next message (@tag) if slots are free and none
 * is ahead already; it never blocks on the network or on slots.  The
 * caller sends from @b and then puts it back.  @tag identifies a message
 * for good (the worker uses request id and chunk index).
 */
int psd_stage_push_take(struct psd_stage *s, uint64_t tag, int device,
			const void *src, size_t len, unsigned timeout_ms,
			struct psd_stage_buf *b);
bool psd_stage_push_ahead(struct psd_stage *s, uint64_t tag, int device,
			  const void *src, size_t len);
/* Throw away the copy ahead, if any (waits for it). */
void psd_stage_push_drop(struct psd_stage *s);

void psd_stage_stats(struct psd_stage *s, struct psd_stage_stats *out);

#endif
