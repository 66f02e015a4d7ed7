// SPDX-License-Identifier: MIT
/*
 * KV server role glue (server/kvs.h): attaching the KV layer to a server
 * node, the role hooks (struct psd_role_ops) that are not about data
 * (connection closed, peer failed, config, command, stats) and teardown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "kvs.h"
#include "role.h"
#include "command.h"

static void kvs_conn_closed(struct psched_node *n, struct psd_conn *c)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_conn *kc = c->ctx;

	psd_kvs_families_drop(n, c, 0, NULL);
	if (kc) {
		psd_kvs_hold_free(s, kc->hold, kc->hold_len);
		free(kc);
		c->ctx = NULL;
	}
}

/* A worker died: in sync mode no open step can complete any more. */
static void kvs_peer_failed(struct psched_node *n, struct psd_peer *p, int err,
			    const char *why)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (p->role != PSCHED_ROLE_WORKER || s->async)
		return;
	/* A worker that left (psched_leave()) owes no step. */
	if (p->left)
		return;
	s->broken = err;
	/* This server leaving (it lost the scheduler) drops every worker's
	 * connection: that is no worker's death. */
	pthread_mutex_lock(&n->lock);
	if (n->fatal)
		snprintf(s->broken_msg, sizeof(s->broken_msg),
			 "this server is leaving the job: %s", n->fatal_msg);
	else
		snprintf(s->broken_msg, sizeof(s->broken_msg),
			 "%s died (%s): sync steps cannot complete", p->desc,
			 why);
	pthread_mutex_unlock(&n->lock);
	psd_kvs_families_drop(n, NULL, err, s->broken_msg);
}

static void kvs_destroy(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (!s)
		return;
	psd_kvs_snap_fini(s);
	psd_kvs_families_fini(n);
	psd_cfgtab_fini(&s->cfgs);
	psd_kvs_states_drop(s);
	free(s->cmp_buf);
	psd_upd_fini(&s->upd);
	free(s);
	n->role_state = NULL;
}

/* A committed config from the scheduler (van thread). */
static void kvs_config(struct psched_node *n, const Psched__Config *m)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_cfg_entry e = { .epoch = m->epoch,
				   .partition_bytes = m->partition_bytes,
				   .credit_bytes = m->credit_bytes,
				   .apply_from_step = m->apply_from_step,
				   .nmembers = m->num_members,
				   .members = m->members.data,
				   .members_len = m->members.len };
	int ret;

	if (m->phase != PSCHED__CONFIG__PHASE__COMMIT)
		return;
	ret = psd_cfg_members_check(&e, s->nworker);
	if (!ret)
		ret = psd_cfgtab_add(&s->cfgs, &e);
	if (ret && ret != -EALREADY) {
		psd_err("config epoch %u refused: %s", m->epoch,
			ret == -EPROTO ? "malformed membership"
				       : psched_strerror(ret));
		return;
	}
	psd_info("config epoch %u from step %llu: partition %llu bytes, %u "
		 "of %u workers",
		 m->epoch, (unsigned long long)m->apply_from_step,
		 (unsigned long long)m->partition_bytes,
		 psd_cfg_nmembers(&e, s->nworker), s->nworker);
	psd_kvs_step_config(n);
	psd_kvs_kl_config(n);
	psd_kvs_rows_config(n);
}

int psd_kvs_command(struct psched_node *n, int mode,
		    const struct psched_optimizer *opt)
{
	struct psd_kvs *s = psd_kvs_of(n);
	bool async = mode == PSCHED__SERVER_MODE__MODE_ASYNC;
	int ret;

	if (mode && async != s->async && psd_kvs_has_steps(s))
		return psd_set_errmsg(-EBUSY,
				      "cannot switch to %s mode: keys were "
				      "already pushed in %s mode",
				      async ? "async" : "sync",
				      s->async ? "async" : "sync");
	if (opt) {
		ret = psd_upd_set_optimizer(&s->upd, opt);
		if (ret)
			return ret;
		psd_kvs_restore_states(n);
	}
	if (mode)
		s->async = async;
	return 0;
}

int psched_server_set_updater(struct psched_node *n, psched_updater_fn *fn,
			      void *arg)
{
	if (!n || n->cfg.role != PSCHED_ROLE_SERVER || !psd_kvs_of(n))
		return psd_set_errmsg(-EINVAL,
				      "psched_server_set_updater: not a "
				      "server node");
	psd_upd_set_custom(&psd_kvs_of(n)->upd, fn, arg);
	return 0;
}

/* Fill the server's fields of psched_node_stats() (any thread). */
static void kvs_stats(const struct psched_node *n, struct psched_stats *out)
{
	const struct psd_kvs *s = psd_kvs_of(n);

	if (!s)
		return;
	out->stored_bytes = atomic_load(&s->stored_bytes);
	out->alloc_bytes = atomic_load(&s->alloc_bytes);
}

int psd_kvs_attach(struct psched_node *n)
{
	struct psd_kvs *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->async = !strcmp(n->cfg.server_mode, "async");
	s->nworker = n->num_worker;
	s->max_ahead = n->cfg.max_steps_ahead;
	s->max_parked = n->cfg.max_parked_bytes;
	s->hugepages = n->cfg.server_hugepages != 0;
	s->kl_hugepages = n->cfg.keylist_hugepages != 0;
	/* Optional GPU aggregation: refused at start when there is no GPU,
	 * rather than a silent CPU fallback the user did not ask for. */
	if (n->cfg.server_gpu_sum) {
		char why[256];

		ret = psd_gpu_check(0);
		if (ret) {
			free(s);
			snprintf(why, sizeof(why), "%s", psched_errmsg());
			return psd_set_errmsg(ret, "PS_SERVER_GPU_SUM=1 but %s",
					      why);
		}
		s->gpu_sum = true;
		psd_info("server: summing float32/float16 pushes on CUDA "
			 "device 0");
	}
	ret = psd_cfgtab_init(&s->cfgs, n->cfg.partition_bytes,
			      n->cfg.credit_bytes);
	if (ret) {
		free(s);
		return ret;
	}
	psd_upd_init(&s->upd);
	psd_map_init(&s->entries);
	n->role_state = s;
	ret = psd_kvs_snap_init(n);
	if (ret) {
		psd_cfgtab_fini(&s->cfgs);
		psd_upd_fini(&s->upd);
		psd_map_fini(&s->entries);
		free(s);
		n->role_state = NULL;
	}
	return ret;
}

const struct psd_role_ops psd_kvs_role = {
	.attach = psd_kvs_attach,
	.on_config = kvs_config,
	.rx_header = psd_kvs_rx_header,
	.rx_data = psd_kvs_rx_data,
	.rx_control = psd_kvs_cmd_rx,
	.peer_failed = kvs_peer_failed,
	.conn_closed = kvs_conn_closed,
	.stats = kvs_stats,
	.tick = psd_kvs_tick,
	.detach = kvs_destroy,
};
