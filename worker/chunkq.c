// SPDX-License-Identifier: MIT
/*
 * Chunk priority queue and credit gate (see chunkq.h).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "chunkq.h"

#define CHUNKQ_MIN_CAP 16

/* Whether @a goes before @b. */
static bool chunkq_before(const struct psd_chunkq *q,
			  const struct psd_chunk_node *a,
			  const struct psd_chunk_node *b)
{
	if (!q->fifo && a->prio != b->prio)
		return a->prio < b->prio;
	return a->seq < b->seq;
}

static void chunkq_place(struct psd_chunkq *q, size_t i,
			 struct psd_chunk_node *node)
{
	q->heap[i] = node;
	node->heap_idx = i;
}

static void chunkq_sift_up(struct psd_chunkq *q, size_t i)
{
	struct psd_chunk_node *node = q->heap[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!chunkq_before(q, node, q->heap[parent]))
			break;
		chunkq_place(q, i, q->heap[parent]);
		i = parent;
	}
	chunkq_place(q, i, node);
}

static void chunkq_sift_down(struct psd_chunkq *q, size_t i)
{
	struct psd_chunk_node *node = q->heap[i];

	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= q->len)
			break;
		if (child + 1 < q->len &&
		    chunkq_before(q, q->heap[child + 1], q->heap[child]))
			child++;
		if (!chunkq_before(q, q->heap[child], node))
			break;
		chunkq_place(q, i, q->heap[child]);
		i = child;
	}
	chunkq_place(q, i, node);
}

static int chunkq_grow(struct psd_chunkq *q, size_t cap)
{
	struct psd_chunk_node **heap;

	if (cap > SIZE_MAX / sizeof(*heap))
		return -ENOMEM;
	heap = realloc(q->heap, cap * sizeof(*heap));
	if (!heap)
		return -ENOMEM;
	q->heap = heap;
	q->cap = cap;
	return 0;
}

int psd_chunkq_init(struct psd_chunkq *q, size_t cap_hint, unsigned int flags)
{
	*q = (struct psd_chunkq){ 0 };
	if (flags & ~PSD_CHUNKQ_FIFO)
		return -EINVAL;
	q->fifo = flags & PSD_CHUNKQ_FIFO;
	if (!cap_hint)
		return 0;
	return chunkq_grow(q, cap_hint);
}

void psd_chunkq_fini(struct psd_chunkq *q)
{
	free(q->heap);
	*q = (struct psd_chunkq){ 0 };
}

int psd_chunkq_push(struct psd_chunkq *q, struct psd_chunk_node *node,
		    int64_t prio)
{
	int ret;

	if (q->len == q->cap) {
		size_t cap = q->cap ? q->cap : CHUNKQ_MIN_CAP;

		if (q->cap) {
			if (cap > SIZE_MAX / 2)
				return -ENOMEM;
			cap *= 2;
		}
		ret = chunkq_grow(q, cap);
		if (ret)
			return ret;
	}
	node->prio = prio;
	node->seq = q->next_seq++;
	q->heap[q->len] = node;
	chunkq_sift_up(q, q->len++);
	return 0;
}

struct psd_chunk_node *psd_chunkq_peek(const struct psd_chunkq *q)
{
	return q->len ? q->heap[0] : NULL;
}

size_t psd_chunkq_len(const struct psd_chunkq *q)
{
	return q->len;
}

int psd_chunkq_remove(struct psd_chunkq *q, struct psd_chunk_node *node)
{
	size_t i = node->heap_idx;
	struct psd_chunk_node *last;

	if (i >= q->len || q->heap[i] != node)
		return -ENOENT;
	node->heap_idx = PSD_CHUNK_NOT_QUEUED;
	last = q->heap[--q->len];
	if (i == q->len)
		return 0;
	/* @last fills the hole; it may belong above or below it. */
	q->heap[i] = last;
	if (i > 0 && chunkq_before(q, last, q->heap[(i - 1) / 2]))
		chunkq_sift_up(q, i);
	else
		chunkq_sift_down(q, i);
	return 0;
}

struct psd_chunk_node *psd_chunkq_pop(struct psd_chunkq *q)
{
	struct psd_chunk_node *node = psd_chunkq_peek(q);

	if (node)
		psd_chunkq_remove(q, node);
	return node;
}

void psd_credit_init(struct psd_credit *c, uint64_t credit_bytes)
{
	*c = (struct psd_credit){ .credit = credit_bytes };
}

bool psd_credit_can_start(const struct psd_credit *c, uint64_t len)
{
	if (!c->credit || !c->in_flight)
		return true;
	/* in_flight + len <= credit, without overflow */
	return len <= c->credit && c->in_flight <= c->credit - len;
}

void psd_credit_start(struct psd_credit *c, uint64_t len)
{
	assert(c->in_flight <= UINT64_MAX - len);
	c->in_flight += len;
	c->started++;
	if (c->in_flight > c->max_in_flight_seen)
		c->max_in_flight_seen = c->in_flight;
}

void psd_credit_done(struct psd_credit *c, uint64_t len)
{
	assert(c->in_flight >= len);
	c->in_flight -= len;
}

void psd_credit_set(struct psd_credit *c, uint64_t new_credit)
{
	c->credit = new_credit;
}

struct psd_chunk_node *psd_sched_next(struct psd_chunkq *q,
				      struct psd_credit *c)
{
	struct psd_chunk_node *node = psd_chunkq_peek(q);

	/*
	 * Head-of-line on purpose: if the head does not fit, wait for credit
	 * rather than start a smaller, lower-priority chunk behind it.  Letting
	 * later layers' chunks slip ahead would hand the link to exactly the
	 * traffic the priority order is meant to hold back.
	 */
	if (!node || !psd_credit_can_start(c, node->len))
		return NULL;
	psd_chunkq_pop(q);
	psd_credit_start(c, node->len);
	return node;
}
