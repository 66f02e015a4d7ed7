// SPDX-License-Identifier: MIT
/*
 * KV server replies and wait queues (server/kvs.h): acks, status and data
 * answers, pulls waiting for a version (answered in priority order),
 * pushpulls waiting for their chunk, and dropping waits when a worker
 * leaves or dies.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvs.h"

struct psd_hdr psd_kvs_answer_hdr(const struct psched_node *n,
				  const struct psd_hdr *req, uint8_t type,
				  int status, uint8_t flags, uint64_t length)
{
	struct psd_hdr h = *req;

	h.type = type;
	h.sender = n->id;
	h.status = status;
	h.flags = flags;
	h.length = length;
	return h;
}

void psd_kvs_send_ack(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *req)
{
	/* The push's bytes are here (held or summed): the worker's credit
	 * for them comes back, even when a pushpull's answer must wait for
	 * the other workers.  Holding credit across that wait deadlocks as
	 * soon as two workers start their chunks in different orders.  Of
	 * the flags only PSD_F_KEYLIST (and PSD_F_RAW) route an answer. */
	struct psd_hdr h =
		psd_kvs_answer_hdr(n, req, PSD_MSG_PUSH_ACK, 0,
				   req->flags & (PSD_F_KEYLIST | PSD_F_RAW), 0);

	psd_conn_reply(c, &h, NULL, 0);
}

void psd_kvs_reply_status(struct psched_node *n, struct psd_conn *c,
			  const struct psd_hdr *req, int status)
{
	/* PSD_F_KEYLIST alone routes the answer: no other flag of the
	 * request (a key list's KL_F_SORTED is this server's own) goes
	 * back on the wire. */
	struct psd_hdr h = psd_kvs_answer_hdr(
		n, req,
		psd_msg_is_pull(req->type) ? PSD_MSG_PULL_RESP
					   : PSD_MSG_PUSH_ACK,
		status, req->flags & (PSD_F_KEYLIST | PSD_F_RAW), 0);

	psd_conn_reply(c, &h, NULL, 0);
}

/* Answer a pull with the bytes it names, from @base (the value, or the
 * open step's merge buffer), as version @step. */
static void kvs_reply_data(struct psched_node *n, struct psd_conn *c,
			   const struct psd_kvs_entry *e,
			   const struct psd_hdr *req, const uint8_t *base,
			   uint64_t step)
{
	struct psd_hdr h =
		psd_kvs_answer_hdr(n, req, PSD_MSG_PULL_RESP, 0, 0, req->span);
	struct iovec iov;

	h.step = step;
	iov.iov_base = (void *)(uintptr_t)(base + (h.offset - e->off));
	iov.iov_len = (size_t)h.span;
	psd_conn_reply(c, &h, &iov, 1);
}

void psd_kvs_reply_pull(struct psched_node *n, struct psd_conn *c,
			const struct psd_kvs_entry *e,
			const struct psd_hdr *req)
{
	kvs_reply_data(n, c, e, req, e->value, e->version);
}

/* From the open step's merge buffer (or the value, where the updater
 * folds each chunk in): the chunk has all W pushes, so those bytes are
 * final for the step while other chunks are still coming, and the worker
 * need not wait for the whole tensor. */
void psd_kvs_reply_chunk(struct psched_node *n, struct psd_conn *c,
			 const struct psd_kvs_entry *e,
			 const struct psd_hdr *req)
{
	kvs_reply_data(n, c, e, req, e->upd ? e->value : e->merge,
		       e->version + 1);
}

void psd_kvs_send_error(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *req, int err, const char *why,
			bool fatal)
{
	Psched__RequestError re = PSCHED__REQUEST_ERROR__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	re.req = req->req;
	re.slot = req->slot;
	re.key = req->key;
	re.status = err;
	re.message = (char *)(uintptr_t)why;
	re.fatal = fatal;
	m.body_case = PSCHED__CONTROL__BODY_REQUEST_ERROR;
	m.request_error = &re;
	psd_conn_send_control(c, n->id, &m);
}

/* Refusal lines logged at once, then one a second: a worker that sends
 * refused requests in a loop cannot fill the log (its words still reach
 * it with every refusal). */
#define KVS_REJECT_BURST 50u

/* May a refusal be logged now?  *@quiet: how many were not, before. */
static bool kvs_reject_log_ok(struct psd_kvs *s, uint64_t *quiet)
{
	uint64_t now = psd_now_ms();

	if (s->rl_ms + 1000 * (uint64_t)KVS_REJECT_BURST < now)
		s->rl_ms = now - 1000 * (uint64_t)KVS_REJECT_BURST;
	if (s->rl_ms + 1000 > now) {
		s->rl_quiet++;
		return false;
	}
	s->rl_ms += 1000;
	*quiet = s->rl_quiet;
	s->rl_quiet = 0;
	return true;
}

int psd_kvs_reject(struct psched_node *n, struct psd_conn *c,
		   const struct psd_hdr *h, int err, const char *why)
{
	uint64_t quiet = 0;
	char more[64] = "";

	if (kvs_reject_log_ok(psd_kvs_of(n), &quiet)) {
		if (quiet)
			snprintf(more, sizeof(more),
				 " (%llu refusals before it not logged)",
				 (unsigned long long)quiet);
		psd_err("rejecting %s of key %llu (offset %llu, %llu bytes, "
			"step %llu) from %s: %s%s",
			psd_msg_type_name(h->type), (unsigned long long)h->key,
			(unsigned long long)h->offset,
			(unsigned long long)h->span,
			(unsigned long long)h->step, c->peer, why, more);
	}
	/* The words first, on the same connection: the worker holds them
	 * for the request the status answer then fails. */
	psd_kvs_send_error(n, c, h, err, why, false);
	psd_kvs_reply_status(n, c, h, err);
	return err;
}

int psd_kvs_rejectf(struct psched_node *n, struct psd_conn *c,
		    const struct psd_hdr *h, int err, const char *fmt, ...)
{
	char why[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return psd_kvs_reject(n, c, h, err, why);
}

int psd_kvs_queue_wait(struct psd_conn *c, struct psd_list *list,
		       const struct psd_hdr *h, uint64_t want, void *buf,
		       uint64_t held)
{
	struct psd_kvs_wait *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->conn = c;
	psd_conn_get(c);
	w->h = *h;
	w->want = want;
	w->buf = buf;
	w->held = held;
	w->since_ms = psd_now_ms();
	psd_list_add_tail(list, &w->link);
	return 0;
}

void psd_kvs_wait_free(struct psd_kvs *s, struct psd_kvs_wait *w)
{
	psd_conn_put(w->conn);
	free(w->buf);
	s->parked_bytes -= w->held;
	free(w);
}

struct psd_kvs_wait *psd_kvs_wait_pull(struct psd_list *list, uint64_t version)
{
	struct psd_kvs_wait *best = NULL;
	struct psd_list *pos;

	psd_list_for_each (pos, list) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		/* Ties keep arrival order (strict <). */
		if (w->want <= version &&
		    (!best || w->h.priority < best->h.priority))
			best = w;
	}
	if (best)
		psd_list_del(&best->link);
	return best;
}

struct psd_kvs_wait *psd_kvs_wait_step(struct psd_list *list, uint64_t step)
{
	struct psd_list *pos;

	psd_list_for_each (pos, list) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		if (w->want == step) {
			psd_list_del(&w->link);
			return w;
		}
	}
	return NULL;
}

int psd_kvs_pull_ready(struct psched_node *n, struct psd_conn *c,
		       const struct psd_hdr *h, uint64_t version, uint64_t cost)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint64_t limit = psd_kvs_parked_limit(s);

	if (s->async || version >= h->step)
		return 1;
	if (s->broken)
		return psd_kvs_reject(n, c, h, s->broken, s->broken_msg);
	if (h->step - version > s->max_ahead + 1)
		return psd_kvs_rejectf(
			n, c, h, -ERANGE,
			"pull of key %llu for step %llu is %llu steps beyond "
			"the version applied here, %llu "
			"(PS_MAX_STEPS_AHEAD=%llu)",
			(unsigned long long)h->key, (unsigned long long)h->step,
			(unsigned long long)(h->step - version),
			(unsigned long long)version,
			(unsigned long long)s->max_ahead);
	cost += sizeof(struct psd_kvs_wait);
	if (cost > limit || s->parked_bytes > limit - cost)
		return psd_kvs_rejectf(
			n, c, h, -ENOBUFS,
			"pull of key %llu for step %llu (version %llu here): "
			"no "
			"room to queue it, %llu bytes of waiting pulls and "
			"early pushes are held already (PS_MAX_PARKED_BYTES="
			"%llu)",
			(unsigned long long)h->key, (unsigned long long)h->step,
			(unsigned long long)version,
			(unsigned long long)s->parked_bytes,
			(unsigned long long)limit);
	return 0;
}

int psd_kvs_queue_pull(struct psched_node *n, struct psd_conn *c,
		       struct psd_list *list, const struct psd_hdr *h,
		       void *buf, uint64_t len)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint64_t held = len + sizeof(struct psd_kvs_wait);
	int ret = psd_kvs_queue_wait(c, list, h, h->step, buf, held);

	if (!ret)
		s->parked_bytes += held;
	return ret;
}

void psd_kvs_answer_pulls(struct psched_node *n, struct psd_kvs_entry *e)
{
	struct psd_kvs_wait *w;

	while ((w = psd_kvs_wait_pull(&e->pulls, e->version))) {
		psd_kvs_reply_pull(n, w->conn, e, &w->h);
		psd_kvs_wait_free(psd_kvs_of(n), w);
	}
}

void psd_kvs_answer_chunk(struct psched_node *n, struct psd_kvs_entry *e,
			  uint64_t idx)
{
	struct psd_list *pos, *tmp;

	psd_list_for_each_safe (pos, tmp, &e->cwait[idx]) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		psd_list_del(&w->link);
		psd_kvs_reply_chunk(n, w->conn, e, &w->h);
		psd_kvs_wait_free(psd_kvs_of(n), w);
	}
}

void psd_kvs_drop_waits(struct psched_node *n, struct psd_list *list,
			struct psd_conn *c, int err, const char *why)
{
	struct psd_list *pos, *tmp;

	psd_list_for_each_safe (pos, tmp, list) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		if (c && w->conn != c)
			continue;
		psd_list_del(&w->link);
		if (err && w->h.type != PSD_MSG_PUSH)
			psd_kvs_reject(n, w->conn, &w->h, err, why);
		psd_kvs_wait_free(psd_kvs_of(n), w);
	}
}

void psd_kvs_drop_entry_waits(struct psched_node *n, struct psd_kvs_entry *e,
			      struct psd_conn *c, int err, const char *why)
{
	uint64_t i;

	psd_kvs_drop_waits(n, &e->pulls, c, err, why);
	for (i = 0; e->open && i < e->nchunks; i++)
		psd_kvs_drop_waits(n, &e->cwait[i], c, err, why);
	psd_kvs_drop_waits(n, &e->held, c, err, why);
}
