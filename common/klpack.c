// SPDX-License-Identifier: MIT
/*
 * Packed key lists (common/klpack.h): the worker's key-list cache and
 * the packed key section of a request (PSD_F_KLPACKED, common/wire.h).
 *
 * Why: 10 M keys as plain 8-byte words are 80 MB, which the worker
 * copied into its cache and sent to the servers, and the servers received
 * into fresh pages -- each fresh page costs about as much to fault in as
 * to fill.  Sorted keys are mostly regular: packed, the same exact list
 * takes well under a MB for strided keys, 5-6 bytes a key at worst.
 *
 * Packing is arithmetic mod 2^64, so any list packs and compares
 * exactly; unpacking (what a server does with a peer's bytes) checks
 * every rule and that the keys come out strictly ascending.
 */
#include <errno.h>
#include <string.h>

#include "bigmem.h"
#include "klpack.h"

/* Bytes that hold @x (0 for 0). */
static unsigned klpack_width(uint64_t x)
{
	unsigned w = 0;

	while (x) {
		w++;
		x >>= 8;
	}
	return w;
}

static inline uint64_t klpack_le64(const uint8_t *p)
{
	uint64_t x;

	memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return x;
}

static inline void klpack_put64(uint8_t *p, uint64_t x)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	memcpy(p, &x, 8);
}

static inline uint64_t klpack_mask(unsigned w)
{
	return w >= 8 ? UINT64_MAX : (1ull << (8 * w)) - 1;
}

/* Keys in block @b of a list of @n keys. */
static inline uint64_t klpack_blen(uint64_t n, uint64_t b)
{
	uint64_t first = b * PSD_KLPACK_BLK;

	return n - first < PSD_KLPACK_BLK ? n - first : PSD_KLPACK_BLK;
}

static inline uint64_t klpack_nblk(uint64_t n)
{
	return n / PSD_KLPACK_BLK + (n % PSD_KLPACK_BLK != 0);
}

/* P for @nblk blocks and @e excess bytes. */
static inline uint64_t klpack_len(uint64_t nblk, uint64_t e)
{
	return (17 * nblk + e + 7 + 7) & ~7ull;
}

uint64_t psd_klpack_min_len(uint64_t n)
{
	return n ? klpack_len(klpack_nblk(n), 0) : 0;
}

/* The buffer holds at least @len bytes; its first @keep kept. */
static int klpack_reserve(struct psd_klpack *p, uint64_t len, uint64_t keep)
{
	uint8_t *nb;

	if (len <= p->cap)
		return 0;
	nb = psd_big_alloc(len, p->huge, false);
	if (!nb)
		return -ENOMEM;
	if (keep)
		memcpy(nb, p->buf, (size_t)keep);
	psd_big_free(p->buf);
	p->buf = nb;
	p->cap = len;
	return 0;
}

/* Pass 1: each block's first key, step and width into the table; the
 * excess bytes they need.  *@sorted: the keys are strictly ascending
 * (found on the way, so a caller needs no pass of its own for it). */
static uint64_t klpack_table(uint8_t *buf, const uint64_t *keys, uint64_t n,
			     bool *sorted)
{
	uint64_t nblk = klpack_nblk(n), b, i, e = 0, down = 0;

	for (b = 0; b < nblk; b++) {
		const uint64_t *k = keys + b * PSD_KLPACK_BLK;
		uint64_t len = klpack_blen(n, b);
		uint64_t lo = UINT64_MAX, hi = 0, d0, odd = 0;
		unsigned w;

		if (b)
			down |= k[0] <= k[-1];
		/* strided blocks first: a branch-free, vectorised test */
		d0 = len > 1 ? k[1] - k[0] : 0;
		for (i = 1; i < len; i++)
			odd |= (k[i] - k[i - 1]) ^ d0;
		for (i = 1; odd && i < len; i++) {
			uint64_t d = k[i] - k[i - 1];

			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
			down |= k[i] <= k[i - 1];
		}
		if (!odd) {
			/* every gap d0 (mod 2^64): ascending when it is
			 * not 0 and the block does not wrap */
			lo = hi = d0;
			down |= len > 1 &&
				(!d0 || d0 > (UINT64_MAX - k[0]) / (len - 1));
		}
		w = klpack_width(hi - lo);
		klpack_put64(buf + 16 * b, k[0]);
		klpack_put64(buf + 16 * b + 8, lo);
		buf[16 * nblk + b] = (uint8_t)w;
		e += (len - 1) * w;
	}
	*sorted = !down;
	return e;
}

int psd_klpack_set(struct psd_klpack *p, const uint64_t *keys, uint64_t n,
		   uint64_t max_len)
{
	uint64_t nblk = klpack_nblk(n), tbl = 17 * nblk, e, plen, b, i;
	uint8_t *o;

	p->n = 0;
	p->len = 0;
	p->sorted = true;
	if (!n)
		return 0;
	if (klpack_reserve(p, tbl + 8, 0)) {
		p->sorted = false;
		return -ENOMEM;
	}
	e = klpack_table(p->buf, keys, n, &p->sorted);
	plen = klpack_len(nblk, e);
	if (plen > max_len)
		return 1;
	if (klpack_reserve(p, plen, tbl)) {
		p->sorted = false;
		return -ENOMEM;
	}
	/* pass 2: the excesses (none for a strided block); each store
	 * writes 8 bytes, within plen by the length rule */
	o = p->buf + tbl;
	for (b = 0; b < nblk; b++) {
		const uint64_t *k = keys + b * PSD_KLPACK_BLK;
		unsigned w = p->buf[16 * nblk + b];
		uint64_t step = klpack_le64(p->buf + 16 * b + 8);
		uint64_t len = klpack_blen(n, b);

		for (i = 1; w && i < len; i++, o += w)
			klpack_put64(o, k[i] - k[i - 1] - step);
	}
	memset(p->buf + tbl + e, 0, (size_t)(plen - tbl - e));
	p->n = n;
	p->len = plen;
	return 0;
}

bool psd_klpack_equal(const struct psd_klpack *p, const uint64_t *keys,
		      uint64_t n)
{
	uint64_t nblk = klpack_nblk(n), b, i;
	const uint8_t *r;

	if (n != p->n)
		return false;
	r = p->buf + 17 * nblk;
	for (b = 0; b < nblk; b++) {
		const uint64_t *k = keys + b * PSD_KLPACK_BLK;
		uint64_t len = klpack_blen(n, b);
		unsigned w = p->buf[16 * nblk + b];
		uint64_t step = klpack_le64(p->buf + 16 * b + 8);
		uint64_t bad = k[0] ^ klpack_le64(p->buf + 16 * b);
		uint64_t m = klpack_mask(w);

		if (!w) {
			/* branch-free, vectorised */
			for (i = 1; i < len; i++)
				bad |= (k[i] - k[i - 1]) ^ step;
		} else {
			for (i = 1; i < len; i++, r += w)
				bad |= (k[i] - k[i - 1]) ^
				       (step + (klpack_le64(r) & m));
		}
		if (bad)
			return false;
	}
	return true;
}

void psd_klpack_free(struct psd_klpack *p)
{
	psd_big_free(p->buf);
	memset(p, 0, sizeof(*p));
}

/* The table and widths of @nblk blocks of @n keys: the excess bytes they
 * name, or UINT64_MAX for a width above 8. */
static uint64_t klpack_excess(const uint8_t *src, uint64_t n, uint64_t nblk)
{
	const uint8_t *wd = src + 16 * nblk;
	uint64_t b, e = 0;
	unsigned big = 0;

	for (b = 0; b < nblk; b++) {
		big |= wd[b] > 8;
		e += (klpack_blen(n, b) - 1) * wd[b];
	}
	return big ? UINT64_MAX : e;
}

int psd_klpack_rd_init(struct psd_klpack_rd *rd, const uint8_t *src,
		       uint64_t len, uint64_t n, const char **why)
{
	uint64_t nblk = klpack_nblk(n), e;

	memset(rd, 0, sizeof(*rd));
	if (!n || len % 8 || len < psd_klpack_min_len(n)) {
		*why = "packed keys: section length breaks the rule for its "
		       "key count";
		return -EPROTO;
	}
	e = klpack_excess(src, n, nblk);
	if (e == UINT64_MAX) {
		*why = "packed keys: a width above 8 bytes";
		return -EPROTO;
	}
	if (klpack_len(nblk, e) != len) {
		*why = "packed keys: section length differs from what its "
		       "widths and key count take";
		return -EPROTO;
	}
	rd->src = src;
	rd->n = n;
	rd->nblk = nblk;
	rd->r = src + 17 * nblk;
	return 0;
}

uint64_t psd_klpack_rd_next(struct psd_klpack_rd *rd, uint64_t *k)
{
	const uint8_t *src = rd->src, *r = rd->r;
	uint64_t b = rd->b, blen, x, step, m, i;
	uint64_t gap = 0, same = 0, wrap = 0;
	unsigned w;

	if (b >= rd->nblk)
		return 0;
	blen = klpack_blen(rd->n, b);
	x = klpack_le64(src + 16 * b);
	step = klpack_le64(src + 16 * b + 8);
	w = src[16 * rd->nblk + b];
	m = klpack_mask(w);
	if (b)
		same |= x <= rd->last;
	k[0] = x;
	if (!w) {
		/* a strided block: no per-key checks */
		same |= blen > 1 && !step;
		wrap |= blen > 1 && step > (UINT64_MAX - x) / (blen - 1);
		for (i = 1; i < blen; i++)
			k[i] = x + i * step;
	} else {
		for (i = 1; i < blen; i++, r += w) {
			uint64_t d = step + (klpack_le64(r) & m);
			uint64_t nx = x + d;

			gap |= d < step;
			same |= !d;
			wrap |= nx < x;
			k[i] = nx;
			x = nx;
		}
	}
	rd->last = k[blen - 1];
	rd->r = r;
	rd->b = b + 1;
	rd->gap |= gap;
	rd->same |= same;
	rd->wrap |= wrap;
	return blen;
}

void psd_klpack_rd_seek(struct psd_klpack_rd *rd, uint64_t b)
{
	const uint8_t *wd = rd->src + 16 * rd->nblk;
	uint64_t c;

	rd->r = rd->src + 17 * rd->nblk;
	for (c = 0; c < b && c < rd->nblk; c++)
		rd->r += (klpack_blen(rd->n, c) - 1) * wd[c];
	rd->b = c;
	rd->last = 0; /* the key before block b: not known, not checked */
}

uint64_t psd_klpack_first(const uint8_t *src, uint64_t b)
{
	return klpack_le64(src + 16 * b);
}

int psd_klpack_rd_done(const struct psd_klpack_rd *rd, const char **why)
{
	if (rd->gap) {
		*why = "packed keys: a gap overflows 2^64";
		return -EPROTO;
	}
	if (rd->wrap) {
		*why = "packed keys: keys run past 2^64";
		return -EPROTO;
	}
	if (rd->same) {
		*why = "packed keys: keys not strictly ascending";
		return -EPROTO;
	}
	return 0;
}

int psd_klpack_unpack(const uint8_t *src, uint64_t len, uint64_t n,
		      uint64_t *keys, const char **why)
{
	struct psd_klpack_rd rd;
	uint64_t got;
	int ret = psd_klpack_rd_init(&rd, src, len, n, why);

	if (ret)
		return ret;
	while ((got = psd_klpack_rd_next(&rd, keys)))
		keys += got;
	return psd_klpack_rd_done(&rd, why);
}

int psd_klpack_check(const uint8_t *src, uint64_t len, uint64_t n,
		     const char **why)
{
	uint64_t buf[PSD_KLPACK_BLK];
	struct psd_klpack_rd rd;
	int ret = psd_klpack_rd_init(&rd, src, len, n, why);

	if (ret)
		return ret;
	while (psd_klpack_rd_next(&rd, buf))
		;
	return psd_klpack_rd_done(&rd, why);
}
