// SPDX-License-Identifier: MIT
/*
 * KV worker: two-phase config switches.  Between a PREPARE and its COMMIT
 * (or ABORT), pushes of steps beyond the highest step this worker had
 * pushed are parked (psd_kvw_req_build() marks them, kvw_issue() holds
 * them); when the PREPARE closes they are cut with the configs known then
 * and queued, oldest first.  (kvw.h explains the locking words.)
 */
#include <stdlib.h>

#include "kvw.h"

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

/* Locked.  A COMMIT: the config joins the table. */
static void kvw_commit(struct psd_kvw *w, const Psched__Config *m)
{
	struct psd_cfg_entry e = { .epoch = m->epoch,
				   .partition_bytes = m->partition_bytes,
				   .credit_bytes = m->credit_bytes,
				   .apply_from_step = m->apply_from_step };
	uint64_t step;
	int ret;

	step = w->preparing && w->prep_epoch == m->epoch ? w->prep_step
							 : w->max_step;
	if (m->epoch && m->apply_from_step <= step)
		psd_err("config epoch %u starts at step %llu, but this "
			"worker already pushed step %llu",
			m->epoch, (unsigned long long)m->apply_from_step,
			(unsigned long long)step);
	ret = psd_cfgtab_add(&w->cfgs, &e);
	if (ret && ret != -EALREADY)
		psd_err("config epoch %u refused: %s", m->epoch,
			psched_strerror(ret));
	/*
	 * More credit takes effect now, not from the config's first step:
	 * credit is this worker's own limit on bytes in flight (nothing on
	 * the wire or at the servers depends on it), and a step still
	 * running under a starved credit could otherwise take minutes.
	 * Live (bench/autotune-bench.sh), the tuner cut short a sample of
	 * 4 KiB x 1 behind a 4 ms round trip; the step in progress kept
	 * 4 KiB in flight until it ended, 107 s later.  Less credit waits
	 * for its step, as the partition does.
	 */
	if (!ret && !w->fifo && m->epoch > w->credit_epoch &&
	    w->credit.credit &&
	    (!m->credit_bytes || m->credit_bytes > w->credit.credit)) {
		psd_credit_set(&w->credit, m->credit_bytes);
		psd_kvw_kick(w);
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
		kvw_commit(w, m);
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
