// SPDX-License-Identifier: MIT
/*
 * KV worker: device (CUDA) requests.  Their values are staged through the
 * worker's pinned pool (common/gpu/stage.h): a push chunk is copied
 * device-to-host when the credit gate lets it start, the copy of the next
 * queued chunk started ahead so it runs while this one is on the wire; a
 * pull answer lands in pinned slots (or, when none is free, the
 * connection's scratch buffer) and is copied host-to-device.  The queue,
 * priorities and credit are the host path's (kvw.h).  The pool is made on
 * the first device request and reused for every message after.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvw.h"
#include "gpu/gpu.h"

struct kvw_gpu {
	bool fake; /* a test's copier (psd_kvw_gpu_use_copier) */
	int device;
	struct psd_gpu_copier *copier;
	struct psd_stage stage;
	unsigned timeout_ms;
};

/* Prefix the thread's error message with what was refused. */
static int kvw_gpu_refuse(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int kvw_gpu_refuse(int err, const char *fmt, ...)
{
	char why[256], what[64];
	va_list ap;

	snprintf(why, sizeof(why), "%s", psched_errmsg());
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return psd_set_errmsg(err, "%s: %s", what, why);
}

/* Unlocked. */
int psd_kvw_gpu_prepare(struct psched_node *n, int device, size_t nkeys,
			const void *const *push_vals, void *const *pull_vals)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_gpu *g;
	size_t i;
	int ret;

	if (device < 0)
		return psd_set_errmsg(-EINVAL,
				      "CUDA device %d: not a device "
				      "index",
				      device);
	pthread_mutex_lock(&w->lock);
	g = w->gpu && w->gpu->fake ? w->gpu : NULL;
	pthread_mutex_unlock(&w->lock);
	if (g) /* the unit test's "device" is host memory */
		goto stage;
	ret = psd_gpu_check(device);
	if (ret)
		return kvw_gpu_refuse(ret, "device buffers refused");
	for (i = 0; i < nkeys; i++) {
		if (push_vals && push_vals[i] &&
		    (ret = psd_gpu_check_ptr(push_vals[i], device)))
			return kvw_gpu_refuse(ret, "push value %zu", i);
		if (pull_vals && pull_vals[i] &&
		    (ret = psd_gpu_check_ptr(pull_vals[i], device)))
			return kvw_gpu_refuse(ret, "pull buffer %zu", i);
	}
stage:
	pthread_mutex_lock(&w->lock);
	if (w->gpu) {
		ret = w->gpu->device == device
			      ? 0
			      : psd_set_errmsg(-EINVAL,
					       "this worker stages CUDA device "
					       "%d already, not %d (one device "
					       "per worker)",
					       w->gpu->device, device);
		pthread_mutex_unlock(&w->lock);
		return ret;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		pthread_mutex_unlock(&w->lock);
		return -ENOMEM;
	}
	g->device = device;
	g->timeout_ms = n->cfg.request_timeout_ms;
	ret = psd_gpu_copier_create(device, n->cfg.gpu_streams, &g->copier);
	if (!ret)
		ret = psd_stage_init(&g->stage, &psd_gpu_copy_ops, g->copier,
				     n->cfg.gpu_stage_bytes,
				     n->cfg.gpu_stage_bufs, n->cfg.gpu_streams);
	if (ret) {
		psd_gpu_copier_destroy(g->copier);
		free(g);
	} else {
		w->gpu = g;
		psd_info("worker: staging CUDA device %d through %u pinned "
			 "slots of %llu bytes, %u streams",
			 device, n->cfg.gpu_stage_bufs,
			 (unsigned long long)n->cfg.gpu_stage_bytes,
			 n->cfg.gpu_streams);
	}
	pthread_mutex_unlock(&w->lock);
	/* Over RDMA, say once whether GPUDirect could skip the staging
	 * (the probe logs its answer; staging is used either way). */
	if (!ret && n->ops && !strcmp(n->ops->name, "rdma"))
		(void)psd_gpu_direct_usable(device);
	return ret;
}

/* Locked. */
void psd_kvw_gpu_job(const struct kvw_chunk *ch, struct kvw_gpu_job *job)
{
	const struct kvw_req *r = ch->req;

	job->on = r->on_gpu && kvw_is_push(r->type) && ch->span;
	if (!job->on)
		return;
	job->dev = r->gpu_dev;
	/* Request ids never repeat; 24 bits of chunk index beside them. */
	job->tag = (r->id << 24) ^ (uint64_t)(ch - r->chunks);
	job->src = r->slots[ch->slot].src + ch->off;
	job->len = (size_t)ch->span;
}

/* Unlocked (sender thread). */
int psd_kvw_gpu_stage_push(struct psd_kvw *w, const struct kvw_gpu_job *job,
			   const struct kvw_gpu_job *next,
			   struct psd_stage_buf *b)
{
	struct kvw_gpu *g = w->gpu; /* set before any device chunk queued */
	int ret;

	ret = psd_stage_push_take(&g->stage, job->tag, job->dev, job->src,
				  job->len, g->timeout_ms, b);
	if (ret)
		return ret;
	if (next && next->on)
		psd_stage_push_ahead(&g->stage, next->tag, next->dev, next->src,
				     next->len);
	return 0;
}

void psd_kvw_gpu_unstage(struct psd_kvw *w, struct psd_stage_buf *b)
{
	if (w->gpu)
		psd_stage_put(&w->gpu->stage, b);
}

/* Unlocked (van thread). */
void *psd_kvw_gpu_rx_buf(struct psd_kvw *w, size_t len, struct psd_stage_buf *b)
{
	if (!w->gpu || psd_stage_get(&w->gpu->stage, len, b))
		return NULL;
	return b->host;
}

/* Unlocked (van thread). */
int psd_kvw_gpu_to_device(struct psd_kvw *w, int device, void *dst,
			  const void *src, size_t len)
{
	return psd_stage_h2d(&w->gpu->stage, device, dst, src, len);
}

/* Unlocked; the sender is stopped. */
void psd_kvw_gpu_fini(struct psd_kvw *w)
{
	struct psd_stage_stats st;

	if (!w->gpu)
		return;
	psd_stage_stats(&w->gpu->stage, &st);
	psd_debug("worker: staging did %llu device-to-host copies (%llu "
		  "started ahead), %llu host-to-device, at most %u slots "
		  "in use",
		  (unsigned long long)st.d2h, (unsigned long long)st.ahead_hits,
		  (unsigned long long)st.h2d, st.max_used);
	psd_stage_fini(&w->gpu->stage);
	psd_gpu_copier_destroy(w->gpu->copier);
	free(w->gpu);
	w->gpu = NULL;
}

/* Unit test only (kvw.h). */
int psd_kvw_gpu_use_copier(struct psched_node *n, int device,
			   const struct psd_copy_ops *ops, void *ctx)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_gpu *g = calloc(1, sizeof(*g));
	int ret;

	if (!g)
		return -ENOMEM;
	g->fake = true;
	g->device = device;
	g->timeout_ms = n->cfg.request_timeout_ms;
	ret = psd_stage_init(&g->stage, ops, ctx, n->cfg.gpu_stage_bytes,
			     n->cfg.gpu_stage_bufs, n->cfg.gpu_streams);
	if (ret) {
		free(g);
		return ret;
	}
	pthread_mutex_lock(&w->lock);
	if (w->gpu)
		ret = -EBUSY;
	else
		w->gpu = g;
	pthread_mutex_unlock(&w->lock);
	if (ret) {
		psd_stage_fini(&g->stage);
		free(g);
	}
	return ret;
}

void psd_kvw_gpu_stats(struct psd_kvw *w, struct psd_stage_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (w->gpu)
		psd_stage_stats(&w->gpu->stage, out);
}
