// SPDX-License-Identifier: MIT
/*
 * Scratch buffers kept between requests (scratch.h).  Each buffer carries
 * a 16-byte header with its capacity before the data handed out.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "psched.h"

#define SCRATCH_HDR   16
#define SCRATCH_MAGIC 0x5053445343524148ull /* catches a foreign put */

struct scratch_hdr {
	size_t cap;
	uint64_t magic;
};

static struct scratch_hdr *scratch_hdr_of(void *p)
{
	return (struct scratch_hdr *)((uint8_t *)p - SCRATCH_HDR);
}

int psd_scratch_init(struct psd_scratch *s)
{
	memset(s, 0, sizeof(*s));
	return -pthread_mutex_init(&s->lock, NULL);
}

void psd_scratch_fini(struct psd_scratch *s)
{
	unsigned i;

	for (i = 0; i < PSD_SCRATCH_SLOTS; i++) {
		if (s->buf[i])
			free(scratch_hdr_of(s->buf[i]));
		s->buf[i] = NULL;
	}
	s->kept = 0;
	pthread_mutex_destroy(&s->lock);
}

/* A new buffer of at least @bytes: an eighth more, in whole pages, so a
 * request a little bigger next step still fits. */
static void *scratch_new(size_t bytes)
{
	struct scratch_hdr *h;
	size_t cap = bytes;

	if (bytes >= PSD_SCRATCH_MIN_BYTES && bytes < SIZE_MAX / 2)
		cap = (bytes + bytes / 8 + 4095) & ~(size_t)4095;
	if (cap > SIZE_MAX - SCRATCH_HDR)
		return NULL;
	h = malloc(SCRATCH_HDR + (cap ? cap : 1));
	if (!h)
		return NULL;
	h->cap = cap;
	h->magic = SCRATCH_MAGIC;
	return (uint8_t *)h + SCRATCH_HDR;
}

void *psd_scratch_get(struct psd_scratch *s, size_t bytes)
{
	void *p = NULL;
	unsigned i, best = PSD_SCRATCH_SLOTS;

	if (bytes < PSD_SCRATCH_MIN_BYTES)
		return scratch_new(bytes);
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < PSD_SCRATCH_SLOTS; i++)
		if (s->buf[i] && s->cap[i] >= bytes &&
		    (best == PSD_SCRATCH_SLOTS || s->cap[i] < s->cap[best]))
			best = i;
	if (best < PSD_SCRATCH_SLOTS) {
		p = s->buf[best];
		s->buf[best] = NULL;
		s->kept -= s->cap[best];
		s->reused++;
	}
	pthread_mutex_unlock(&s->lock);
	return p ? p : scratch_new(bytes);
}

/* Locked.  The smallest kept buffer's slot, or PSD_SCRATCH_SLOTS. */
static unsigned scratch_smallest(const struct psd_scratch *s)
{
	unsigned i, j = PSD_SCRATCH_SLOTS;

	for (i = 0; i < PSD_SCRATCH_SLOTS; i++)
		if (s->buf[i] &&
		    (j == PSD_SCRATCH_SLOTS || s->cap[i] < s->cap[j]))
			j = i;
	return j;
}

void psd_scratch_put(struct psd_scratch *s, void *p)
{
	struct scratch_hdr *h;
	unsigned i, free_slot;

	if (!p)
		return;
	h = scratch_hdr_of(p);
	assert(h->magic == SCRATCH_MAGIC);
	if (h->cap < PSD_SCRATCH_MIN_BYTES || h->cap > PSD_SCRATCH_MAX_BYTES) {
		free(h);
		return;
	}
	pthread_mutex_lock(&s->lock);
	for (;;) {
		for (free_slot = 0;
		     free_slot < PSD_SCRATCH_SLOTS && s->buf[free_slot];
		     free_slot++)
			;
		if (free_slot < PSD_SCRATCH_SLOTS &&
		    s->kept + h->cap <= PSD_SCRATCH_MAX_BYTES)
			break;
		/* full: make room by dropping a smaller buffer, if any */
		i = scratch_smallest(s);
		if (i == PSD_SCRATCH_SLOTS || s->cap[i] >= h->cap) {
			pthread_mutex_unlock(&s->lock);
			free(h);
			return;
		}
		free(scratch_hdr_of(s->buf[i]));
		s->buf[i] = NULL;
		s->kept -= s->cap[i];
	}
	s->buf[free_slot] = p;
	s->cap[free_slot] = h->cap;
	s->kept += h->cap;
	pthread_mutex_unlock(&s->lock);
}

struct psd_scratch psd_raw_blocks = { .lock = PTHREAD_MUTEX_INITIALIZER };

void *psched_raw_alloc(size_t bytes)
{
	return psd_scratch_get(&psd_raw_blocks, bytes);
}

void psched_raw_release(void *block)
{
	psd_scratch_put(&psd_raw_blocks, block);
}
