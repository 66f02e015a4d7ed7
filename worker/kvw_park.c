// SPDX-License-Identifier: MIT
/*
 * KV worker: config epochs.  Two-phase switches: between a PREPARE and
 * its COMMIT (or ABORT), pushes of steps beyond the highest step this
 * worker had pushed are parked (psd_kvw_req_build() marks them, the
 * request's start holds them); when the PREPARE closes they are cut with
 * the configs known then and queued, oldest first.  The config a request
 * is cut with, and the credit in force, are set here and nowhere else.
 * (kvw.h explains the locking words.)
 */
#include <errno.h>
#include <stdlib.h>

#include "kvw.h"

/*
 * Locked.  The one place the credit changes.  A push of a step under
 * config @e is cut (@cut): @e's credit is in force from now on.  Config
 * @e was committed (!@cut): more credit takes effect now, not from the
 * config's first step: credit is this worker's own limit on bytes in
 * flight (nothing on the wire or at the servers depends on it), and a
 * step still running under a starved credit could otherwise take
 * minutes.  Live (bench/autotune-bench.sh), the tuner cut short a sample
 * of 4 KiB x 1 behind a 4 ms round trip; the step in progress kept 4 KiB
 * in flight until it ended, 107 s later.  Less credit waits for its
 * step, as the partition does.
 */
static void kvw_credit_follow(struct psd_kvw *w, const struct psd_cfg_entry *e,
			      bool cut)
{
	if (w->fifo || e->epoch <= w->credit_epoch)
		return;
	if (cut) {
		w->credit_epoch = e->epoch;
		psd_credit_set(&w->credit, e->credit_bytes);
		psd_info("config epoch %u in force from step %llu: "
			 "partition %llu bytes, credit %llu bytes",
			 e->epoch, (unsigned long long)e->apply_from_step,
			 (unsigned long long)e->partition_bytes,
			 (unsigned long long)e->credit_bytes);
	} else if (w->credit.credit &&
		   (!e->credit_bytes || e->credit_bytes > w->credit.credit)) {
		psd_credit_set(&w->credit, e->credit_bytes);
		psd_kvw_kick(w);
	}
}

void psd_kvw_req_config(struct psd_kvw *w, struct kvw_req *r)
{
	const struct psd_cfg_entry *e;
	size_t i;

	for (i = 0; i < r->nslots; i++) {
		struct kvw_slot *s = &r->slots[i];

		e = psd_cfgtab_for_step(&w->cfgs, s->step);
		s->epoch = e->epoch;
		s->part = e->partition_bytes;
		if (kvw_is_push(r->type))
			kvw_credit_follow(w, e, true);
	}
}

/*
 * Locked.  A PREPARE closed (commit or abort): lay out and queue the
 * parked requests, oldest first.  Requests that completed here (their
 * layout failed) and have a callback are returned in *@fire (*@nf of
 * them, allocated; free it) for the caller to run after unlocking.
 */
static void kvw_unpark(struct psched_node *n, struct kvw_req ***fire,
		       size_t *nf)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_list *pos, *tmp;
	size_t cnt = 0;

	*fire = NULL;
	*nf = 0;
	psd_list_for_each (pos, &w->parked)
		cnt++;
	if (cnt)
		*fire = calloc(cnt, sizeof(**fire));
	psd_list_for_each_safe (pos, tmp, &w->parked) {
		struct kvw_req *r =
			psd_container_of(pos, struct kvw_req, park_link);
		int ret;

		psd_list_del(&r->park_link);
		r->parked = false;
		ret = psd_kvw_req_layout(n, r);
		if (ret)
			psd_kvw_req_error(r, ret,
					  "%s of key %llu (step %llu): %s",
					  psd_msg_type_name(r->type),
					  (unsigned long long)r->slots[0].key,
					  (unsigned long long)r->slots[0].step,
					  psched_strerror(ret));
		if (psd_kvw_req_settle(w, r) && *fire)
			(*fire)[(*nf)++] = r;
	}
	psd_kvw_kick(w);
}

/* Unlocked. */
static void kvw_send_ack(struct psched_node *n, uint32_t epoch, uint64_t step)
{
	Psched__ConfigAck a = PSCHED__CONFIG_ACK__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	a.epoch = epoch;
	a.max_step = step;
	m.body_case = PSCHED__CONTROL__BODY_CONFIG_ACK;
	m.config_ack = &a;
	if (psd_node_send_sched(n, &m))
		psd_warn("cannot acknowledge config epoch %u to the scheduler",
			 epoch);
}

/* Locked.  A committed config without this worker: it is out from the
 * config's first step (psched_leave() returns). */
static void kvw_left(struct psched_node *n, const struct psd_cfg_entry *e)
{
	struct psd_kvw *w = kvw_of(n);

	if (w->left || psd_cfg_is_member(e, (unsigned)n->rank))
		return;
	if (!w->leaving)
		psd_warn("config epoch %u leaves this worker out from step "
			 "%llu, but it did not ask to leave",
			 e->epoch, (unsigned long long)e->apply_from_step);
	w->left = true;
	w->left_from = e->apply_from_step;
	pthread_mutex_lock(&n->lock);
	n->left_from = e->apply_from_step;
	pthread_mutex_unlock(&n->lock);
	psd_info("left the job: no member of steps from %llu (config epoch "
		 "%u)",
		 (unsigned long long)e->apply_from_step, e->epoch);
	pthread_cond_broadcast(&w->cond);
}

/* Locked.  A COMMIT: the config joins the table. */
static void kvw_commit(struct psched_node *n, const Psched__Config *m)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_cfg_entry e = { .epoch = m->epoch,
				   .partition_bytes = m->partition_bytes,
				   .credit_bytes = m->credit_bytes,
				   .apply_from_step = m->apply_from_step,
				   .nmembers = m->num_members,
				   .members = m->members.data,
				   .members_len = m->members.len };
	uint64_t step;
	int ret;

	step = w->preparing && w->prep_epoch == m->epoch ? w->prep_step
							 : w->max_step;
	/* A membership-only switch may start at a step this worker pushed
	 * (docs/elastic.md): its layout is the one it was cut with. */
	if (m->epoch && m->apply_from_step <= step &&
	    m->partition_bytes !=
		    psd_cfgtab_for_step(&w->cfgs, m->apply_from_step)
			    ->partition_bytes)
		psd_err("config epoch %u starts at step %llu, but this "
			"worker already pushed step %llu",
			m->epoch, (unsigned long long)m->apply_from_step,
			(unsigned long long)step);
	ret = psd_cfg_members_check(&e, n->num_worker);
	if (!ret)
		ret = psd_cfgtab_add(&w->cfgs, &e);
	if (ret && ret != -EALREADY)
		psd_err("config epoch %u refused: %s", m->epoch,
			ret == -EPROTO ? "malformed membership"
				       : psched_strerror(ret));
	if (!ret) {
		kvw_credit_follow(w, &e, false);
		kvw_left(n, &e);
	}
}

/* Unlocked (van thread).  Config message from the scheduler. */
void psd_kvw_config(struct psched_node *n, const Psched__Config *m)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req **fire = NULL;
	size_t nf = 0, i;
	uint64_t step;

	pthread_mutex_lock(&w->lock);
	switch (m->phase) {
	case PSCHED__CONFIG__PHASE__PREPARE:
		w->preparing = true;
		w->prep_epoch = m->epoch;
		w->prep_step = w->max_step;
		step = w->max_step;
		pthread_mutex_unlock(&w->lock);
		kvw_send_ack(n, m->epoch, step);
		return;
	case PSCHED__CONFIG__PHASE__COMMIT:
		kvw_commit(n, m);
		break;
	default:
		psd_info("config epoch %u aborted by the scheduler", m->epoch);
		break;
	}
	if (w->preparing && w->prep_epoch == m->epoch) {
		w->preparing = false;
		kvw_unpark(n, &fire, &nf);
	}
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < nf; i++)
		psd_kvw_req_run_cb(w, fire[i]);
	free(fire);
}

int psd_kvw_leave_check(struct psched_node *n, uint8_t type)
{
	struct psd_kvw *w;
	int ret = 0;

	if (n->cfg.role != PSCHED_ROLE_WORKER || !kvw_of(n) ||
	    !kvw_is_push(type))
		return 0;
	w = kvw_of(n);
	pthread_mutex_lock(&w->lock);
	if (w->left)
		ret = psd_set_errmsg(-ESHUTDOWN,
				     "%s: this worker left the job "
				     "(psched_leave()) and is no member of "
				     "steps from %llu on",
				     psd_msg_type_name(type),
				     (unsigned long long)w->left_from);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/* Locked: wait for the commit that leaves this worker out.  A failed
 * job is not signalled on w->cond: look again every 100 ms. */
static int kvw_leave_wait(struct psched_node *n, unsigned timeout_ms)
{
	struct psd_kvw *w = kvw_of(n);
	uint64_t deadline = psd_now_ms() + timeout_ms;
	struct timespec ts;
	int fatal;

	while (!w->left) {
		pthread_mutex_lock(&n->lock);
		fatal = n->fatal;
		pthread_mutex_unlock(&n->lock);
		if (fatal)
			return psd_set_errmsg(fatal,
					      "psched_leave: the job failed "
					      "first: %s",
					      n->fatal_msg);
		if (psd_now_ms() >= deadline)
			return psd_set_errmsg(-ETIMEDOUT,
					      "psched_leave: the scheduler "
					      "committed no membership "
					      "without this worker within %u "
					      "ms",
					      timeout_ms);
		psd_deadline(&ts, 100);
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	}
	return 0;
}

int psched_leave(struct psched_node *n, unsigned timeout_ms)
{
	Psched__Leave l = PSCHED__LEAVE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	struct psd_kvw *w;
	int ret;

	if (!n || n->cfg.role != PSCHED_ROLE_WORKER || !kvw_of(n))
		return psd_set_errmsg(-EINVAL, "psched_leave: not a worker "
					       "node");
	w = kvw_of(n);
	pthread_mutex_lock(&w->lock);
	if (w->left || w->leaving) {
		pthread_mutex_unlock(&w->lock);
		return psd_set_errmsg(-EALREADY,
				      "psched_leave: this worker already "
				      "%s",
				      w->left ? "left" : "asked to leave");
	}
	w->leaving = true;
	pthread_mutex_unlock(&w->lock);
	m.body_case = PSCHED__CONTROL__BODY_LEAVE;
	m.leave = &l;
	ret = psd_node_send_sched(n, &m);
	if (ret)
		return psd_set_errmsg(ret, "psched_leave: cannot reach the "
					   "scheduler");
	pthread_mutex_lock(&w->lock);
	ret = kvw_leave_wait(n, timeout_ms ? timeout_ms
					   : n->cfg.request_timeout_ms);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/*
 * Locked.  An open PREPARE may end in a commit that changes the members
 * of a step already answered (the servers had the commit first): wait
 * for it to close, at most PS_REQUEST_TIMEOUT.
 */
static void kvw_prepare_settle(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	uint64_t deadline = psd_now_ms() + n->cfg.request_timeout_ms;
	struct timespec ts;

	while (w->preparing && psd_now_ms() < deadline) {
		psd_deadline(&ts, 5);
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	}
}

int psched_step_members(struct psched_node *n, uint64_t step, unsigned *ranks,
			unsigned cap)
{
	const struct psd_cfg_entry *e;
	struct psd_kvw *w;
	unsigned r, cnt = 0;

	if (!n || n->cfg.role != PSCHED_ROLE_WORKER || !kvw_of(n) ||
	    (cap && !ranks))
		return psd_set_errmsg(-EINVAL, "psched_step_members: not a "
					       "worker node, or no array");
	w = kvw_of(n);
	pthread_mutex_lock(&w->lock);
	kvw_prepare_settle(n);
	e = psd_cfgtab_for_step(&w->cfgs, step);
	for (r = 0; r < n->num_worker; r++) {
		if (!psd_cfg_is_member(e, r))
			continue;
		if (cnt < cap)
			ranks[cnt] = r;
		cnt++;
	}
	pthread_mutex_unlock(&w->lock);
	return (int)cnt;
}

int psched_key_members(struct psched_node *n, uint64_t key)
{
	const struct kvw_key *k;
	struct psd_kvw *w;
	int cnt;

	if (!n || n->cfg.role != PSCHED_ROLE_WORKER || !kvw_of(n))
		return psd_set_errmsg(-EINVAL, "psched_key_members: not a "
					       "worker node");
	w = kvw_of(n);
	pthread_mutex_lock(&w->lock);
	kvw_prepare_settle(n);
	k = psd_map_get(&w->keys, key);
	cnt = (int)psd_cfg_nmembers(
		psd_cfgtab_for_step(&w->cfgs, k ? k->step : 0), n->num_worker);
	pthread_mutex_unlock(&w->lock);
	return cnt;
}
