// SPDX-License-Identifier: MIT
/*
 * Pinned staging pool and the push pipeline for device tensors (stage.h).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "gpu/stage.h"

static const char *stage_copier_msg(const struct psd_stage *s)
{
	const char *m = s->ops->errmsg ? s->ops->errmsg(s->ctx) : NULL;

	return m && *m ? m : "copy failed";
}

int psd_stage_init(struct psd_stage *s, const struct psd_copy_ops *ops,
		   void *ctx, size_t slot_bytes, unsigned nslots,
		   unsigned nstreams)
{
	pthread_condattr_t ca;
	void *arena;
	int ret;

	memset(s, 0, sizeof(*s));
	if (!slot_bytes || !nslots || nslots > PSD_STAGE_MAX_SLOTS ||
	    !nstreams || slot_bytes > (SIZE_MAX / nslots))
		return psd_set_errmsg(-EINVAL,
				      "staging pool: %u slots of %zu bytes and "
				      "%u streams (want 1..%u slots, >0 "
				      "bytes, >=1 stream)",
				      nslots, slot_bytes, nstreams,
				      PSD_STAGE_MAX_SLOTS);
	ret = ops->host_alloc(ctx, slot_bytes * nslots, &arena);
	if (ret)
		return psd_set_errmsg(ret,
				      "staging pool: pinned allocation of %zu "
				      "bytes failed: %s",
				      slot_bytes * nslots,
				      ops->errmsg && ops->errmsg(ctx)
					      ? ops->errmsg(ctx)
					      : psched_strerror(ret));
	s->ops = ops;
	s->ctx = ctx;
	s->arena = arena;
	s->slot_bytes = slot_bytes;
	s->nslots = nslots;
	s->nstreams = nstreams;
	s->st.allocs = 1;
	pthread_mutex_init(&s->lock, NULL);
	/* psd_deadline() counts on the monotonic clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void psd_stage_fini(struct psd_stage *s)
{
	if (!s->arena)
		return;
	psd_stage_push_drop(s);
	s->ops->host_free(s->ctx, s->arena);
	s->arena = NULL;
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}

size_t psd_stage_capacity(const struct psd_stage *s)
{
	return s->slot_bytes * s->nslots;
}

static unsigned stage_slots_for(const struct psd_stage *s, size_t len)
{
	return len ? (unsigned)((len + s->slot_bytes - 1) / s->slot_bytes) : 1;
}

/* Locked.  First free run of @n slots, or -1. */
static int stage_find_run(const struct psd_stage *s, unsigned n)
{
	uint64_t mask = n >= 64 ? ~0ull : (1ull << n) - 1;
	unsigned i;

	for (i = 0; i + n <= s->nslots; i++)
		if (!(s->used & (mask << i)))
			return (int)i;
	return -1;
}

/* Locked. */
static void stage_take_run(struct psd_stage *s, unsigned first, unsigned n,
			   size_t len, struct psd_stage_buf *b)
{
	uint64_t mask = n >= 64 ? ~0ull : (1ull << n) - 1;
	unsigned used;

	s->used |= mask << first;
	used = (unsigned)__builtin_popcountll(s->used);
	if (used > s->st.max_used)
		s->st.max_used = used;
	*b = (struct psd_stage_buf){
		.host = s->arena + (size_t)first * s->slot_bytes,
		.len = len,
		.first = first,
		.n = n,
		.stream = s->next_stream++ % s->nstreams,
	};
}

int psd_stage_get(struct psd_stage *s, size_t len, struct psd_stage_buf *b)
{
	return psd_stage_get_wait(s, len, 0, b);
}

int psd_stage_get_wait(struct psd_stage *s, size_t len, unsigned timeout_ms,
		       struct psd_stage_buf *b)
{
	unsigned n = stage_slots_for(s, len);
	struct timespec ts;
	bool waited = false;
	int first, ret = 0;

	memset(b, 0, sizeof(*b));
	if (n > s->nslots)
		return -E2BIG;
	if (timeout_ms)
		psd_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&s->lock);
	while ((first = stage_find_run(s, n)) < 0) {
		if (!timeout_ms) {
			ret = -EAGAIN;
			break;
		}
		if (!waited) {
			s->st.waits++;
			waited = true;
		}
		if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) ==
		    ETIMEDOUT) {
			first = stage_find_run(s, n);
			if (first < 0)
				ret = -ETIMEDOUT;
			break;
		}
	}
	if (first >= 0)
		stage_take_run(s, (unsigned)first, n, len, b);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void psd_stage_put(struct psd_stage *s, struct psd_stage_buf *b)
{
	uint64_t mask;

	if (!b->n)
		return;
	mask = b->n >= 64 ? ~0ull : (1ull << b->n) - 1;
	pthread_mutex_lock(&s->lock);
	s->used &= ~(mask << b->first);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	memset(b, 0, sizeof(*b));
}

int psd_stage_h2d(struct psd_stage *s, int device, void *dst, const void *src,
		  size_t len)
{
	unsigned stream;
	int ret;

	pthread_mutex_lock(&s->lock);
	stream = s->next_stream++ % s->nstreams;
	s->st.h2d++;
	pthread_mutex_unlock(&s->lock);
	ret = s->ops->copy(s->ctx, PSD_COPY_H2D, device, dst, src, len, stream);
	if (!ret)
		ret = s->ops->sync(s->ctx, stream);
	if (ret)
		psd_set_errmsg(ret,
			       "host-to-device copy of %zu bytes to "
			       "device %d failed: %s",
			       len, device, stage_copier_msg(s));
	return ret;
}

/* Start the device-to-host copy of @len bytes at @src into @b. */
static int stage_d2h_start(struct psd_stage *s, int device, const void *src,
			   size_t len, struct psd_stage_buf *b)
{
	pthread_mutex_lock(&s->lock);
	s->st.d2h++;
	pthread_mutex_unlock(&s->lock);
	return s->ops->copy(s->ctx, PSD_COPY_D2H, device, b->host, src, len,
			    b->stream);
}

void psd_stage_push_drop(struct psd_stage *s)
{
	struct psd_stage_buf b;

	pthread_mutex_lock(&s->lock);
	if (!s->ahead_on) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->ahead_on = false;
	b = s->ahead;
	s->st.ahead_dropped++;
	pthread_mutex_unlock(&s->lock);
	/* The copy may still be writing into the slots. */
	(void)s->ops->sync(s->ctx, b.stream);
	psd_stage_put(s, &b);
}

int psd_stage_push_take(struct psd_stage *s, uint64_t tag, int device,
			const void *src, size_t len, unsigned timeout_ms,
			struct psd_stage_buf *b)
{
	bool hit;
	int ret;

	pthread_mutex_lock(&s->lock);
	hit = s->ahead_on && s->ahead_tag == tag && s->ahead_src == src &&
	      s->ahead_dev == device && s->ahead.len == len;
	if (hit) {
		*b = s->ahead;
		s->ahead_on = false;
		s->st.ahead_hits++;
	}
	pthread_mutex_unlock(&s->lock);
	if (!hit) {
		/* The order changed (a more urgent chunk came): the copy
		 * ahead's slots may be the ones this one needs. */
		psd_stage_push_drop(s);
		ret = psd_stage_get_wait(s, len, timeout_ms ? timeout_ms : 1,
					 b);
		if (ret == -E2BIG)
			return psd_set_errmsg(
				ret,
				"%zu bytes do not fit the pinned staging pool "
				"(%u x %zu bytes; PS_GPU_STAGE_BUFS, "
				"PS_GPU_STAGE_BYTES)",
				len, s->nslots, s->slot_bytes);
		if (ret)
			return psd_set_errmsg(
				ret,
				"no pinned staging slot came free "
				"in %u ms for %zu bytes",
				timeout_ms, len);
		ret = stage_d2h_start(s, device, src, len, b);
		if (ret)
			goto fail;
	}
	ret = s->ops->sync(s->ctx, b->stream);
	if (ret)
		goto fail;
	return 0;
fail:
	psd_stage_put(s, b);
	return psd_set_errmsg(ret,
			      "device-to-host copy of %zu bytes from device "
			      "%d failed: %s",
			      len, device, stage_copier_msg(s));
}

bool psd_stage_push_ahead(struct psd_stage *s, uint64_t tag, int device,
			  const void *src, size_t len)
{
	struct psd_stage_buf b;

	pthread_mutex_lock(&s->lock);
	if (s->ahead_on) {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	pthread_mutex_unlock(&s->lock);
	if (psd_stage_get(s, len, &b))
		return false; /* no slot free now: copy it when it is due */
	if (stage_d2h_start(s, device, src, len, &b)) {
		(void)s->ops->sync(s->ctx, b.stream);
		psd_stage_put(s, &b);
		return false; /* the take will copy again and report it */
	}
	pthread_mutex_lock(&s->lock);
	s->ahead = b;
	s->ahead_on = true;
	s->ahead_tag = tag;
	s->ahead_src = src;
	s->ahead_dev = device;
	pthread_mutex_unlock(&s->lock);
	return true;
}

void psd_stage_stats(struct psd_stage *s, struct psd_stage_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	pthread_mutex_unlock(&s->lock);
}
