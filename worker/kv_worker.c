// SPDX-License-Identifier: MIT
/*
 * KV worker: issuing dense requests (request.c has the public entry
 * points), psched_keys_init(), timeline, stats, autotuner metrics, and
 * attaching the worker to its node.  The design and the locking rules are in
 * kvw.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "compress.h"
#include "kvw.h"
#include "psched/kvstore.h"
#include "role.h"
#include "command.h"

/*
 * Autotuner metrics (docs/tuner.md).  A worker's step is its highest push
 * step over all keys; when it advances and KVW_METRICS_MIN_US passed since
 * the last report (every step if steps are slower), the worker tells the
 * scheduler the steps it completed since then and their mean time.
 * Unlocked (the issuing thread).
 */
#define KVW_METRICS_MIN_US 20000
/* Looks at the path (kvw_send.c) a report needs to call its link
 * reading a floor. */
#define KVW_FLOOR_MIN_LOOKS 16
/* Servers whose path a report looks at (round-robin beyond that). */
#define KVW_RTT_LOOKS 8

/* Locked: the minimum round trip of up to KVW_RTT_LOOKS servers' paths
 * into km->rtt_us (the largest), for the tuner's bandwidth-delay product
 * (docs/tuner.md); transports that cannot tell leave it. */
static void kvw_metrics_rtt(struct psched_node *n, struct kvw_metrics *km)
{
	struct psd_peer *p;
	uint32_t rtt;
	unsigned i;

	for (i = 0; i < KVW_RTT_LOOKS && i < n->num_server; i++) {
		p = psd_node_peer(
			n, psd_server_id(km->rtt_next++ % n->num_server));
		rtt = 0;
		/* (not p->dead, the node lock's: a dead server's
		 * connection is closed, and tx_room says so) */
		if (p && p->conn && psd_conn_tx_room(p->conn, &rtt) >= 0 &&
		    rtt > km->rtt_us)
			km->rtt_us = rtt;
	}
}

/* Locked: link bandwidth and compute time per step since the last
 * report (0 when not measurable: nothing in flight, or all waiting). */
static void kvw_metrics_conditions(struct kvw_metrics *km, uint64_t now,
				   uint64_t steps, Psched__Metrics *mt)
{
	uint64_t bytes = km->bytes_pushed + km->bytes_pulled;
	uint64_t busy = km->busy_us + (km->inflight ? now - km->busy_since : 0);
	uint64_t span = now - km->last_us;
	uint64_t waited = km->wait_us - km->last_wait;

	if (busy > km->last_busy)
		mt->link_bytes_per_s = (double)(bytes - km->last_bytes) * 1e6 /
				       (double)(busy - km->last_busy);
	if (span > waited && steps)
		mt->compute_s = (double)(span - waited) / 1e6 / (double)steps;
	/* Most looks while sends waited for credit found the link with
	 * room to spare: the credit set the rate (kvw_floor_look()).  A
	 * report of few looks says nothing (a busy period's first round
	 * trips find no queue yet, whatever the credit). */
	mt->link_floor =
		km->lim_n >= KVW_FLOOR_MIN_LOOKS && 2 * km->floor_n > km->lim_n;
	mt->min_rtt_s = (double)km->rtt_us / 1e6;
	psd_debug("metrics: link %.4g B/s, %u of %u looks while sends waited "
		  "for credit found the path with room%s; min rtt %u us",
		  mt->link_bytes_per_s, km->floor_n, km->lim_n,
		  mt->link_floor ? ": a floor" : "", km->rtt_us);
	km->lim_n = 0;
	km->floor_n = 0;
	km->rtt_us = 0;
	km->last_bytes = bytes;
	km->last_busy = busy;
	km->last_wait = km->wait_us;
}

static void kvw_metrics_note(struct psched_node *n, uint8_t type,
			     const uint64_t *lens, size_t nkeys)
{
	struct psd_kvw *w = kvw_of(n);
	Psched__Metrics mt = PSCHED__METRICS__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint64_t now = psd_now_us(), bytes = 0;
	struct kvw_metrics *km = &w->met;
	bool send = false;
	size_t i;

	for (i = 0; i < nkeys; i++)
		bytes += lens[i];
	pthread_mutex_lock(&w->lock);
	if (kvw_is_push(type))
		km->bytes_pushed += bytes;
	if (psd_msg_is_pull(type))
		km->bytes_pulled += bytes;
	if (!km->last_us && w->max_step) {
		km->last_us = now;
		km->last_step = w->max_step;
	} else if (km->last_us && w->max_step > km->last_step &&
		   now - km->last_us >= KVW_METRICS_MIN_US) {
		/* Steps last_step .. max_step - 1 completed since. */
		mt.step = w->max_step - 1;
		mt.step_time_s = (double)(now - km->last_us) / 1e6 /
				 (double)(w->max_step - km->last_step);
		mt.bytes_pushed = km->bytes_pushed;
		mt.bytes_pulled = km->bytes_pulled;
		kvw_metrics_rtt(n, km);
		kvw_metrics_conditions(km, now, w->max_step - km->last_step,
				       &mt);
		mt.epoch = w->credit_epoch;
		km->last_us = now;
		km->last_step = w->max_step;
		send = true;
	}
	pthread_mutex_unlock(&w->lock);
	if (!send)
		return;
	m.body_case = PSCHED__CONTROL__BODY_METRICS;
	m.metrics = &mt;
	if (psd_node_send_sched(n, &m))
		psd_debug("cannot send metrics of step %llu to the scheduler",
			  (unsigned long long)mt.step);
}

/* Unlocked.  Build, register and start one request. */
int psd_kvw_issue(struct psched_node *n, uint8_t type, const uint64_t *keys,
		  size_t nkeys, const void *const *push_vals,
		  void *const *pull_vals, const uint64_t *lens,
		  enum psched_dtype dtype, int device, int priority,
		  uint8_t flags, psched_done_fn *cb, void *arg, uint64_t *req)
{
	struct psd_kvw *w;
	struct kvw_req *r = NULL;
	bool fire = false;
	int ret;

	ret = psd_kvw_issue_check(n, cb, req);
	if (ret)
		return ret;
	w = kvw_of(n);
	/* Device values (kvw_gpu.c): -1 is host memory. */
	if (device != -1 && keys && nkeys &&
	    (ret = psd_kvw_gpu_prepare(n, device, nkeys, push_vals, pull_vals)))
		return ret;
	pthread_mutex_lock(&w->lock);
	ret = psd_kvw_fatal(n);
	/* Compression quantises the caller's values on this thread, which
	 * cannot read device memory. */
	if (!ret && device != -1 && push_vals && w->cmp_kind &&
	    dtype == PSCHED_F32)
		ret = psd_set_errmsg(
			-EOPNOTSUPP,
			"gradient compression takes host buffers "
			"only: push device %d's values without it, "
			"or copy them to the host",
			device);
	if (!ret)
		ret = psd_kvw_req_build(n, type, keys, nkeys, push_vals,
					pull_vals, lens, dtype, &r);
	if (!ret) {
		r->on_gpu = device != -1;
		r->gpu_direct = r->on_gpu && psd_kvw_gpu_direct(w);
		r->gpu_dev = device;
		r->flags = flags | (r->cmp ? PSD_F_COMPRESSED : 0);
		ret = psd_kvw_req_issue_unlocks(n, r, priority, cb, arg, req,
						&fire);
	}
	pthread_mutex_unlock(&w->lock);
	if (ret)
		return ret;
	if (fire)
		psd_kvw_req_run_cb(w, r);
	kvw_metrics_note(n, type, lens, nkeys);
	return 0;
}

/* Unlocked; blocks until the values are in and every worker got here. */
int psched_keys_init(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		     const void *const *vals, const uint64_t *lens,
		     enum psched_dtype dtype, unsigned timeout_ms)
{
	uint64_t req = 0;
	int ret;

	ret = psd_kvw_issue(
		n, PSD_MSG_INIT, keys, nkeys, vals, NULL, lens, dtype, -1, 0,
		n->rank == 0 && vals ? PSD_F_HAS_VALUE : 0, NULL, NULL, &req);
	return psd_kvw_init_wait(n, ret, req, timeout_ms);
}

/* Unlocked (any application thread). */
int psched_timeline_start(struct psched_node *n, size_t max_events)
{
	struct psd_kvw *w = n ? kvw_of(n) : NULL;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL, "only workers keep a timeline");
	pthread_mutex_lock(&w->lock);
	ret = psd_tl_start(&w->tl, max_events);
	pthread_mutex_unlock(&w->lock);
	return ret ? psd_set_errmsg(ret, "no memory for the timeline") : 0;
}

/* Unlocked (any application thread). */
int psched_timeline_write(struct psched_node *n, const char *path)
{
	struct psd_kvw *w = n ? kvw_of(n) : NULL;
	struct psd_tl_rec *copy;
	uint64_t t0, dropped;
	size_t cnt;
	FILE *f;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER || !path)
		return psd_set_errmsg(-EINVAL, "only workers keep a timeline");
	pthread_mutex_lock(&w->lock);
	cnt = w->tl.n;
	t0 = w->tl.t0;
	dropped = w->tl.dropped;
	copy = malloc((cnt ? cnt : 1) * sizeof(*copy));
	if (copy && cnt)
		memcpy(copy, w->tl.v, cnt * sizeof(*copy));
	pthread_mutex_unlock(&w->lock);
	if (!copy)
		return psd_set_errmsg(-ENOMEM, "no memory for the timeline");
	f = fopen(path, "w");
	if (!f) {
		ret = psd_neg_errno();
		free(copy);
		return psd_set_errmsg(ret, "timeline: cannot write %s: %s",
				      path, psched_strerror(ret));
	}
	ret = psd_tl_write_json(f, copy, cnt, t0, dropped, n->id);
	if (fclose(f) && !ret)
		ret = -EIO;
	free(copy);
	return ret ? psd_set_errmsg(ret, "timeline: error writing %s", path)
		   : 0;
}

/* psd_map_clear() callback (kvw_destroy()). */
static void kvw_key_free(void *key, void *arg)
{
	struct kvw_key *k = key;

	(void)arg;
	free(k->residual);
	free(k);
}

/* Unlocked; nothing else may use the worker any more.  Stop the sender
 * and free every request, key and table. */
static void kvw_destroy(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	size_t i;

	if (!w)
		return;
	psd_kvw_sender_stop(w);
	psd_kvw_gpu_fini(w);
	psd_kvw_kl_fini(w);
	for (i = 0; i < w->cap; i++)
		if (w->reqs[i])
			psd_kvw_req_free(w->reqs[i]);
	free(w->reqs);
	free(w->free_idx);
	psd_map_clear(&w->keys, kvw_key_free, NULL);
	psd_map_fini(&w->keys);
	psd_chunkq_fini(&w->q);
	psd_cfgtab_fini(&w->cfgs);
	psd_tl_fini(&w->tl);
	pthread_cond_destroy(&w->send_cond);
	pthread_cond_destroy(&w->cond);
	if (w->rx_efd >= 0)
		close(w->rx_efd);
	psd_scratch_fini(&w->scratch);
	pthread_mutex_destroy(&w->lock);
	free(w);
	n->role_state = NULL;
}

/* Unlocked, any thread. */
static void kvw_stats(const struct psched_node *n, struct psched_stats *out)
{
	struct psd_kvw *w = kvw_of(n);

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	out->chunks_started = w->credit.started;
	out->max_in_flight_bytes = w->credit.max_in_flight_seen;
	out->credit_bytes = w->credit.credit;
	out->config_epoch = psd_cfgtab_last(&w->cfgs)->epoch;
	out->caller_rx_waits = w->met.caller_rx;
	out->requests_in_flight = w->met.inflight;
	out->in_flight_bytes = w->credit.in_flight;
	out->requests_ok = w->met.done_ok;
	out->errors_timeout = w->met.err_timeout;
	out->errors_node_dead = w->met.err_node_dead;
	out->errors_remote = w->met.err_remote;
	out->errors_shutdown = w->met.err_shutdown;
	out->errors_other = w->met.err_other;
	memcpy(out->latency_count, w->met.lat_count,
	       sizeof(out->latency_count));
	out->latency_sum_us = w->met.lat_sum_us;
	pthread_mutex_unlock(&w->lock);
}

/* Unlocked, before the sender starts. */
static int kvw_init_sched(struct psched_node *n, struct psd_kvw *w)
{
	int ret;

	w->fifo = !strcmp(n->cfg.scheduling, "fifo");
	psd_list_init(&w->parked);
	ret = psd_chunkq_init(&w->q, 1024, w->fifo ? PSD_CHUNKQ_FIFO : 0);
	if (ret)
		return ret;
	psd_credit_init(&w->credit, w->fifo ? 0 : n->cfg.credit_bytes);
	return psd_cfgtab_init(&w->cfgs, w->fifo ? 0 : n->cfg.partition_bytes,
			       w->fifo ? 0 : n->cfg.credit_bytes);
}

/* Unlocked (node start-up): the worker role of @n. */
int psd_kvw_attach(struct psched_node *n)
{
	struct psd_kvw *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int ret;

	if (!w)
		return -ENOMEM;
	w->rx_efd = -1;
	ret = psd_scratch_init(&w->scratch);
	if (ret) {
		free(w);
		return ret;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_cond_init(&w->send_cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&w->done_gen, 0);
	psd_poll_budget_init(&w->spin, n->cfg.poll_us);
	w->rx_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	n->role_state = w;
	psd_map_init(&w->keys);
	ret = kvw_init_sched(n, w);
	if (!ret)
		ret = psd_kvw_sender_start(n);
	if (ret) {
		kvw_destroy(n);
		return ret;
	}
	return 0;
}

/*
 * Van thread.  Its loop busy-polls only when no chunk is in flight or
 * queued, the last request done was a single chunk and it was alone in
 * flight all along (serial use of small requests: the caller's next
 * request and its answer are a round trip away, and nothing else here
 * needs the CPU meanwhile).  Around a burst (40 pushes issued at once,
 * or one push of 40 keys, 40 chunks), answers come anyway and the poll
 * would take the CPU from the caller and the sender thread (push 4 KiB
 * x 40: a third less goodput).
 */
static bool kvw_may_poll(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	bool ok;

	if (!w)
		return true;
	pthread_mutex_lock(&w->lock);
	ok = w->last_single && w->last_busy_peak == 1 && !w->credit.in_flight &&
	     !psd_chunkq_len(&w->q);
	pthread_mutex_unlock(&w->lock);
	return ok;
}

const struct psd_role_ops psd_kvw_role = {
	.attach = psd_kvw_attach,
	.may_poll = kvw_may_poll,
	.stats = kvw_stats,
	.rx_header = psd_kvw_rx_header,
	.rx_data = psd_kvw_rx_data,
	.rx_control = psd_kvw_rx_control,
	.peer_failed = psd_kvw_peer_failed,
	.on_config = psd_kvw_config,
	.detach = kvw_destroy,
};

int psched_node_set_gradient_compression(struct psched_node *n,
					 const char *type, double threshold)
{
	struct psd_kvw *w = n ? kvw_of(n) : NULL;
	int kind = psd_cmp_kind_of(type);
	struct kvw_key *k;
	size_t pos = 0;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(
			-EINVAL, "gradient compression: not a worker node");
	if (kind < 0)
		return psd_set_errmsg(
			-EINVAL,
			"gradient compression type '%.32s' is not "
			"supported (2bit, 1bit, none)",
			type);
	if (!isfinite(threshold) || (kind == PSD_CMP_2BIT && threshold <= 0) ||
	    fabs(threshold) > 3.0e38)
		return psd_set_errmsg(-EINVAL,
				      "gradient compression %s: threshold %g "
				      "is not %s",
				      type, threshold,
				      kind == PSD_CMP_2BIT
					      ? "a finite number > 0"
					      : "a finite float");
	pthread_mutex_lock(&w->lock);
	if (kind != w->cmp_kind || (float)threshold != w->cmp_threshold) {
		while ((k = psd_map_next(&w->keys, &pos, NULL))) {
			free(k->residual);
			k->residual = NULL;
		}
	}
	w->cmp_kind = kind;
	w->cmp_threshold = (float)threshold;
	pthread_mutex_unlock(&w->lock);
	return 0;
}
