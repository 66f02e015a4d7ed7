// SPDX-License-Identifier: MIT
/*
 * KV worker, the dense family: what a worker knows of its keys, building
 * a request from the caller's arguments, cutting it into chunks per key,
 * server range (placement.h) and partition (partition.h) under the config
 * of its step, and its chunks' headers.  Every function here is Locked
 * (kvw.h).
 */
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "kvw.h"
#include "partition.h"
#include "placement.h"

struct kvw_key *psd_kvw_key_add(struct psd_kvw *w, uint64_t key, uint64_t len,
				enum psched_dtype dtype)
{
	struct kvw_key *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->total = len;
	k->dtype = (uint8_t)dtype;
	if (psd_map_put(&w->keys, key, k)) {
		free(k);
		return NULL;
	}
	return k;
}

/* Locked.  Check one key of a new request against what this worker
 * knows of it (creating it unless pulling). */
static int kvw_key_check(struct psd_kvw *w, struct psched_node *n, uint8_t type,
			 uint64_t key, uint64_t len, enum psched_dtype dtype,
			 struct kvw_key **out)
{
	const char *tn = psd_msg_type_name(type);
	struct kvw_key *k;

	if (!len || len % psched_dtype_size(dtype) ||
	    len > n->cfg.max_tensor_bytes)
		return psd_set_errmsg(
			PSCHED_ESIZE,
			"%s of key %llu: length %llu is zero, not "
			"a multiple of the element size or above "
			"PS_MAX_TENSOR_BYTES",
			tn, (unsigned long long)key, (unsigned long long)len);
	k = psd_map_get(&w->keys, key);
	if (!k && type == PSD_MSG_PULL)
		return psd_set_errmsg(PSCHED_EUNKNOWNKEY,
				      "pull of key %llu: the key was never "
				      "pushed or initialised by this worker",
				      (unsigned long long)key);
	if (!k) {
		k = psd_kvw_key_add(w, key, len, dtype);
		if (!k)
			return psd_set_errmsg(-ENOMEM, "no memory for keys");
	}
	if (k->rowbytes)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "%s of key %llu: the key is row-sparse "
				      "(a PSCHED_FAMILY_ROWS request)",
				      tn, (unsigned long long)key);
	if (k->total != len || k->dtype != dtype)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "%s of key %llu: %llu bytes of dtype %d, "
				      "but the key has %llu bytes of dtype %d",
				      tn, (unsigned long long)key,
				      (unsigned long long)len, (int)dtype,
				      (unsigned long long)k->total,
				      (int)k->dtype);
	if (k->last_req == w->gen)
		return psd_set_errmsg(-EINVAL, "%s: key %llu appears twice", tn,
				      (unsigned long long)key);
	k->last_req = w->gen;
	*out = k;
	return 0;
}

struct kvw_req *psd_kvw_req_alloc(struct psched_node *n,
				  const struct kvw_family *fam, uint8_t type,
				  size_t nkeys, enum psched_dtype dtype)
{
	struct kvw_req *r;

	r = calloc(1, sizeof(*r) + nkeys * sizeof(r->slots[0]));
	if (!r)
		return NULL;
	r->srv = calloc(n->num_server, sizeof(*r->srv));
	if (!r->srv) {
		free(r);
		return NULL;
	}
	r->fam = fam;
	r->type = type;
	r->dtype = (uint8_t)dtype;
	r->nslots = nkeys;
	r->scratch = &kvw_of(n)->scratch;
	psd_list_init(&r->park_link);
	return r;
}

/* Locked.  Gradient compression: quantise every slot's push against its
 * key's residual, in call order (the codes are packed per chunk once the
 * request is cut).  The residuals are only touched once every slot has
 * its memory. */
static int kvw_req_quantize(struct psd_kvw *w, struct kvw_req *r)
{
	struct kvw_key *k;
	size_t i, n;

	for (i = 0; i < r->nslots; i++) {
		k = psd_map_get(&w->keys, r->slots[i].key);
		n = (size_t)(r->slots[i].total / 4);
		if (!k->residual)
			k->residual = calloc(n ? n : 1, sizeof(float));
		r->slots[i].codes = psd_scratch_get(r->scratch, n ? n : 1);
		if (!k->residual || !r->slots[i].codes)
			return psd_set_errmsg(
				-ENOMEM,
				"push of key %llu: no memory to "
				"compress it",
				(unsigned long long)r->slots[i].key);
	}
	for (i = 0; i < r->nslots; i++) {
		k = psd_map_get(&w->keys, r->slots[i].key);
		psd_cmp_quantize(w->cmp_kind, w->cmp_threshold,
				 (const float *)(const void *)r->slots[i].src,
				 k->residual, r->slots[i].codes,
				 (size_t)(r->slots[i].total / 4));
	}
	r->cmp = w->cmp_kind;
	r->cmp_threshold = w->cmp_threshold;
	return 0;
}

/* Locked.  Pack each chunk's codes into r->cbuf. */
static int kvw_req_pack(struct kvw_req *r)
{
	uint64_t total = 0;
	size_t k;

	psd_scratch_put(r->scratch, r->cbuf);
	for (k = 0; k < r->nchunks; k++) {
		r->chunks[k].coff = total;
		r->chunks[k].clen = psd_cmp_len(r->cmp, r->chunks[k].span / 4);
		total += r->chunks[k].clen;
	}
	r->cbuf = psd_scratch_get(r->scratch, total ? (size_t)total : 1);
	if (!r->cbuf)
		return psd_set_errmsg(-ENOMEM,
				      "no memory for %llu compressed bytes",
				      (unsigned long long)total);
	for (k = 0; k < r->nchunks; k++) {
		const struct kvw_chunk *ch = &r->chunks[k];

		psd_cmp_pack(r->cmp, r->cmp_threshold,
			     r->slots[ch->slot].codes + ch->off / 4,
			     (size_t)(ch->span / 4), r->cbuf + ch->coff);
	}
	return 0;
}

void psd_kvw_push_step(struct psd_kvw *w, struct kvw_req *r, size_t i,
		       struct kvw_key *k)
{
	r->slots[i].step = ++k->step;
	if (k->step > w->max_step)
		w->max_step = k->step;
	/* A step beyond what the open PREPARE was told of waits for its
	 * commit. */
	if (w->preparing && k->step > w->prep_step)
		r->parked = true;
}

/* Locked.  Validate the keys and build the request; steps are only
 * advanced once every key passed. */
int psd_kvw_req_build(struct psched_node *n, uint8_t type, const uint64_t *keys,
		      size_t nkeys, const void *const *push_vals,
		      void *const *pull_vals, const uint64_t *lens,
		      enum psched_dtype dtype, struct kvw_req **out)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_key *k = NULL;
	struct kvw_req *r;
	size_t i;
	int ret;

	if (!nkeys || !keys || !lens || (unsigned)dtype > PSCHED_DTYPE_MAX)
		return psd_set_errmsg(-EINVAL,
				      "%s: no keys, no lengths or a bad dtype",
				      psd_msg_type_name(type));
	r = psd_kvw_req_alloc(n, &psd_kvw_dense, type, nkeys, dtype);
	if (!r)
		return -ENOMEM;
	w->gen++;
	for (i = 0; i < nkeys; i++) {
		ret = kvw_key_check(w, n, type, keys[i], lens[i], dtype, &k);
		if (ret) {
			psd_kvw_req_free(r);
			return ret;
		}
		r->slots[i].key = keys[i];
		r->slots[i].total = lens[i];
		r->slots[i].dst = pull_vals ? pull_vals[i] : NULL;
		r->slots[i].src = push_vals ? push_vals[i] : NULL;
		r->slots[i].step = k->step;
	}
	if (kvw_is_push(type) && dtype == PSCHED_F32 && w->cmp_kind) {
		ret = kvw_req_quantize(w, r);
		if (ret) {
			psd_kvw_req_free(r);
			return ret;
		}
	}
	for (i = 0; i < nkeys && kvw_is_push(type); i++)
		psd_kvw_push_step(w, r, i, psd_map_get(&w->keys, keys[i]));
	*out = r;
	return 0;
}

/* Locked.  Chunk size of server range @len of slot @s. */
static uint64_t kvw_chunk_size(const struct psd_kvw *w, const struct kvw_req *r,
			       const struct kvw_slot *s, uint64_t len)
{
	unsigned esize = psched_dtype_size((enum psched_dtype)r->dtype);

	/* Raw bytes are not summed but replaced by one push: cut into chunks,
	 * each chunk's last writer could differ, mixing workers' pushes. */
	if (w->fifo || r->type == PSD_MSG_INIT || !s->part ||
	    r->dtype == PSCHED_RAW)
		return len;
	return psd_part_chunk_size(s->part, esize, len);
}

/* Locked.  How many chunks @r is cut into; with @fill, fill r->chunks
 * (sized by a count first) and the per-server pending counts too. */
static uint64_t kvw_req_cut(struct psched_node *n, struct kvw_req *r, bool fill)
{
	struct psd_kvw *w = kvw_of(n);
	unsigned esize = psched_dtype_size((enum psched_dtype)r->dtype);
	bool payload = kvw_is_push(r->type) || (r->flags & PSD_F_HAS_VALUE);
	uint64_t off, len, c, cnt, j, k = 0;
	size_t i;
	unsigned s;

	for (i = 0; i < r->nslots; i++) {
		for (s = 0; s < n->num_server; s++) {
			psd_place(r->slots[i].key, r->slots[i].total, esize,
				  n->num_server, s, &off, &len);
			if (!len)
				continue;
			c = kvw_chunk_size(w, r, &r->slots[i], len);
			cnt = psd_part_count(len, c);
			for (j = 0; fill && j < cnt; j++) {
				struct kvw_chunk *ch = &r->chunks[k + j];

				ch->req = r;
				ch->slot = (uint32_t)i;
				ch->srank = (uint16_t)s;
				ch->part = c == len ? 0 : c;
				psd_part_chunk(off, len, c, j, &ch->off,
					       &ch->span);
				ch->node.len = payload ? ch->span : 0;
				r->srv[s].pending++;
			}
			k += cnt;
		}
	}
	return k;
}

/* Locked.  ->layout: cut @r into chunks (its config is set). */
static int kvw_dense_layout(struct psched_node *n, struct kvw_req *r)
{
	uint64_t total = kvw_req_cut(n, r, false);
	int ret;

	if (total > UINT32_MAX)
		return psd_set_errmsg(-E2BIG,
				      "%s of key %llu: %llu chunks; raise "
				      "PS_PARTITION_BYTES",
				      psd_msg_type_name(r->type),
				      (unsigned long long)r->slots[0].key,
				      (unsigned long long)total);
	r->chunks = calloc(total, sizeof(*r->chunks));
	if (!r->chunks)
		return psd_set_errmsg(-ENOMEM, "no memory for %llu chunks",
				      (unsigned long long)total);
	r->nchunks = total;
	kvw_req_cut(n, r, true);
	ret = r->cmp ? kvw_req_pack(r) : 0;
	if (ret) {
		r->nchunks = 0;
		memset(r->srv, 0, n->num_server * sizeof(*r->srv));
	}
	return ret;
}

/*
 * Locked.  ->send_inline: one small chunk, alone in the queue, and, if it
 * carries a payload, no push bytes in flight.  The last condition keeps a
 * burst of pushes (40 issued back to back) for the sender thread, which
 * writes its small chunks together (kvw_may_hold()): sent inline, each
 * cost a write and a wake-up of the server, and the caller's writes
 * contended for the socket with the van thread reading the acks (push
 * 4 KiB x 40: 2-5x fewer Gbit/s).  A push issued after the previous one's
 * ack (serial use), and a pull right after a push, still skip the thread
 * hand-off.
 */
static bool kvw_dense_send_inline(const struct psched_node *n,
				  const struct psd_kvw *w,
				  const struct kvw_req *r)
{
	bool payload = kvw_is_push(r->type) || (r->flags & PSD_F_HAS_VALUE);

	(void)n;
	return r->nchunks == 1 && !r->on_gpu && psd_chunkq_len(&w->q) == 1 &&
	       (!payload || !w->credit.in_flight) &&
	       r->chunks[0].span <= KVW_INLINE_MAX &&
	       psd_credit_can_start(&w->credit, r->chunks[0].node.len);
}

/* Locked.  ->hdr: the tensor bytes of @ch, or its compressed codes. */
static void kvw_dense_hdr(const struct psched_node *n,
			  const struct kvw_chunk *ch, struct psd_hdr *h,
			  struct iovec *iov, int *niov)
{
	const struct kvw_req *r = ch->req;
	bool payload = kvw_is_push(r->type) || (r->flags & PSD_F_HAS_VALUE);

	psd_kvw_hdr_base(n, ch, h);
	h->length = !payload ? 0 : r->cmp ? ch->clen : ch->span;
	iov->iov_base =
		!payload ? NULL
		: r->cmp
			? (void *)(r->cbuf + ch->coff)
			: (void *)(uintptr_t)(r->slots[ch->slot].src + ch->off);
	iov->iov_len = (size_t)h->length;
	*niov = 1;
}

/* Locked.  ->rx_dst: the answer's bytes go where the chunk asked. */
static void *kvw_dense_rx_dst(struct kvw_req *r, const struct kvw_chunk *ch,
			      const struct psd_hdr *h, const struct psd_conn *c)
{
	struct kvw_slot *s = &r->slots[ch->slot];

	(void)c;
	return s->dst && s->total == h->total && ch->off == h->offset
		       ? s->dst + h->offset
		       : NULL;
}

const struct kvw_family psd_kvw_dense = {
	.what = "",
	.stepped = true,
	.keyed = true,
	.layout = kvw_dense_layout,
	.send_inline = kvw_dense_send_inline,
	.hdr = kvw_dense_hdr,
	.rx_dst = kvw_dense_rx_dst,
};
