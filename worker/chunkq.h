/* SPDX-License-Identifier: MIT */
/*
 * Worker-side scheduling data structures (docs/architecture.md, "The
 * credit gate"): the priority queue the sender keeps its chunks in and
 * the credit gate that bounds the bytes in flight.  The partition rule
 * that cuts the chunks is common/partition.h, shared with the server.
 *
 * Pure data structures: no I/O, no allocation except the queue's array, and
 * no locking.  None of these functions is thread-safe: the caller holds the
 * lock that guards the queue and the credit (the sender's lock) around every
 * call, including psd_sched_next().
 */
#ifndef PSCHED_WORKER_CHUNKQ_H
#define PSCHED_WORKER_CHUNKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "partition.h"

#ifndef psd_container_of
/* The struct of @type whose @member @ptr points to. */
#define psd_container_of(ptr, type, member)                                    \
	({                                                                     \
		__typeof__(((type *)0)->member) *psd_mptr_ = (ptr);            \
		(type *)(void *)((char *)psd_mptr_ - offsetof(type, member));  \
	})
#endif

/*
 * Priority queue of chunks: a binary min-heap ordered by (prio ascending,
 * then push order), i.e. lower prio values go first and equal priorities are
 * FIFO.  In FIFO mode prio is ignored and the order is push order only.
 *
 * The caller embeds a struct psd_chunk_node in its own chunk struct and gets
 * back to it with psd_container_of().  The queue stores pointers and owns
 * nothing: a node must stay valid while it is queued, and be in at most one
 * queue at a time.
 */
struct psd_chunk_node {
	int64_t prio;	 /* set by psd_chunkq_push() */
	uint64_t seq;	 /* push order, set by psd_chunkq_push() */
	uint64_t len;	 /* bytes, set by the caller; what credit counts */
	size_t heap_idx; /* queue-private; PSD_CHUNK_NOT_QUEUED if not queued */
};

#define PSD_CHUNK_NOT_QUEUED SIZE_MAX

/* Flag of psd_chunkq_init(): ignore prio, plain push order (the baseline). */
#define PSD_CHUNKQ_FIFO 0x1u

struct psd_chunkq {
	struct psd_chunk_node **heap;
	size_t len;
	size_t cap;
	uint64_t next_seq;
	bool fifo;
};

/* Mark @node as in no queue; optional before the first push. */
static inline void psd_chunk_node_init(struct psd_chunk_node *node)
{
	node->heap_idx = PSD_CHUNK_NOT_QUEUED;
}

/*
 * Whether @node is queued somewhere: true from push until pop or remove.
 * Valid only after psd_chunk_node_init() or a push.
 */
static inline bool psd_chunk_node_is_queued(const struct psd_chunk_node *node)
{
	return node->heap_idx != PSD_CHUNK_NOT_QUEUED;
}

/*
 * Initialise an empty queue with room for @cap_hint nodes (0: allocate on the
 * first push); it grows by doubling.  @flags: 0 or PSD_CHUNKQ_FIFO.
 * Returns 0, -EINVAL for unknown flags, or -ENOMEM.  psd_chunkq_fini() is
 * safe after a failed init.
 */
int psd_chunkq_init(struct psd_chunkq *q, size_t cap_hint, unsigned int flags);

/* Free the array.  Queued nodes are not touched; they belong to the caller. */
void psd_chunkq_fini(struct psd_chunkq *q);

/*
 * Queue @node with priority @prio (lower goes first) and the next sequence
 * number.  @node->len must be set.  Returns 0 or -ENOMEM (the queue is then
 * unchanged and @node not queued).  O(log n).
 */
int psd_chunkq_push(struct psd_chunkq *q, struct psd_chunk_node *node,
		    int64_t prio);

/* The node that goes next, or NULL if the queue is empty.  O(1). */
struct psd_chunk_node *psd_chunkq_peek(const struct psd_chunkq *q);

/* Take the node that goes next off the queue; NULL if empty.  O(log n). */
struct psd_chunk_node *psd_chunkq_pop(struct psd_chunkq *q);

/* Number of queued nodes. */
size_t psd_chunkq_len(const struct psd_chunkq *q);

/*
 * Take @node off the queue wherever it is (cancellation).  Returns 0, or
 * -ENOENT if @node is not queued in @q.  O(log n).
 */
int psd_chunkq_remove(struct psd_chunkq *q, struct psd_chunk_node *node);

/*
 * Credit gate: bounds the bytes in flight.  A chunk may start while in_flight
 * + its len <= credit, or when nothing is in flight (so a chunk larger than
 * the credit still goes, alone), or always when credit is 0 (unlimited).
 * The caller decides when a chunk's bytes stop being in flight (for a
 * push+pull: when its pull completes).
 */
struct psd_credit {
	uint64_t credit;	     /* bytes; 0 = unlimited */
	uint64_t in_flight;	     /* bytes started and not yet done */
	uint64_t max_in_flight_seen; /* high-water mark of in_flight */
	uint64_t started;	     /* chunks started since init */
};

/* Start with @credit_bytes of credit (0 = unlimited) and nothing in flight. */
void psd_credit_init(struct psd_credit *c, uint64_t credit_bytes);

/* Whether a chunk of @len bytes may start now. */
bool psd_credit_can_start(const struct psd_credit *c, uint64_t len);

/*
 * Count @len bytes as in flight.  Does not check the credit: ask
 * psd_credit_can_start() first (or use psd_sched_next()).
 */
void psd_credit_start(struct psd_credit *c, uint64_t len);

/* @len bytes started earlier are no longer in flight. */
void psd_credit_done(struct psd_credit *c, uint64_t len);

/*
 * Change the credit (0 = unlimited).  Applies to later starts; bytes already
 * in flight stay counted, so a lowered credit only blocks new starts until
 * enough completes.
 */
void psd_credit_set(struct psd_credit *c, uint64_t new_credit);

/*
 * The sender's step: if the head of @q may start under @c, pop it, count
 * its len as in flight and return it; otherwise (empty queue or no credit)
 * return NULL and change nothing.  Never skips the head for a smaller,
 * lower-priority chunk that would fit.
 */
struct psd_chunk_node *psd_sched_next(struct psd_chunkq *q,
				      struct psd_credit *c);

#endif
