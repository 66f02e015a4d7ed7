// SPDX-License-Identifier: MIT
/*
 * KV worker: row-sparse keys (embedding tables; common/rows.h, wire.h
 * PSD_F_ROWS).  A push of (row ids, rows) is sorted by row id, duplicate
 * ids summed, and sliced by the servers' row ranges; every server holding
 * rows of the table gets at least one piece per push (an empty one if no
 * row is its), since its step completes when every worker's pieces are
 * in.  A pull asks only the servers owning the rows it names.  A
 * pushpull is a push whose pieces are answered with their rows once the
 * step is applied (one sort, one request per piece).  Each
 * server's slice is cut into pieces of the partition size of the step's
 * config and the pieces go through the same priority queue and credit
 * gate as dense chunks (kvw.h).  Locking words as in kvw.h.
 *
 * Copies: when the ids are sorted and distinct ("direct"), a push sends
 * its ids and rows straight from the caller's arrays (only each piece's
 * 8-byte prefix is built) and a pull's answers land straight in the
 * caller's rows; otherwise a push packs its distinct rows (summing
 * duplicates) when each piece is sent, where the transport wants them
 * (rows_fill(): the shm ring, else r->cbuf), and a pull's
 * answers, read where the transport has them (the shm ring) or landed
 * in a buffer of distinct rows, are copied out to every position asking
 * them (a pushpull does both).
 */
#include <stdlib.h>
#include <string.h>

#include "kvw.h"
#include "rows.h"

/* One asked row: its id and where it is in the caller's buffer. */
struct kvw_rows_pair {
	uint64_t id;
	uint64_t pos;
};

struct kvw_rows {
	uint64_t rows;
	uint64_t rowbytes;
	size_t n;		     /* rows asked (pairs) */
	struct kvw_rows_pair *pairs; /* sorted by id, then position */
	size_t nu;		     /* distinct ids */
	size_t *ustart;		     /* [nu + 1]: first pair of each id */
	const uint64_t *ids;	     /* the caller's ids */
	const uint8_t *src;	     /* push: the caller's rows */
	uint8_t *out;		     /* pull: the caller's buffer */
	uint8_t *land;		     /* pull: answers land here */
	bool direct;		     /* land == out: ids sorted, distinct */
	size_t *cu;		     /* per chunk: first distinct id */
	size_t *cn;		     /* per chunk: distinct ids */
	struct psd_scratch *scratch; /* where the big buffers go back */
};

/* Any lock: free @x, its big buffers back to the worker's scratch cache
 * (NULL is a no-op). */
static void rows_ctx_free(struct kvw_rows *x)
{
	if (!x)
		return;
	psd_scratch_put(x->scratch, x->pairs);
	psd_scratch_put(x->scratch, x->ustart);
	if (!x->direct)
		psd_scratch_put(x->scratch, x->land);
	free(x->cu);
	free(x->cn);
	free(x);
}

static int rows_pair_cmp(const void *a, const void *b)
{
	const struct kvw_rows_pair *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

#define ROWS_RADIX_MAX 12 /* bits a pass at most */

/* Stable LSD radix sort of @p (@n pairs, ids below @rows) by id, in as
 * few passes of at most ROWS_RADIX_MAX bits as the ids need (ids below
 * 2^24, 16 M rows: two): equal ids keep their order.  0 or -ENOMEM. */
static int rows_radix(struct psd_scratch *sc, struct kvw_rows_pair *p, size_t n,
		      uint64_t rows)
{
	struct kvw_rows_pair *tmp = psd_scratch_get(sc, n * sizeof(*tmp)),
			     *a = p, *b = tmp, *t;
	unsigned bits = rows > 1 ? 64 - (unsigned)__builtin_clzll(rows - 1) : 1;
	unsigned passes = (bits + ROWS_RADIX_MAX - 1) / ROWS_RADIX_MAX;
	unsigned digit = (bits + passes - 1) / passes, shift;
	uint64_t mask = (1ull << digit) - 1;
	uint32_t cnt[1u << ROWS_RADIX_MAX], sum, c;
	size_t i;

	if (!tmp)
		return -ENOMEM;
	for (shift = 0; shift < bits; shift += digit) {
		memset(cnt, 0, sizeof(cnt));
		for (i = 0; i < n; i++)
			cnt[(a[i].id >> shift) & mask]++;
		for (i = 0, sum = 0; i <= mask; i++) {
			c = cnt[i];
			cnt[i] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			b[cnt[(a[i].id >> shift) & mask]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	if (a != p)
		memcpy(p, a, n * sizeof(*p));
	psd_scratch_put(sc, tmp);
	return 0;
}

/* Locked.  Check and sort the ids of a request on key @k. */
static int rows_ctx_build(struct psd_kvw *w, const struct kvw_key *k,
			  uint64_t key, size_t n, const uint64_t *ids,
			  struct kvw_rows **out)
{
	struct kvw_rows *x = calloc(1, sizeof(*x));
	size_t i, u = 0;
	bool sorted = true;

	if (!x)
		return -ENOMEM;
	x->scratch = &w->scratch;
	x->rows = k->total / k->rowbytes;
	x->rowbytes = k->rowbytes;
	x->n = n;
	x->direct = true; /* nothing in land to free yet */
	x->pairs = psd_scratch_get(x->scratch, (n ? n : 1) * sizeof(*x->pairs));
	x->ustart = psd_scratch_get(x->scratch, (n + 1) * sizeof(*x->ustart));
	if (!x->pairs || !x->ustart) {
		rows_ctx_free(x);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		if (ids[i] >= x->rows) {
			rows_ctx_free(x);
			return psd_set_errmsg(
				-EINVAL,
				"row-sparse key %llu: row id %llu (index %zu) "
				"is out of range, the table has %llu rows",
				(unsigned long long)key,
				(unsigned long long)ids[i], i,
				(unsigned long long)(k->total / k->rowbytes));
		}
		x->pairs[i].id = ids[i];
		x->pairs[i].pos = i;
		if (i && ids[i] <= ids[i - 1])
			sorted = false;
	}
	if (!sorted && n > 64 && !rows_radix(x->scratch, x->pairs, n, x->rows))
		sorted = false;
	else if (!sorted)
		qsort(x->pairs, n, sizeof(*x->pairs), rows_pair_cmp);
	for (i = 0; i < n; i++)
		if (!i || x->pairs[i].id != x->pairs[i - 1].id)
			x->ustart[u++] = i;
	x->nu = u;
	x->ustart[u] = n;
	x->direct = sorted;
	x->ids = ids;
	*out = x;
	return 0;
}

/* Pairs a row loop prefetches ahead of the one it copies (their rows sit
 * anywhere in the caller's buffer). */
#define ROWS_AHEAD 8

/* Prefetch the caller's row of pair @k (< x->n), for a write when @wr.
 * Always inlined: gcc drops calls of a helper that only prefetches. */
static inline __attribute__((always_inline)) void
rows_prefetch(const struct kvw_rows *x, const uint8_t *base, size_t k, bool wr)
{
	const uint8_t *p = base + x->pairs[k].pos * x->rowbytes;
	uint64_t off, end = x->rowbytes < 512 ? x->rowbytes : 512;

	for (off = 0; off < end; off += 64) {
		if (wr)
			__builtin_prefetch(p + off, 1);
		else
			__builtin_prefetch(p + off, 0);
	}
}

/* Pack distinct rows [u0, u0 + cnt) of a push after the prefix at @buf:
 * their ids, then the rows (duplicates summed).  Reads only what the
 * request's layout made, so it runs unlocked at send time
 * (rows_fill()). */
static void rows_pack_push(const struct kvw_rows *x, size_t u0, size_t cnt,
			   uint8_t dtype, uint8_t *buf)
{
	uint8_t *rows = buf + PSD_ROWS_PREFIX + cnt * 8;
	size_t u, j, end;

	end = x->ustart[u0 + cnt];
	for (u = 0; u < cnt; u++) {
		const struct kvw_rows_pair *pr = &x->pairs[x->ustart[u0 + u]];
		uint8_t *dst = rows + u * x->rowbytes;

		j = x->ustart[u0 + u];
		if (j + ROWS_AHEAD < end)
			rows_prefetch(x, x->src, j + ROWS_AHEAD, false);
		memcpy(buf + PSD_ROWS_PREFIX + u * 8, &pr->id, 8);
		memcpy(dst, x->src + pr->pos * x->rowbytes, x->rowbytes);
		/* Duplicate ids in one push are summed here. */
		for (j++; j < x->ustart[u0 + u + 1]; j++) {
			if (j + ROWS_AHEAD < end)
				rows_prefetch(x, x->src, j + ROWS_AHEAD, false);
			psd_rows_add(dtype, dst,
				     x->src + x->pairs[j].pos * x->rowbytes,
				     x->rowbytes);
		}
	}
}

/* ->fill of a push piece that is not direct: its ids and rows packed
 * where the transport wants them (psd_conn_send_fill()).  Unlocked, while
 * the chunk is being sent; @arg is the chunk. */
static void rows_fill(void *arg, uint8_t *dst, size_t len)
{
	const struct kvw_chunk *ch = arg;
	const struct kvw_req *r = ch->req;
	size_t k = (size_t)(ch - r->chunks);

	(void)len;
	if (dst != r->cbuf + ch->coff)
		memcpy(dst, r->cbuf + ch->coff, PSD_ROWS_PREFIX);
	rows_pack_push(r->rows, r->rows->cu[k], r->rows->cn[k], r->dtype, dst);
}

/* The prefix of a push piece of @cnt rows; the rest is packed when it is
 * sent (rows_fill()) unless the ids are direct. */
static void rows_pack_prefix(size_t cnt, uint32_t pieces, uint8_t *buf)
{
	struct psd_rows_prefix p = { .nrows = (uint32_t)cnt, .pieces = pieces };

	psd_rows_prefix_put(buf, &p);
}

static void rows_pack_pull(const struct kvw_rows *x, size_t u0, size_t cnt,
			   uint8_t *buf)
{
	struct psd_rows_prefix p = { .nrows = (uint32_t)cnt };
	size_t u;

	psd_rows_prefix_put(buf, &p);
	for (u = 0; u < cnt; u++)
		memcpy(buf + PSD_ROWS_PREFIX + u * 8,
		       &x->pairs[x->ustart[u0 + u]].id, 8);
}

/*
 * Bytes of a row-sparse piece when the config's partition is 0 (whole
 * ranges): a server's slice of a large batch goes in pieces, so that the
 * server folds (and answers) one piece while the worker packs the next,
 * and every piece fits in the shm ring (placed, read in place).  512 KiB
 * measured best of 0, 256 KiB and 512 KiB over shm and tcp together
 * (docs/c-api.md "Row-sparse tensors").
 */
#define KVW_ROWS_PIECE (512u * 1024u)

/* Locked.  Distinct ids per piece, and which servers get pieces. */
static uint64_t rows_per_piece(const struct psd_kvw *w, const struct kvw_req *r)
{
	const struct kvw_rows *x = r->rows;
	uint64_t per = psd_msg_is_push(r->type) ? 8 + x->rowbytes : x->rowbytes;
	uint64_t part = r->slots[0].part ? r->slots[0].part : KVW_ROWS_PIECE;

	if (w->fifo)
		return UINT32_MAX;
	if (part < per)
		return 1;
	per = part / per;
	return per < UINT32_MAX ? per : UINT32_MAX;
}

/* Locked.  Count pieces: first distinct id of server @s in *@u0. */
static uint64_t rows_server_span(const struct kvw_rows *x, unsigned ns,
				 unsigned s, size_t *u0, size_t *cnt)
{
	uint64_t lo, n;
	size_t u = *u0;

	psd_rows_place(x->rows, ns, s, &lo, &n);
	while (u < x->nu && x->pairs[x->ustart[u]].id < lo + n)
		u++;
	*cnt = u - *u0;
	return n;
}

/* Locked.  Pieces of server @s of @r: push: at least one if it holds
 * rows; pull, init: as its rows ask. */
static uint64_t rows_pieces(const struct kvw_req *r, uint64_t held, size_t cnt,
			    uint64_t per)
{
	if (!held)
		return 0;
	if (r->type == PSD_MSG_INIT)
		return 1;
	if (r->type == PSD_MSG_PULL && !cnt)
		return 0;
	return cnt ? (cnt + per - 1) / per : 1;
}

/* Locked.  Payload bytes of a piece of @cnt distinct rows. */
static uint64_t rows_len(const struct kvw_req *r, size_t cnt)
{
	if (psd_msg_is_push(r->type))
		return PSD_ROWS_PREFIX + cnt * (8 + r->rows->rowbytes);
	return r->type == PSD_MSG_PULL ? PSD_ROWS_PREFIX + cnt * 8 : 0;
}

/* Locked.  Bytes of r->cbuf it needs: a direct push's prefix only. */
static uint64_t rows_room(const struct kvw_req *r, size_t cnt)
{
	return psd_msg_is_push(r->type) && r->rows->direct ? PSD_ROWS_PREFIX
							   : rows_len(r, cnt);
}

/* Locked.  Fill chunk @k and its payload room. */
static void rows_chunk(struct kvw_req *r, size_t k, unsigned s, uint64_t lo,
		       uint64_t held, size_t u0, size_t cnt, uint64_t *boff)
{
	struct kvw_rows *x = r->rows;
	struct kvw_chunk *ch = &r->chunks[k];

	ch->req = r;
	ch->slot = 0;
	ch->srank = (uint16_t)s;
	ch->off = lo * x->rowbytes;
	ch->span = held * x->rowbytes;
	ch->part = x->rowbytes;
	x->cu[k] = u0;
	x->cn[k] = cnt;
	ch->coff = *boff;
	ch->clen = rows_len(r, cnt);
	ch->node.len = psd_msg_is_push(r->type) ? ch->clen : 0;
	*boff += rows_room(r, cnt);
	r->srv[s].pending++;
}

/* Locked.  Cut @r into pieces (two passes: count, then fill). */
static int rows_cut(struct psched_node *n, struct kvw_req *r, uint64_t per,
		    bool fill, size_t *nchunks, uint64_t *bytes)
{
	struct kvw_rows *x = r->rows;
	size_t u0 = 0, cnt, k = 0, j, take;
	uint64_t held, lo, pcs, boff = 0;
	unsigned s;

	for (s = 0; s < n->num_server; s++) {
		held = rows_server_span(x, n->num_server, s, &u0, &cnt);
		psd_rows_place(x->rows, n->num_server, s, &lo, &held);
		pcs = rows_pieces(r, held, cnt, per);
		for (j = 0; j < pcs; j++, k++) {
			take = cnt - j * per < per ? cnt - j * per : per;
			if (!cnt)
				take = 0;
			if (fill)
				rows_chunk(r, k, s, lo, held, u0 + j * per,
					   take, &boff);
			else
				boff += rows_room(r, take);
			if (fill && psd_msg_is_push(r->type))
				rows_pack_prefix(take, (uint32_t)pcs,
						 r->cbuf + r->chunks[k].coff);
			else if (fill && r->type == PSD_MSG_PULL)
				rows_pack_pull(x, u0 + j * per, take,
					       r->cbuf + r->chunks[k].coff);
		}
		u0 += cnt;
	}
	*nchunks = k;
	*bytes = boff;
	return 0;
}

/* Locked.  ->layout (its config is set): cut @r into pieces and pack
 * their payloads. */
static int rows_layout(struct psched_node *n, struct kvw_req *r)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_rows *x = r->rows;
	uint64_t per = rows_per_piece(w, r), bytes;
	size_t nch;

	rows_cut(n, r, per, false, &nch, &bytes);
	r->chunks = calloc(nch ? nch : 1, sizeof(*r->chunks));
	x->cu = calloc(nch ? nch : 1, sizeof(*x->cu));
	x->cn = calloc(nch ? nch : 1, sizeof(*x->cn));
	r->cbuf = psd_scratch_get(r->scratch, bytes ? bytes : 1);
	if (!x->direct && psd_msg_is_pull(r->type) && !x->land)
		x->land = psd_scratch_get(x->scratch,
					  x->nu ? x->nu * x->rowbytes : 1);
	if (x->direct)
		x->land = x->out;
	if (!r->chunks || !x->cu || !x->cn || !r->cbuf ||
	    (psd_msg_is_pull(r->type) && !x->land && x->nu))
		return psd_set_errmsg(-ENOMEM, "no memory to cut a row-sparse "
					       "request");
	r->nchunks = nch;
	rows_cut(n, r, per, true, &nch, &bytes);
	return 0;
}

/* Locked.  ->filled: a push piece whose ids are not direct. */
static bool rows_filled(const struct kvw_chunk *ch)
{
	const struct kvw_req *r = ch->req;

	return psd_msg_is_push(r->type) && !r->rows->direct &&
	       ch->clen > PSD_ROWS_PREFIX;
}

/* Locked.  ->hdr: the header and payload (up to 3 iovecs) of row-sparse
 * chunk @ch; a filled chunk: one, the buffer rows_fill() writes when the
 * transport cannot place it. */
static void rows_hdr(const struct psched_node *n, const struct kvw_chunk *ch,
		     struct psd_hdr *h, struct iovec *iov, int *niov)
{
	const struct kvw_req *r = ch->req;
	const struct kvw_rows *x = r->rows;
	size_t k = (size_t)(ch - r->chunks);

	psd_kvw_hdr_base(n, ch, h);
	h->flags = PSD_F_ROWS;
	h->part = x->rowbytes;
	h->length = ch->clen;
	iov[0].iov_base = ch->clen ? r->cbuf + ch->coff : NULL;
	iov[0].iov_len = (size_t)ch->clen;
	*niov = 1;
	if (!psd_msg_is_push(r->type) || !x->direct)
		return;
	/* Sorted, distinct ids: distinct id u is the caller's row u. */
	iov[0].iov_len = PSD_ROWS_PREFIX;
	if (!x->cn[k])
		return; /* an empty piece */
	iov[1].iov_base = (void *)(uintptr_t)(x->ids + x->cu[k]);
	iov[1].iov_len = x->cn[k] * 8;
	iov[2].iov_base = (void *)(uintptr_t)(x->src + x->cu[k] * x->rowbytes);
	iov[2].iov_len = x->cn[k] * x->rowbytes;
	*niov = 3;
}

/* Locked.  ->rx_len: the rows of its distinct ids. */
static uint64_t rows_rx_len(const struct kvw_req *r, const struct kvw_chunk *ch)
{
	return r->rows->cn[ch - r->chunks] * r->rows->rowbytes;
}

/* Locked.  ->rx_dst: rows copied out to their positions anyway are read
 * where the transport has them (values only: nothing of them is
 * checked); others land in place. */
static void *rows_rx_dst(struct kvw_req *r, const struct kvw_chunk *ch,
			 const struct psd_hdr *h, const struct psd_conn *c)
{
	const struct kvw_rows *x = r->rows;

	(void)h;
	if (!x->land)
		return NULL;
	return !x->direct && c->rx_inplace
		       ? c->rx_inplace
		       : x->land + x->cu[ch - r->chunks] * x->rowbytes;
}

/* Locked.  Copy answered distinct rows (of chunk @k, at @src) to every
 * position asking them. */
static void rows_scatter(const struct kvw_rows *x, size_t k, const uint8_t *src)
{
	size_t u, j, end = x->ustart[x->cu[k] + x->cn[k]];

	for (u = x->cu[k]; u < x->cu[k] + x->cn[k]; u++)
		for (j = x->ustart[u]; j < x->ustart[u + 1]; j++) {
			if (j + ROWS_AHEAD < end)
				rows_prefetch(x, x->out, j + ROWS_AHEAD, true);
			memcpy(x->out + x->pairs[j].pos * x->rowbytes,
			       src + (u - x->cu[k]) * x->rowbytes, x->rowbytes);
		}
}

/* Locked.  ->rx_landed: copy the rows out unless they are in place. */
static void rows_rx_landed(struct kvw_req *r, const struct kvw_chunk *ch,
			   const void *payload)
{
	if (!r->rows->direct && payload)
		rows_scatter(r->rows, (size_t)(ch - r->chunks), payload);
}

static void rows_free(struct kvw_req *r)
{
	rows_ctx_free(r->rows);
}

/* Locked.  A request of one slot on row-sparse key @k. */
static struct kvw_req *rows_req_alloc(struct psched_node *n, uint8_t type,
				      uint64_t key, const struct kvw_key *k)
{
	struct kvw_req *r =
		psd_kvw_req_alloc(n, &psd_kvw_rowsparse, type, 1, k->dtype);

	if (!r)
		return NULL;
	r->slots[0].key = key;
	r->slots[0].total = k->total;
	r->slots[0].step = k->step;
	return r;
}

/* Locked.  Build a request (not registered yet). */
static int rows_req_make(struct psched_node *n, uint8_t type, uint64_t key,
			 size_t nids, const uint64_t *ids, const void *src,
			 void *out, struct kvw_req **rp)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_key *k = psd_map_get(&w->keys, key);
	struct kvw_rows *x = NULL;
	struct kvw_req *r;
	int ret;

	if (!k || !k->rowbytes)
		return psd_set_errmsg(PSCHED_EUNKNOWNKEY,
				      "key %llu is not a row-sparse key this "
				      "worker initialised "
				      "(psched_row_sparse_init)",
				      (unsigned long long)key);
	ret = rows_ctx_build(w, k, key, nids, ids, &x);
	if (ret)
		return ret == -ENOMEM ? psd_set_errmsg(ret, "no memory") : ret;
	x->src = src;
	x->out = out;
	r = rows_req_alloc(n, type, key, k);
	if (!r) {
		rows_ctx_free(x);
		return psd_set_errmsg(-ENOMEM, "no memory for a request");
	}
	r->rows = x;
	r->flags = PSD_F_ROWS;
	if (psd_msg_is_push(type))
		psd_kvw_push_step(w, r, 0, k);
	*rp = r;
	return 0;
}

/*
 * Locked.  ->send_inline: the caller sends (and packs) @r itself when its
 * pieces, one per server at most, are all that is queued and nothing is
 * in flight (a lone request, as a training step's embedding pushpull
 * is), so handing them to the sender thread would only add its wake-up
 * to the request's time.  Other requests queued or in flight keep the
 * sender thread's order and batching.
 */
static bool rows_send_inline(const struct psched_node *n,
			     const struct psd_kvw *w, const struct kvw_req *r)
{
	return r->nchunks && r->nchunks <= n->num_server &&
	       psd_chunkq_len(&w->q) == r->nchunks && !w->credit.in_flight;
}

const struct kvw_family psd_kvw_rowsparse = {
	.what = "row-sparse ",
	.flag = PSD_F_ROWS,
	.stepped = true,
	.keyed = true,
	.layout = rows_layout,
	.send_inline = rows_send_inline,
	.hdr = rows_hdr,
	.filled = rows_filled,
	.fill = rows_fill,
	.rx_len = rows_rx_len,
	.rx_dst = rows_rx_dst,
	.rx_landed = rows_rx_landed,
	.free = rows_free,
};

/* Unlocked.  Issue a row-sparse request. */
int psd_kvw_rows_issue(struct psched_node *n, uint8_t type, uint64_t key,
		       size_t nids, const uint64_t *ids, const void *src,
		       void *out, int priority, psched_done_fn *cb, void *arg,
		       uint64_t *req)
{
	struct kvw_req *r = NULL;
	bool fire = false;
	int ret;

	ret = psd_kvw_issue_check(n, cb, req);
	if (ret)
		return ret;
	if (nids && (!ids || (psd_msg_is_push(type) && !src) ||
		     (type != PSD_MSG_PUSH && !out)))
		return psd_set_errmsg(-EINVAL,
				      "row-sparse %s of key %llu: "
				      "no row ids or no row buffer",
				      psd_msg_type_name(type),
				      (unsigned long long)key);
	if (nids > UINT32_MAX)
		return psd_set_errmsg(-E2BIG, "more than 2^32 rows at once");
	pthread_mutex_lock(&kvw_of(n)->lock);
	ret = psd_kvw_fatal(n);
	if (!ret)
		ret = rows_req_make(n, type, key, nids, ids, src, out, &r);
	if (!ret)
		ret = psd_kvw_req_issue_unlocks(n, r, priority, cb, arg, req,
						&fire);
	pthread_mutex_unlock(&kvw_of(n)->lock);
	if (fire)
		psd_kvw_req_run_cb(kvw_of(n), r);
	return ret;
}

/* Locked.  Declare row-sparse key @key on this worker. */
static int rows_key_declare(struct psd_kvw *w, uint64_t key, uint64_t rows,
			    uint64_t rowbytes, enum psched_dtype dtype,
			    uint64_t max)
{
	struct kvw_key *k = psd_map_get(&w->keys, key);

	if (!rows || !rowbytes || rows > max / rowbytes)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "row-sparse key %llu: %llu rows of %llu "
				      "bytes: empty, or above "
				      "PS_MAX_TENSOR_BYTES",
				      (unsigned long long)key,
				      (unsigned long long)rows,
				      (unsigned long long)rowbytes);
	if (k && (k->rowbytes != rowbytes || k->dtype != dtype ||
		  k->total != rows * rowbytes))
		return psd_set_errmsg(PSCHED_ESIZE,
				      "key %llu already exists with another "
				      "shape or dtype",
				      (unsigned long long)key);
	if (!k && !(k = psd_kvw_key_add(w, key, rows * rowbytes, dtype)))
		return psd_set_errmsg(-ENOMEM, "no memory for keys");
	k->rowbytes = rowbytes;
	return 0;
}

int psched_row_sparse_init(struct psched_node *n, uint64_t key, uint64_t rows,
			   uint64_t width, enum psched_dtype dtype,
			   unsigned timeout_ms)
{
	struct psd_kvw *w = n ? kvw_of(n) : NULL;
	uint64_t req = 0;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL, "only workers initialise keys");
	if ((unsigned)dtype > PSCHED_DTYPE_MAX || !width || width > UINT32_MAX)
		return psd_set_errmsg(-EINVAL,
				      "row-sparse key %llu: bad dtype or width",
				      (unsigned long long)key);
	pthread_mutex_lock(&w->lock);
	ret = rows_key_declare(w, key, rows, width * psched_dtype_size(dtype),
			       dtype, n->cfg.max_tensor_bytes);
	pthread_mutex_unlock(&w->lock);
	if (ret)
		return ret;
	ret = psd_kvw_rows_issue(n, PSD_MSG_INIT, key, 0, NULL, NULL, NULL, 0,
				 NULL, NULL, &req);
	return psd_kvw_init_wait(n, ret, req, timeout_ms);
}
