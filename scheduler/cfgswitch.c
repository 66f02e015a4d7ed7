// SPDX-License-Identifier: MIT
/*
 * Config switches (docs/architecture.md, "Configs change at step
 * boundaries, by epoch"), scheduler side: a two-phase switch (PREPARE to
 * workers, who answer with the highest step they pushed; COMMIT with
 * apply_from_step to everyone; ABORT when nobody answers in time), driven
 * by --config-cycle or the autotuner.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"
#include "role.h"

bool psd_sched_is_live_worker(const struct sched_node *sn)
{
	return sn->used && !sn->dead && !sn->closed && !sn->finalized &&
	       !sn->left && sn->role == PSCHED_ROLE_WORKER;
}

/*
 * The membership a new switch carries: every worker that did not leave,
 * and for a membership-only switch, none that asked to.  Other switches
 * keep the leavers: they start after every worker's last step, which may
 * be past a leaver's.
 */
static void sched_members_fill(struct psd_sched *s)
{
	unsigned i;

	memset(s->sw.members, 0, s->members_len);
	s->sw.nmembers = 0;
	for (i = 0; i < s->cap; i++) {
		const struct sched_node *sn = &s->nodes[i];

		if (!sn->used || sn->role != PSCHED_ROLE_WORKER || sn->left ||
		    (sn->out && s->sw.members_only))
			continue;
		s->sw.members[sn->rank / 8] |= (uint8_t)(1u << (sn->rank % 8));
		s->sw.nmembers++;
	}
}

/* The open switch committed from step @from: who is out is gone. */
static void sched_members_commit(struct psd_sched *s, uint64_t from)
{
	unsigned i;

	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		if (!sn->used || sn->role != PSCHED_ROLE_WORKER || sn->left ||
		    (s->sw.members[sn->rank / 8] & (1u << (sn->rank % 8))))
			continue;
		sn->left = true;
		psd_info("%s left the job: %u workers push each step from "
			 "step %llu (config epoch %u)",
			 sn->desc, s->sw.nmembers, (unsigned long long)from,
			 s->sw.epoch);
	}
}

static void sched_cfg_send(struct psched_node *n, Psched__Config__Phase phase,
			   uint64_t from_step, bool servers_too)
{
	struct psd_sched *s = psd_sched_of(n);
	Psched__Config c = PSCHED__CONFIG__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;

	c.epoch = s->sw.epoch;
	c.partition_bytes = s->sw.part;
	c.credit_bytes = s->sw.credit;
	c.apply_from_step = from_step;
	c.phase = phase;
	if (phase == PSCHED__CONFIG__PHASE__COMMIT) {
		c.num_members = s->sw.nmembers;
		c.members.data = s->sw.members;
		c.members.len = s->members_len;
	}
	m.body_case = PSCHED__CONTROL__BODY_CONFIG;
	m.config = &c;
	for (i = 0; i < s->cap; i++) {
		struct sched_node *sn = &s->nodes[i];

		if (!sn->used || sn->dead ||
		    (sn->role != PSCHED_ROLE_WORKER && !servers_too))
			continue;
		psd_sched_send(sn, &m);
	}
}

/* The switch closed: tell whoever proposed its config how it ended. */
static void sched_cfg_settle(struct psd_sched *s, bool committed, uint64_t from)
{
	struct psd_cfg_proposal *p = s->sw.prop;

	s->sw.open = false;
	s->sw.prop = NULL;
	if (p)
		p->settled(p, committed, s->sw.epoch, from);
}

/* Call the open switch off: ABORT to the workers that saw its PREPARE. */
static void sched_cfg_abort(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);

	s->switches_aborted++;
	sched_cfg_send(n, PSCHED__CONFIG__PHASE__ABORT, 0, false);
	sched_cfg_settle(s, false, 0);
}

/*
 * The first step of the open switch: after the highest step any worker
 * pushed; a membership-only switch after the highest step a leaver
 * pushed (the others may have pushed one more: its layout is the same,
 * and the servers count it without the leavers).
 */
static uint64_t sched_cfg_first_step(const struct psd_sched *s)
{
	uint64_t max = 0;
	unsigned i;

	if (!s->sw.members_only)
		return s->sw.max_step + 1;
	for (i = 0; i < s->cap; i++) {
		const struct sched_node *sn = &s->nodes[i];

		if (sn->used && sn->out && !sn->left &&
		    sn->acked_epoch == s->sw.epoch && sn->acked_step > max)
			max = sn->acked_step;
	}
	return max + 1;
}

/* No membership-only switch can start below this step: every live
 * worker acknowledged a switch after pushing this far (a leaver's
 * switch starts after its last step). */
static uint64_t sched_low_step(const struct psd_sched *s)
{
	uint64_t low = UINT64_MAX;
	unsigned i;

	for (i = 0; i < s->cap; i++)
		if (psd_sched_is_live_worker(&s->nodes[i]) &&
		    s->nodes[i].acked_step < low)
			low = s->nodes[i].acked_step;
	return low == UINT64_MAX ? 0 : low + 1;
}

/* Remember the open switch's commit from step @from.  Commits may run
 * ahead of the steps (each starts after the one before, pushed or not):
 * an entry is dropped only when the next one starts at or below every
 * step a membership switch may still start at, so the layout in force
 * there is never lost (a full table drops the oldest, logged). */
static void sched_hist_push(struct psd_sched *s, uint64_t from)
{
	uint64_t low = sched_low_step(s);
	unsigned drop = 0;

	while (drop + 1 < s->nhist && s->hist[drop + 1].from <= low)
		drop++;
	if (!drop && s->nhist == SCHED_HIST) {
		psd_warn("config history full: the layout committed from step "
			 "%llu is forgotten",
			 (unsigned long long)s->hist[0].from);
		drop = 1;
	}
	if (drop) {
		s->nhist -= drop;
		memmove(s->hist, s->hist + drop, sizeof(s->hist[0]) * s->nhist);
	}
	s->hist[s->nhist++] =
		(struct sched_commit){ from, s->sw.part, s->sw.credit };
}

/*
 * A membership-only switch from step @from keeps the layout in force
 * there.  A size switch committed before the leave may start later than
 * @from (the others pushed one step more than the leaver): the new
 * epoch, newer and starting earlier, overrides it (the newest epoch
 * whose start has come wins), so those sizes are proposed again after.
 */
static void sched_members_layout(struct psd_sched *s, uint64_t from)
{
	const struct sched_commit *c = &s->hist[0];
	unsigned i;

	for (i = s->nhist; i-- > 0;)
		if (s->hist[i].from <= from) {
			c = &s->hist[i];
			break;
		}
	s->sw.part = c->part;
	s->sw.credit = c->credit;
	if (c->part == s->cur_part && c->credit == s->cur_credit)
		return;
	s->reapply = true;
	s->reapply_part = s->cur_part;
	s->reapply_credit = s->cur_credit;
	psd_info("config epoch %u from step %llu keeps that step's layout "
		 "(partition %llu bytes); partition %llu bytes, credit %llu "
		 "bytes follow in the next epoch",
		 s->sw.epoch, (unsigned long long)from,
		 (unsigned long long)c->part, (unsigned long long)s->cur_part,
		 (unsigned long long)s->cur_credit);
}

/*
 * Commit the open switch once every live worker acknowledged it.  When no
 * live worker is left (the last one finalized or died before answering)
 * the switch is called off: a commit then would know no worker's step and
 * could start below steps the departed workers pushed.
 */
void psd_sched_cfg_check(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	unsigned i, live = 0;
	uint64_t from;

	if (!s->sw.open)
		return;
	for (i = 0; i < s->cap; i++) {
		if (!psd_sched_is_live_worker(&s->nodes[i]))
			continue;
		if (s->nodes[i].acked_epoch != s->sw.epoch)
			return;
		live++;
	}
	if (!live) {
		psd_info("config epoch %u called off: no worker is left to "
			 "apply it",
			 s->sw.epoch);
		sched_cfg_abort(n);
		return;
	}
	from = sched_cfg_first_step(s);
	if (s->sw.members_only)
		sched_members_layout(s, from);
	else if (from <= s->last_apply_step)
		from = s->last_apply_step + 1;
	if (from > s->last_apply_step)
		s->last_apply_step = from;
	sched_hist_push(s, from);
	s->cur_epoch = s->sw.epoch;
	s->cur_part = s->sw.part;
	s->cur_credit = s->sw.credit;
	s->switches_committed++;
	sched_members_commit(s, from);
	sched_cfg_send(n, PSCHED__CONFIG__PHASE__COMMIT, from, true);
	psd_info("config epoch %u: partition %llu bytes, credit %llu bytes, "
		 "from step %llu",
		 s->sw.epoch, (unsigned long long)s->sw.part,
		 (unsigned long long)s->sw.credit, (unsigned long long)from);
	sched_cfg_settle(s, true, from);
}

/* Open a switch to @part/@credit on behalf of @p (settled when it
 * closes, which may be inside this call), or of nobody. */
/* A worker asked to leave and no commit took it out yet. */
static bool sched_leaver_waits(const struct psd_sched *s)
{
	unsigned i;

	for (i = 0; i < s->cap; i++)
		if (s->nodes[i].used && s->nodes[i].out && !s->nodes[i].left &&
		    !s->nodes[i].dead)
			return true;
	return false;
}

static int sched_propose(struct psched_node *n, uint64_t part, uint64_t credit,
			 struct psd_cfg_proposal *p)
{
	struct psd_sched *s = psd_sched_of(n);

	if (!s->table_sent || s->shutdown_sent || s->done)
		return -EAGAIN;
	if (s->sw.open)
		return -EBUSY;
	/* While a worker waits to leave, only its membership switch runs. */
	if ((p || part != s->cur_part || credit != s->cur_credit) &&
	    sched_leaver_waits(s))
		return -EBUSY;
	s->sw.open = true;
	s->sw.prop = p;
	s->sw.epoch = ++s->last_epoch;
	s->sw.part = part;
	s->sw.credit = credit;
	s->sw.max_step = 0;
	s->sw.members_only = !p && part == s->cur_part &&
			     credit == s->cur_credit && sched_leaver_waits(s);
	sched_members_fill(s);
	s->sw.deadline_ms = psd_now_ms() + n->cfg.heartbeat_timeout_ms;
	sched_cfg_send(n, PSCHED__CONFIG__PHASE__PREPARE, 0, false);
	psd_sched_cfg_check(n); /* no live worker: called off at once */
	return 0;
}

int psd_sched_propose_config(struct psched_node *n, uint64_t part,
			     uint64_t credit)
{
	return sched_propose(n, part, credit, NULL);
}

void psd_sched_on_config_ack(struct psched_node *n, struct sched_node *sn,
			     const Psched__ConfigAck *a)
{
	struct psd_sched *s = psd_sched_of(n);

	if (sn->role != PSCHED_ROLE_WORKER || !s->sw.open ||
	    a->epoch != s->sw.epoch) {
		psd_debug("%s: stale config ack for epoch %u", sn->desc,
			  a->epoch);
		return;
	}
	sn->acked_epoch = a->epoch;
	sn->acked_step = a->max_step;
	if (a->max_step > s->sw.max_step)
		s->sw.max_step = a->max_step;
	psd_sched_cfg_check(n);
}

/* A PREPARE nobody finished answering: call it off, naming who. */
void psd_sched_cfg_timeout(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	char who[256] = "";
	size_t used = 0;
	unsigned i;

	for (i = 0; i < s->cap && used + 2 < sizeof(who); i++) {
		struct sched_node *sn = &s->nodes[i];

		if (psd_sched_is_live_worker(sn) &&
		    sn->acked_epoch != s->sw.epoch)
			used += (size_t)snprintf(who + used, sizeof(who) - used,
						 "%s%s", used ? ", " : "",
						 sn->desc);
	}
	psd_warn("config epoch %u called off: no answer within %u ms from %s",
		 s->sw.epoch, n->cfg.heartbeat_timeout_ms, who);
	sched_cfg_abort(n);
}

/* --autotune: propose the config the tuner wants once nothing is open. */
void psd_sched_autotune_kick(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);
	struct psd_cfg_proposal *p;
	unsigned i;

	if (!s->at || s->sw.open || s->shutdown_sent || !s->table_sent)
		return;
	p = psd_autotune_proposal(s->at);
	if (!p)
		return;
	/* Without a live worker the switch would only be called off. */
	for (i = 0; i < s->cap && !psd_sched_is_live_worker(&s->nodes[i]); i++)
		;
	if (i == s->cap)
		return;
	(void)sched_propose(n, p->part, p->credit, p);
}

void psd_sched_on_metrics(struct psched_node *n, struct sched_node *sn,
			  const Psched__Metrics *m)
{
	struct psd_sched *s = psd_sched_of(n);

	if (sn->role != PSCHED_ROLE_WORKER)
		return;
	sn->has_step = true;
	sn->step.step = m->step;
	sn->step.step_time_s = m->step_time_s;
	sn->step.compute_s = m->compute_s;
	sn->step.link_bps = m->link_bytes_per_s;
	sn->step.min_rtt_s = m->min_rtt_s;
	sn->step.pushed = m->bytes_pushed;
	sn->step.pulled = m->bytes_pulled;
	if (!s->at)
		return;
	psd_debug("%s: metrics step %llu, %.6f s per step, epoch %u, link "
		  "%.4g B/s%s, min rtt %.6f s, compute %.6f s",
		  sn->desc, (unsigned long long)m->step, m->step_time_s,
		  m->epoch, m->link_bytes_per_s,
		  m->link_floor ? " (a floor: credit-bound)" : "", m->min_rtt_s,
		  m->compute_s);
	psd_autotune_metrics(s->at, (unsigned)(sn - s->nodes), m->step,
			     m->step_time_s, m->link_bytes_per_s, m->link_floor,
			     m->min_rtt_s, m->compute_s);
	psd_sched_autotune_kick(n);
}

void psd_sched_members_kick(struct psched_node *n)
{
	struct psd_sched *s = psd_sched_of(n);

	if (s->sw.open || s->shutdown_sent || !s->table_sent)
		return;
	if (sched_leaver_waits(s))
		(void)sched_propose(n, s->cur_part, s->cur_credit, NULL);
	else if (s->reapply &&
		 !sched_propose(n, s->reapply_part, s->reapply_credit, NULL))
		s->reapply = false;
}

void psd_sched_on_leave(struct psched_node *n, struct sched_node *sn)
{
	if (sn->role != PSCHED_ROLE_WORKER || sn->out) {
		psd_warn("%s asked to leave twice, or is no worker", sn->desc);
		return;
	}
	sn->out = true;
	psd_info("%s asks to leave the job", sn->desc);
	/* A switch of sizes still open would start after the others' last
	 * step, which may be past the leaver's: call it off, leave first. */
	if (psd_sched_of(n)->sw.open && !psd_sched_of(n)->sw.members_only) {
		psd_info("config epoch %u called off: %s leaves first",
			 psd_sched_of(n)->sw.epoch, sn->desc);
		sched_cfg_abort(n);
	}
	psd_sched_members_kick(n);
}

/* --config-cycle: propose the next config when its time has come. */
void psd_sched_cycle_tick(struct psched_node *n, uint64_t now)
{
	struct psd_sched *s = psd_sched_of(n);
	struct sched_cycle *cy = &s->cycle;

	if (!cy->n || s->sw.open || s->shutdown_sent)
		return;
	if (!cy->last_ms) {
		cy->last_ms = now;
		return;
	}
	if (now - cy->last_ms < n->cfg.config_interval_ms)
		return;
	if (!psd_sched_propose_config(n, cy->part[cy->next],
				      cy->credit[cy->next])) {
		cy->next = (cy->next + 1) % cy->n;
		cy->last_ms = now;
	}
}

/* "PART:CREDIT,PART:CREDIT,..." with K/M/G suffixes. */
int psd_sched_cycle_parse(const char *spec, struct sched_cycle *cy)
{
	char buf[sizeof(((struct psched_cfg *)0)->config_cycle)];
	char *save = NULL, *tok, *colon;

	cy->n = 0;
	if (!*spec)
		return 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		colon = strchr(tok, ':');
		if (!colon || cy->n == SCHED_CYCLE_MAX)
			return -EINVAL;
		*colon = '\0';
		if (psched_parse_bytes(tok, &cy->part[cy->n]) ||
		    psched_parse_bytes(colon + 1, &cy->credit[cy->n]))
			return -EINVAL;
		cy->n++;
	}
	return cy->n ? 0 : -EINVAL;
}
