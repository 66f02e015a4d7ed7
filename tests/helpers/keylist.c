// SPDX-License-Identifier: MIT
/*
 * A worker of a real cluster checking key lists (PSCHED_FAMILY_KEYLIST
 * requests) step by step against a model of what every worker pushed: exact
 * sums, keys nobody pushed keep their value, new keys appear on first push,
 * per-key lengths, pulls of subsets, pushpull, several pushes in flight,
 * empty lists, and bad input refused with nothing stored.  Run one copy
 * per worker (test_keylist.sh).  Argument: the number of keys (default
 * 600).  Prints "keylist rank R ok" at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

#define CHECK_WHO "keylist rank %d", rank
#include "check.h"
#include "requests.h"

static int rank = -1;
static unsigned nw;
static size_t M;       /* keys in the universe */
static uint64_t *ukey; /* key of index u */
static uint32_t *ulen; /* its length (elements) */
static uint64_t *uoff; /* element offset in the model */
static double *model;  /* expected stored values */
static bool *known;    /* pushed at least once */

/* Which keys worker @r pushes in step @s (see main). */
static bool in_push(unsigned r, int s, size_t u)
{
	switch (s) {
	case 1:
		return u % 2 == 0;
	case 2: /* + new one-element keys between the stored ones */
		return u % 2 == 0 || u % 6 == 3;
	case 3:
		return u % 2 == 0 && ((u / 2) % nw == r || u % 8 == 0);
	case 4:
		return r == 0 && ((u % 2 && u < M / 2) || u % 6 == 0);
	case 5: /* every key stored so far */
		return u % 2 == 0 || u < M / 2 || u % 6 == 3;
	case 6:
		return u % 2 && u >= M / 2;
	case 7:
		return u % 2 == 0; /* rank 0's is refused (bad length) */
	case 8:
		return u % 3 == 0; /* the last rank's is refused (dtype) */
	default: /* 9..12 pipelined, subsets; 13.. the same list each */
		if (s >= 13)
			return (u + r) % 3 == 0 || u % 5 == 0;
		return (u + (size_t)s + r) % 4 == 0 || u % 5 == 0;
	}
}

static float val(unsigned r, int s, size_t u, uint32_t e)
{
	return (float)((r + 1) * 1000 + s * 10 + (int)(u % 7) + (int)e);
}

/* The values of @r's step-@s push of keys @us into @out (packed). */
static size_t fill(unsigned r, int s, const size_t *us, size_t nk, float *out)
{
	size_t i, k = 0;
	uint32_t e;

	for (i = 0; i < nk; i++)
		for (e = 0; e < ulen[us[i]]; e++)
			out[k++] = val(r, s, us[i], e);
	return k;
}

static unsigned nsrv;

/* The server that owns @key (as psched.h documents). */
static int owner(uint64_t key)
{
	return (int)(((unsigned __int128)key * nsrv) >> 64);
}

/* Fold step @s into the model; @refused: that rank's push counts empty on
 * server @rsrv (every server when -1): a server refuses its own slice. */
static void model_step3(int s, int refused, int rsrv)
{
	size_t u;
	uint32_t e;
	unsigned r;

	for (u = 0; u < M; u++) {
		bool any = false;
		double sum[4] = { 0 };

		for (r = 0; r < nw; r++) {
			if (!in_push(r, s, u) ||
			    ((int)r == refused &&
			     (rsrv < 0 || owner(ukey[u]) == rsrv)))
				continue;
			any = true;
			for (e = 0; e < ulen[u]; e++)
				sum[e] += val(r, s, u, e);
		}
		if (!any)
			continue;
		known[u] = true;
		for (e = 0; e < ulen[u]; e++)
			model[uoff[u] + e] = sum[e];
	}
}

static void model_step(int s, int refused)
{
	model_step3(s, refused, -1);
}

/* The keys of @r's step @s: indices, keys, lengths. */
static size_t pick(unsigned r, int s, size_t *us, uint64_t *ks, uint32_t *ls)
{
	size_t u, n = 0;

	for (u = 0; u < M; u++)
		if (in_push(r, s, u)) {
			us[n] = u;
			ks[n] = ukey[u];
			ls[n++] = ulen[u];
		}
	return n;
}

static struct psched_node *node;
static size_t *us;
static uint64_t *ks;
static uint32_t *ls;
static float *pv, *qv;

/*
 * A list of 600 keys spread over every server, out of order at one
 * place -- two neighbours swapped or repeated, inside a server's slice,
 * at block edges of the packed form, and around the border between the
 * first two servers' slices -- is refused before anything is sent, with
 * the packed form (which finds the order on its way) and without.
 */
static void refuse_out_of_order(struct psched_node *nd)
{
	enum { N = 600 };
	static uint64_t k[N];
	static float v[N];
	size_t at[] = { 0,   1,	  150, 254, 255, 256, 296, 297,
			298, 299, 300, 301, 302, 303, 450, 598 };
	size_t i, j, t;
	uint64_t req;
	int ret;

	for (t = 0; t < 2 * sizeof(at) / sizeof(at[0]); t++) {
		j = at[t / 2];
		for (i = 0; i < N; i++)
			k[i] = (UINT64_MAX / N) * i + 1;
		if (t % 2) {
			k[j + 1] = k[j];
		} else {
			k[j] = k[j + 1];
			k[j + 1] = (UINT64_MAX / N) * j + 1;
		}
		ret = push_keys(nd, N, k, NULL, 1, v, PSCHED_F32, 0, NULL, NULL,
				&req);
		CHECK(ret == -EINVAL && strstr(psched_errmsg(), "sorted") &&
			      strstr(psched_errmsg(), "without duplicates"),
		      "keys %s at %zu of %d: %d %s",
		      t % 2 ? "repeated" : "swapped", j, N, ret,
		      psched_errmsg());
	}
}

/* Pull every known key (or those with u % @mod == @rem) and compare. */
static void check_pull(const char *what, size_t mod, size_t rem)
{
	size_t u, n = 0, k = 0, i;
	uint64_t req;
	uint32_t e;
	int ret;

	for (u = 0; u < M; u++)
		if (known[u] && u % mod == rem) {
			us[n] = u;
			ks[n] = ukey[u];
			ls[n++] = ulen[u];
		}
	memset(qv, 0xff, M * 3 * sizeof(float));
	ret = pull_keys(node, n, ks, ls, 0, qv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(!ret, "%s: pull_keys: %s", what, psched_errmsg());
	ret = psched_wait(node, req, 0);
	CHECK(!ret, "%s: pull wait: %s", what, psched_errmsg());
	for (i = 0; i < n; i++)
		for (e = 0; e < ulen[us[i]]; e++, k++)
			CHECK(qv[k] == (float)model[uoff[us[i]] + e],
			      "%s: key %llu (u %zu) element %u = %g, want %g",
			      what, (unsigned long long)ukey[us[i]], us[i], e,
			      (double)qv[k], model[uoff[us[i]] + e]);
}

/* Push step @s (all ranks); rank @bad_rank pushes @bad instead. */
static int push_step(int s)
{
	size_t n = pick((unsigned)rank, s, us, ks, ls);
	uint64_t req;
	int ret;

	fill((unsigned)rank, s, us, n, pv);
	ret = push_keys(node, n, ks, ls, 0, pv, PSCHED_F32, 0, NULL, NULL,
			&req);
	return ret ? ret : psched_wait(node, req, 0);
}

/* Steps @first..@first+3 in flight together, different priorities (a
 * later step may reach a server first and is held there). */
static void pipelined(int first)
{
	uint64_t reqs[4];
	float *bufs[4];
	uint64_t *kb[4];
	uint32_t *lb[4];
	size_t i, n;
	int ret;

	for (i = 0; i < 4; i++) {
		bufs[i] = calloc(M * 3, sizeof(float));
		kb[i] = calloc(M, 8);
		lb[i] = calloc(M, 4);
		n = pick((unsigned)rank, first + (int)i, us, kb[i], lb[i]);
		fill((unsigned)rank, first + (int)i, us, n, bufs[i]);
		ret = push_keys(node, n, kb[i], lb[i], 0, bufs[i], PSCHED_F32,
				(int)(4 - i), NULL, NULL, &reqs[i]);
		CHECK(!ret, "step %zu: %s", first + i, psched_errmsg());
	}
	for (i = 0; i < 4; i++) {
		ret = psched_wait(node, reqs[i], 0);
		CHECK(!ret, "step %zu wait: %s", first + i, psched_errmsg());
		model_step(first + (int)i, -1);
		free(bufs[i]);
		free(kb[i]);
		free(lb[i]);
	}
}

int main(int argc, char **argv)
{
	struct psched_cfg *cfg = NULL;
	uint64_t req, k2[3];
	uint32_t l2[3];
	size_t u, n, i, off = 0;
	int ret, s, last;
	char cache[8];

	M = argc > 1 ? strtoul(argv[1], NULL, 10) : 600;
	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	CHECK(!psched_cfg_get(cfg, "keylist-cache", cache, sizeof(cache)), "%s",
	      psched_errmsg());
	CHECK(!psched_node_create(cfg, &node), "create: %s", psched_errmsg());
	psched_cfg_destroy(cfg);
	rank = psched_node_rank(node);
	nw = psched_num_workers(node);
	nsrv = psched_num_servers(node);
	CHECK(nw >= 1 && nw <= 4, "1..4 workers");
	last = (int)nw - 1;
	ukey = calloc(M, 8);
	ulen = calloc(M, 4);
	uoff = calloc(M, 8);
	known = calloc(M, sizeof(bool));
	model = calloc(M * 3, sizeof(double));
	us = calloc(M, sizeof(*us));
	ks = calloc(M, 8);
	ls = calloc(M, 4);
	pv = calloc(M * 3, sizeof(float));
	qv = calloc(M * 3, sizeof(float));
	for (u = 0; u < M; u++) {
		/* spread over the whole key space: every server owns some */
		ukey[u] = (UINT64_MAX / M) * u + u % 5;
		ulen[u] = u % 2 ? 1 + (uint32_t)(u % 3) : 1;
		uoff[u] = off;
		off += ulen[u];
	}

	/* Local refusals: nothing is sent, no step is used. */
	k2[0] = 5, k2[1] = 3, k2[2] = 9;
	ret = push_keys(node, 3, k2, NULL, 1, pv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "sorted"),
	      "unsorted: %d %s", ret, psched_errmsg());
	k2[0] = 3, k2[1] = 3;
	ret = push_keys(node, 3, k2, NULL, 1, pv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "duplicates"),
	      "duplicate: %d %s", ret, psched_errmsg());
	refuse_out_of_order(node);
	k2[0] = 1, k2[1] = 2, k2[2] = 3;
	l2[0] = 1, l2[1] = 0, l2[2] = 1;
	ret = push_keys(node, 3, k2, l2, 0, pv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "length 0"),
	      "zero length: %d %s", ret, psched_errmsg());
	/* Empty pull: completes at once. */
	ret = pull_keys(node, 0, NULL, NULL, 1, NULL, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(!ret && !psched_wait(node, req, 0), "empty pull: %s",
	      psched_errmsg());

	for (s = 1; s <= 5; s++) {
		ret = push_step(s);
		CHECK(!ret, "step %d: %s", s, psched_errmsg());
		model_step(s, -1);
		check_pull("after a step", 1, 0);
	}
	check_pull("subset", 3, 1);

	/* Step 6: pushpull of new keys answers their sums. */
	n = pick((unsigned)rank, 6, us, ks, ls);
	fill((unsigned)rank, 6, us, n, pv);
	ret = pushpull_keys(node, n, ks, ls, 0, pv, qv, PSCHED_F32, 0, NULL,
			    NULL, &req);
	CHECK(!ret && !(ret = psched_wait(node, req, 0)), "pushpull: %d %s",
	      ret, psched_errmsg());
	model_step(6, -1);
	for (i = 0, off = 0; i < n; i++)
		for (uint32_t e = 0; e < ulen[us[i]]; e++, off++)
			CHECK(qv[off] == (float)model[uoff[us[i]] + e],
			      "pushpull key u %zu: %g want %g", us[i],
			      (double)qv[off], model[uoff[us[i]] + e]);
	check_pull("after pushpull", 1, 0);

	/* Step 7: rank 0 changes key u=4's length: refused whole. */
	n = pick((unsigned)rank, 7, us, ks, ls);
	if (rank == 0)
		ls[2] = 2; /* us[2] == 4 */
	{
		size_t k = 0;

		for (i = 0; i < n; i++)
			for (uint32_t e = 0; e < ls[i]; e++)
				pv[k++] = val((unsigned)rank, 7, us[i], e);
	}
	ret = push_keys(node, n, ks, ls, 0, pv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(!ret, "step 7 issue: %s", psched_errmsg());
	ret = psched_wait(node, req, 0);
	if (rank == 0)
		CHECK(ret == PSCHED_ESIZE && strstr(psched_errmsg(), "key "),
		      "length change: %d %s", ret, psched_errmsg());
	else
		CHECK(!ret, "step 7: %s", psched_errmsg());
	model_step3(7, 0, owner(ukey[4]));
	check_pull("after a refused length change", 1, 0);

	/* Step 8: the last rank pushes float64: refused, nothing stored. */
	if (rank == last) {
		double *dv = calloc(M, sizeof(double));

		n = pick((unsigned)rank, 8, us, ks, ls);
		for (i = 0; i < n; i++)
			dv[i] = 99;
		ret = push_keys(node, n, ks, NULL, 1, dv, PSCHED_F64, 0, NULL,
				NULL, &req);
		CHECK(!ret, "step 8 issue: %s", psched_errmsg());
		ret = psched_wait(node, req, 0);
		CHECK(ret == -EINVAL && strstr(psched_errmsg(), "float64"),
		      "mixed dtype: %d %s", ret, psched_errmsg());
		free(dv);
	} else {
		ret = push_step(8);
		CHECK(!ret, "step 8: %s", psched_errmsg());
	}
	model_step(8, last);
	check_pull("after a refused dtype", 1, 0);

	/* Pulls the servers refuse. */
	k2[0] = ukey[0], k2[1] = ukey[0] + 1; /* never pushed */
	ret = pull_keys(node, 2, k2, NULL, 1, qv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(!ret, "%s", psched_errmsg());
	ret = psched_wait(node, req, 0);
	CHECK(ret == PSCHED_EUNKNOWNKEY && strstr(psched_errmsg(), "never"),
	      "unknown key: %d %s", ret, psched_errmsg());
	k2[0] = ukey[1]; /* 2 elements */
	ret = pull_keys(node, 1, k2, NULL, 1, qv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(!ret, "%s", psched_errmsg());
	ret = psched_wait(node, req, 0);
	CHECK(ret == PSCHED_ESIZE, "wrong-length pull: %d %s", ret,
	      psched_errmsg());
	check_pull("after refused pulls", 1, 0);

	pipelined(9);
	check_pull("after pipelined steps", 1, 0);
	/* the same list 4 times: sent once, then by its tag (a server may
	 * hold a tagged push early) */
	pipelined(13);
	check_pull("after pipelined steps", 1, 0);
	check_pull("subset at the end", 4, 3);
	/* The worker's list cache: a pull of a list new to it carries the
	 * keys, the same list again none. */
	{
		struct psched_stats st;
		uint64_t tx[3];

		for (i = 0; i < 3; i++) {
			psched_node_stats(node, &st);
			tx[i] = st.tx_bytes;
			if (i < 2)
				check_pull("the same list again", 1, 0);
		}
		if (!strcmp(cache, "1"))
			CHECK(tx[2] - tx[1] < (tx[1] - tx[0]) / 4,
			      "list cache: a pull sent %llu, then %llu bytes",
			      (unsigned long long)(tx[1] - tx[0]),
			      (unsigned long long)(tx[2] - tx[1]));
		else
			CHECK(tx[2] - tx[1] > (tx[1] - tx[0]) / 2,
			      "no list cache: a pull sent %llu, then %llu "
			      "bytes",
			      (unsigned long long)(tx[1] - tx[0]),
			      (unsigned long long)(tx[2] - tx[1]));
	}

	/* A list of the same length as the cached one but one key other (a
	 * key never pushed, +1 from a stored one): not the cached list
	 * (common/klpack.c), so its keys travel and the server refuses
	 * the unknown key -- taken for the cached list it would be answered
	 * with the old keys' values. */
	check_pull("cached list before a near copy", 1, 0);
	for (u = 0, n = 0; u < M; u++)
		if (known[u]) {
			ks[n] = ukey[u];
			ls[n++] = ulen[u];
		}
	ks[n / 2] += 1; /* between two stored keys: still sorted */
	ret = pull_keys(node, n, ks, ls, 0, qv, PSCHED_F32, 0, NULL, NULL,
			&req);
	CHECK(!ret, "near copy: %s", psched_errmsg());
	ret = psched_wait(node, req, 0);
	CHECK(ret == PSCHED_EUNKNOWNKEY && strstr(psched_errmsg(), "never"),
	      "a list one key off the cached one: %d %s", ret, psched_errmsg());
	check_pull("the cached list after a near copy", 1, 0);

	printf("keylist rank %d ok (%zu keys, %u workers, %u servers)\n", rank,
	       M, nw, psched_num_servers(node));
	fflush(stdout);
	ret = psched_node_destroy(node);
	CHECK(!ret, "destroy: %s", psched_errmsg());
	return 0;
}
