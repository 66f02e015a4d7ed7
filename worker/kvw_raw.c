// SPDX-License-Identifier: MIT
/*
 * KV worker: the raw family (psched_raw_request(), PSCHED_FAMILY_RAW,
 * include/psched.h; wire format in common/wire.h, PSD_F_RAW).
 *
 * A raw request is what ps-lite's KVWorker sends: keys, their values and
 * maybe a value count per key, a cmd and a tag, handed to each server's
 * raw handler as they are.  It is cut into one chunk per server owning
 * some of its keys (by ps-lite's key ranges, or all to one server the
 * caller names), sent from the caller's arrays without copying.  Answers
 * have any length the handler chose, so they land in a block of their own
 * (the connection's scratch buffer when small) and go to the request's
 * answer callback, which may keep the block (psched_raw_keep()).
 *
 * Raw chunks take no credit: a handler may hold a push's answer until
 * the other workers pushed too (ps-lite's usual sync server), and two
 * workers whose pushes wait on each other's would otherwise stall each
 * other's credit.  They keep their priority in the queue.
 */
#include <stdlib.h>
#include <string.h>

#include "kvw.h"
#include "klpack.h"

void psched_raw_key_range(unsigned nserver, unsigned rank, uint64_t *begin,
			  uint64_t *end)
{
	uint64_t per = nserver ? UINT64_MAX / nserver : UINT64_MAX;

	*begin = per * rank;
	/* The last range also takes the few keys above per * nserver. */
	*end = rank + 1 >= nserver ? UINT64_MAX : per * (rank + 1);
}

/* One server's share of a request. */
struct kvw_raw_cut {
	unsigned srank;
	uint64_t first; /* key index */
	uint64_t n;
	uint64_t off; /* value bytes before it */
	uint64_t bytes;
};

/*
 * Unlocked.  Value bytes of keys [@lo, @hi) of @rq: their counts, or an
 * even share of nbytes when there are none.
 */
static uint64_t kvw_raw_bytes(const struct psched_raw_request *rq, uint64_t per,
			      uint64_t lo, uint64_t hi)
{
	uint64_t sum = 0, i;

	if (!rq->lens)
		return (hi - lo) * per;
	for (i = lo; i < hi; i++)
		sum += rq->lens[i];
	return sum;
}

/* Unlocked.  Cut @rq into @cut (room for num_server): the number of
 * shares, or -EINVAL with psched_errmsg() set. */
static int kvw_raw_cut(const struct psched_node *n,
		       const struct psched_raw_request *rq, bool push,
		       struct kvw_raw_cut *cut)
{
	uint64_t per = 0, off = 0, lo, hi, b, e;
	unsigned s, k = 0;

	if (rq->nkeys && !rq->lens && push) {
		per = rq->nbytes / rq->nkeys;
		if (per * rq->nkeys != rq->nbytes)
			return psd_set_errmsg(
				-EINVAL,
				"raw push: %llu value bytes do not split "
				"evenly over %zu keys (give lens)",
				(unsigned long long)rq->nbytes, rq->nkeys);
	}
	if (rq->server) {
		if (rq->server > n->num_server)
			return psd_set_errmsg(-EINVAL,
					      "raw request: server %u of %u",
					      rq->server - 1, n->num_server);
		cut[0] = (struct kvw_raw_cut){ .srank = rq->server - 1,
					       .n = rq->nkeys };
		/* without counts every value goes, also with no keys */
		cut[0].bytes = !push	  ? 0
			       : rq->lens ? kvw_raw_bytes(rq, per, 0, rq->nkeys)
					  : rq->nbytes;
		return 1;
	}
	for (s = 0, hi = 0; s < n->num_server; s++) {
		psched_raw_key_range(n->num_server, s, &b, &e);
		lo = hi;
		hi = s + 1 == n->num_server
			     ? rq->nkeys
			     : psd_kl_lower(rq->keys, lo, rq->nkeys, e);
		if (hi == lo)
			continue;
		cut[k] = (struct kvw_raw_cut){
			.srank = s, .first = lo, .n = hi - lo, .off = off
		};
		cut[k].bytes = push ? kvw_raw_bytes(rq, per, lo, hi) : 0;
		off += cut[k++].bytes;
	}
	return (int)k;
}

/* Unlocked.  0 when the sizes of @rq add up, else -EINVAL. */
static int kvw_raw_check(const struct psched_raw_request *rq, bool push,
			 const struct kvw_raw_cut *cut, int ncut)
{
	uint64_t sum = 0;
	int k;

	if (rq->nkeys && !rq->keys)
		return psd_set_errmsg(-EINVAL,
				      "raw request of %zu keys "
				      "without keys",
				      rq->nkeys);
	if (push && rq->nbytes && !rq->vals)
		return psd_set_errmsg(-EINVAL,
				      "raw push of %llu bytes "
				      "without vals",
				      (unsigned long long)rq->nbytes);
	for (k = 0; k < ncut; k++)
		sum += cut[k].bytes;
	if (push && sum != rq->nbytes)
		return psd_set_errmsg(-EINVAL,
				      "raw push: lens add up to %llu bytes, "
				      "nbytes is %llu",
				      (unsigned long long)sum,
				      (unsigned long long)rq->nbytes);
	return 0;
}

/* Locked.  A request of the chunks @cut asks for. */
static int kvw_raw_req_make(struct psched_node *n, uint8_t type,
			    const struct psched_raw_request *rq,
			    const struct kvw_raw_cut *cut, int ncut,
			    struct kvw_req **out)
{
	struct kvw_req *r;
	int k;

	r = psd_kvw_req_alloc(n, &psd_kvw_raw, type, 1, rq->dtype);
	if (r && ncut && !(r->chunks = calloc(ncut, sizeof(*r->chunks)))) {
		psd_kvw_req_free(r);
		r = NULL;
	}
	if (!r)
		return psd_set_errmsg(-ENOMEM, "no memory for a raw request");
	r->nchunks = (size_t)ncut;
	for (k = 0; k < ncut; k++) {
		struct kvw_chunk *ch = &r->chunks[k];

		ch->req = r;
		ch->srank = (uint16_t)cut[k].srank;
		ch->off = cut[k].off;
		ch->span = cut[k].bytes;
		ch->kl_first = cut[k].first;
		ch->kl_n = cut[k].n;
		ch->node.len = 0; /* no credit, see the top of the file */
		r->srv[cut[k].srank].pending++;
	}
	r->flags = PSD_F_RAW;
	r->kl_keys = rq->keys;
	r->raw_lens = rq->lens;
	r->raw_cmd = rq->cmd;
	r->raw_tag = rq->tag;
	r->raw_answer = rq->answer;
	r->raw_answer_arg = rq->answer_arg;
	r->slots[0].key = rq->nkeys ? rq->keys[0] : 0;
	r->slots[0].src = rq->vals;
	*out = r;
	return 0;
}

int psd_kvw_raw_issue(struct psched_node *n, uint8_t type,
		      const struct psched_raw_request *rq, uint64_t *req)
{
	struct psd_kvw *w = kvw_of(n);
	bool push = kvw_is_push(type), fire = false;
	struct kvw_req *r = NULL;
	struct kvw_raw_cut *cut;
	int ret, ncut;

	ret = psd_kvw_issue_check(n, rq->cb, req);
	if (ret)
		return ret;
	if (!push && rq->nbytes)
		return psd_set_errmsg(-EINVAL, "raw pull: nbytes is set");
	cut = calloc(n->num_server ? n->num_server : 1, sizeof(*cut));
	if (!cut)
		return psd_set_errmsg(-ENOMEM, "no memory for a raw request");
	ncut = kvw_raw_cut(n, rq, push, cut);
	ret = ncut < 0 ? ncut : kvw_raw_check(rq, push, cut, ncut);
	if (!ret) {
		pthread_mutex_lock(&w->lock);
		ret = psd_kvw_fatal(n);
		if (!ret)
			ret = kvw_raw_req_make(n, type, rq, cut, ncut, &r);
		if (!ret)
			ret = psd_kvw_req_issue_unlocks(n, r, rq->priority,
							rq->cb, rq->arg, req,
							&fire);
		pthread_mutex_unlock(&w->lock);
	}
	free(cut);
	if (fire)
		psd_kvw_req_run_cb(w, r);
	return ret;
}

/* Locked.  ->hdr: a share's keys, counts and values. */
static void kvw_raw_hdr(const struct psched_node *n, const struct kvw_chunk *ch,
			struct psd_hdr *h, struct iovec *iov, int *niov)
{
	const struct kvw_req *r = ch->req;
	int k = 0;

	psd_kvw_hdr_base(n, ch, h);
	h->key = ch->kl_n ? r->kl_keys[ch->kl_first] : 0;
	h->total = ch->span;
	h->offset = r->raw_lens ? PSD_RAW_LENS : 0;
	h->part = ch->kl_n;
	h->epoch = (uint32_t)r->raw_cmd;
	h->step = r->raw_tag;
	if (ch->kl_n)
		psd_iov_add(iov, &k, r->kl_keys + ch->kl_first, ch->kl_n * 8);
	if (ch->kl_n && r->raw_lens)
		psd_iov_add(iov, &k, r->raw_lens + ch->kl_first, ch->kl_n * 4);
	if (ch->span)
		psd_iov_add(iov, &k, r->slots[0].src + ch->off, ch->span);
	h->length = psd_iov_len(iov, k);
	*niov = k;
}

/* Locked.  ->rx_any: a server's answer (checked by psd_hdr_decode()) to
 * the application. */
static void kvw_raw_rx_any(struct kvw_req *r, const struct kvw_chunk *ch,
			   const struct psd_conn *c, const struct psd_hdr *h,
			   const void *payload)
{
	struct psched_raw_msg m = {
		.cmd = (int)h->epoch,
		.tag = h->step,
		.push = kvw_is_push(r->type),
		.pull = psd_msg_is_pull(r->type),
		.sender = h->sender,
		.rank = ch->srank,
		.priority = r->priority,
	};

	if (h->offset & PSD_RAW_ASKED && h->part != ch->kl_n) {
		psd_kvw_req_error(r, -EPROTO,
				  "raw pull: server %u answered %llu keys as "
				  "asked, it was asked %llu",
				  ch->srank, (unsigned long long)h->part,
				  (unsigned long long)ch->kl_n);
		return;
	}
	if (!r->raw_answer)
		return;
	/* in a block of its own when big (psd_kvw_rx_header()) */
	psd_raw_msg_layout(&m, h, payload, c);
	if (m.nkeys && h->offset & PSD_RAW_ASKED) {
		m.keys = r->kl_keys + ch->kl_first;
		m.keys_asked = true;
	}
	r->raw_answer(&m, r->raw_answer_arg);
}

const struct kvw_family psd_kvw_raw = {
	.what = "raw ",
	.flag = PSD_F_RAW,
	.hdr = kvw_raw_hdr,
	.rx_dst = NULL,
	.rx_any = kvw_raw_rx_any,
};
