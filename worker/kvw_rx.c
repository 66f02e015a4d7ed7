// SPDX-License-Identifier: MIT
/*
 * KV worker: answers from servers (push acks, pull answers) and server
 * failure, all on the van thread (kvw.h explains the locking words).
 */
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "kvw.h"

/*
 * Locked.  The chunk answer @h from server @p is for, or NULL: a late,
 * unknown or foreign answer.  An answer carries its request's family
 * flag or none (a server's status answers to row-sparse requests carry
 * none).
 */
static struct kvw_chunk *kvw_rx_chunk(struct psd_kvw *w,
				      const struct psd_peer *p,
				      const struct psd_hdr *h)
{
	struct kvw_req *r = psd_kvw_req_find(w, h->req);
	struct kvw_chunk *ch;

	if (!r || h->slot >= r->nchunks ||
	    (h->flags & (PSD_F_KEYLIST | PSD_F_ROWS | PSD_F_RAW) &
	     ~r->fam->flag))
		return NULL;
	ch = &r->chunks[h->slot];
	if (ch->srank != p->rank ||
	    (r->fam->keyed && r->slots[ch->slot].key != h->key))
		return NULL;
	return ch;
}

static uint64_t kvw_rx_len(const struct kvw_req *r, const struct kvw_chunk *ch)
{
	return r->fam->rx_len ? r->fam->rx_len(r, ch) : ch->span;
}

/* Locked.  Does @ch's family take a pull answer of any length now
 * (->rx_any)? */
static bool kvw_rx_any_wanted(const struct kvw_chunk *ch)
{
	const struct kvw_req *r = ch->req;

	return r->fam->rx_any && !r->cancelled && psd_msg_is_pull(r->type) &&
	       ch->state != KVW_CH_DONE;
}

/*
 * Unlocked (van thread).  Choose where an answer's payload lands: only a
 * pull answer of the exact bytes its chunk asked for, from its server,
 * lands in caller memory; late, unknown or unfitting ones land in the
 * scratch buffer.
 */
int psd_kvw_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvw_chunk *ch;
	struct kvw_req *r;
	bool gpu = false, own;

	if (!p || p->role != PSCHED_ROLE_SERVER ||
	    (h->type != PSD_MSG_PUSH_ACK && h->type != PSD_MSG_PULL_RESP)) {
		psd_err("dropping connection from %s: unexpected %s message",
			c->peer, psd_msg_type_name(h->type));
		return -EPROTO;
	}
	*dst = NULL;
	if (!h->length || h->type != PSD_MSG_PULL_RESP)
		return 0;
	pthread_mutex_lock(&w->lock);
	ch = kvw_rx_chunk(w, p, h);
	r = ch ? ch->req : NULL;
	if (ch && !r->cancelled && psd_msg_is_pull(r->type) &&
	    ch->state != KVW_CH_DONE && !ch->rx_busy &&
	    h->length == kvw_rx_len(r, ch) && r->fam->rx_dst &&
	    (*dst = r->fam->rx_dst(r, ch, h, c))) {
		ch->rx_busy = true;
		r->busy++;
		r->srv[p->rank].busy++;
		/* GPUDirect: the NIC writes device memory. */
		if (r->on_gpu && r->gpu_direct && c->rx_direct)
			c->rx_dev = true;
		else if (r->on_gpu)
			gpu = true;
	}
	/* An answer of any length (raw): a block the answer callback may
	 * keep. */
	own = !*dst && ch && kvw_rx_any_wanted(ch);
	pthread_mutex_unlock(&w->lock);
	/* A staged device answer: pinned slots, else the scratch buffer
	 * (NULL); kvw_rx_to_device_unlocks() copies it over.  Only this
	 * thread touches ch->stg while rx_busy is set. */
	if (gpu)
		*dst = psd_kvw_gpu_rx_buf(w, h->length, &ch->stg);
	else if (own)
		*dst = psd_conn_rx_block(c, (size_t)h->length);
	return 0;
}

/* Locked.  Record what is wrong with answer @h to @ch, if anything. */
static void kvw_rx_check(struct kvw_req *r, const struct kvw_chunk *ch,
			 const struct psd_peer *p, const struct psd_hdr *h)
{
	uint64_t step = r->slots[ch->slot].step, want = kvw_rx_len(r, ch);

	if (h->status)
		psd_kvw_req_error(
			r, h->status,
			"%s rejected %s%s of key %llu (step %llu): %s", p->desc,
			r->fam->what, psd_msg_type_name(r->type),
			(unsigned long long)h->key, (unsigned long long)step,
			psched_strerror(h->status));
	else if (h->type == PSD_MSG_PULL_RESP && !psd_msg_is_pull(r->type))
		psd_kvw_req_error(
			r, -EPROTO,
			"%s answered %s%s of key %llu (step %llu) "
			"with a pull answer",
			p->desc, r->fam->what, psd_msg_type_name(r->type),
			(unsigned long long)h->key, (unsigned long long)step);
	else if (h->type == PSD_MSG_PULL_RESP && h->length != want &&
		 !r->fam->rx_any)
		psd_kvw_req_error(
			r, -EPROTO,
			"%s answered %s%s of key %llu (step %llu) "
			"with %llu bytes instead of %llu",
			p->desc, r->fam->what, psd_msg_type_name(r->type),
			(unsigned long long)h->key, (unsigned long long)step,
			(unsigned long long)h->length,
			(unsigned long long)want);
}

/* Locked on entry and return, dropped around the copy.  Device answer
 * @payload of @ch to its device buffer; the request stays busy (so not
 * freed) meanwhile. */
static void kvw_rx_to_device_unlocks(struct psd_kvw *w, struct kvw_req *r,
				     struct kvw_chunk *ch,
				     const struct psd_hdr *h, void *payload)
{
	struct psd_stage_buf stg = ch->stg;
	uint8_t *dst = r->slots[ch->slot].dst + h->offset;
	int ret;

	pthread_mutex_unlock(&w->lock);
	ret = psd_kvw_gpu_to_device(w, r->gpu_dev, dst, payload, h->length);
	psd_kvw_gpu_unstage(w, &stg);
	pthread_mutex_lock(&w->lock);
	memset(&ch->stg, 0, sizeof(ch->stg));
	if (ret)
		psd_kvw_req_error(r, ret, "pull of key %llu (step %llu): %s",
				  (unsigned long long)h->key,
				  (unsigned long long)r->slots[ch->slot].step,
				  psched_errmsg());
}

/* Locked on entry and return, dropped around a device copy.  The answer
 * psd_kvw_rx_header() placed for @ch is in at @payload. */
static void kvw_rx_landed_unlocks(struct psd_kvw *w, struct kvw_chunk *ch,
				  unsigned srank, const struct psd_hdr *h,
				  void *payload)
{
	struct kvw_req *r = ch->req;

	ch->rx_busy = false;
	/* Not copied when it landed in place (GPUDirect). */
	if (r->on_gpu && !h->status && payload &&
	    payload != r->slots[ch->slot].dst + h->offset)
		kvw_rx_to_device_unlocks(w, r, ch, h, payload);
	else if (r->on_gpu)
		psd_kvw_gpu_unstage(w, &ch->stg);
	else if (r->fam->rx_landed && !r->cancelled)
		r->fam->rx_landed(r, ch, payload);
	r->busy--;
	r->srv[srank].busy--;
}

/* Unlocked (van thread).  An answer is in, payload in place. */
void psd_kvw_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvw_chunk *ch;
	struct kvw_req *r;
	bool fire = false;

	pthread_mutex_lock(&w->lock);
	ch = kvw_rx_chunk(w, p, h);
	if (!ch) {
		pthread_mutex_unlock(&w->lock);
		psd_debug("discarding late %s for request %llu from %s",
			  psd_msg_type_name(h->type),
			  (unsigned long long)h->req, c->peer);
		return;
	}
	r = ch->req;
	if (ch->rx_busy)
		kvw_rx_landed_unlocks(w, ch, p->rank, h, payload);
	if (!h->status && h->type == PSD_MSG_PUSH_ACK &&
	    r->type == PSD_MSG_PUSHPULL) {
		/* Its bytes are in; the pull answer comes later. */
		psd_kvw_chunk_uncredit(w, ch);
		pthread_mutex_unlock(&w->lock);
		return;
	}
	/* An answer of any length, in a block or the scratch buffer. */
	if (!ch->rx_busy && h->type == PSD_MSG_PULL_RESP && !h->status &&
	    kvw_rx_any_wanted(ch))
		r->fam->rx_any(r, ch, c, h, payload);
	kvw_rx_check(r, ch, p, h);
	fire = psd_kvw_chunk_settle(w, ch, h->status != 0);
	if (!r->busy)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (fire)
		psd_kvw_req_run_cb(w, r);
}

/* Locked.  Fail what @r still needs from dead server @p; true if that
 * completed @r and its callback must run. */
static bool kvw_req_fail_server(struct psd_kvw *w, struct kvw_req *r,
				const struct psd_peer *p, int err,
				const char *why)
{
	bool fire = false;
	size_t j;

	psd_kvw_req_error(
		r, err, "%s of key %llu (step %llu) failed: %s died (%s)",
		psd_msg_type_name(r->type), (unsigned long long)r->slots[0].key,
		(unsigned long long)r->slots[0].step, p->desc, why);
	r->busy -= r->srv[p->rank].busy;
	r->srv[p->rank].busy = 0;
	for (j = 0; j < r->nchunks; j++)
		if (r->chunks[j].srank == p->rank) {
			/* An answer cut off; a device one's slots come back. */
			if (r->chunks[j].rx_busy && r->on_gpu)
				psd_kvw_gpu_unstage(w, &r->chunks[j].stg);
			r->chunks[j].rx_busy = false;
			fire |= psd_kvw_chunk_settle(w, &r->chunks[j], true);
		}
	return fire;
}

/* Unlocked (van thread).  A server died: fail everything that still
 * needs it. */
void psd_kvw_peer_failed(struct psched_node *n, struct psd_peer *p, int err,
			 const char *why)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req **fire;
	size_t i, nf = 0;

	if (p->role != PSCHED_ROLE_SERVER)
		return;
	/* No more payload from it lands in caller memory (we are the van
	 * thread, so no receive is in progress right now). */
	if (p->conn)
		psd_conn_close(p->conn);
	pthread_mutex_lock(&w->lock);
	fire = calloc(w->cap + 1, sizeof(*fire));
	for (i = 0; i < w->cap; i++) {
		struct kvw_req *r = w->reqs[i];

		if (!r || !r->srv[p->rank].pending)
			continue;
		if (kvw_req_fail_server(w, r, p, err, why) && fire)
			fire[nf++] = r;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < nf; i++)
		psd_kvw_req_run_cb(w, fire[i]);
	free(fire);
}

/* Unlocked (van thread).  A server refuses a request and says why: keep
 * its words for the request (the status answer that follows fails it),
 * or, when the worker cannot go on, fail the node. */
static void kvw_on_request_error(struct psched_node *n, struct psd_conn *c,
				 const Psched__RequestError *re)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	const char *msg = re->message ? re->message : "";
	int status = re->status < 0 ? re->status : -EPROTO;
	struct kvw_req *r;

	if (!p || p->role != PSCHED_ROLE_SERVER) {
		psd_err("dropping connection from %s: request error from a "
			"node that is no server",
			c->peer);
		psd_conn_close(c);
		return;
	}
	if (re->fatal) {
		psd_err("%s: %.300s", p->desc, msg);
		psd_node_set_fatal(n, status, "%s: %.300s", p->desc, msg);
		return;
	}
	pthread_mutex_lock(&w->lock);
	r = psd_kvw_req_find(w, re->req);
	if (!r || re->slot >= r->nchunks ||
	    (r->fam->keyed &&
	     r->slots[r->chunks[re->slot].slot].key != re->key) ||
	    r->chunks[re->slot].srank != p->rank)
		r = NULL;
	if (r && !re->status)
		/* Not a refusal: what the request waits for. */
		snprintf(r->notice, sizeof(r->notice), "%s: %.200s", p->desc,
			 msg);
	else if (r)
		psd_kvw_req_error(
			r, status,
			"%s refused %s of key %llu (step %llu): "
			"%.200s",
			p->desc, psd_msg_type_name(r->type),
			(unsigned long long)re->key,
			(unsigned long long)r->slots[r->chunks[re->slot].slot]
				.step,
			msg);
	pthread_mutex_unlock(&w->lock);
}

/* Unlocked (van thread): control messages from servers on the data
 * connection. */
bool psd_kvw_rx_control(struct psched_node *n, struct psd_conn *c,
			const Psched__Control *m)
{
	if (m->body_case != PSCHED__CONTROL__BODY_REQUEST_ERROR)
		return psd_kvw_cmd_rx(n, c, m);
	kvw_on_request_error(n, c, m->request_error);
	return true;
}
