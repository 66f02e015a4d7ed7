// SPDX-License-Identifier: MIT
/*
 * The RDMA rendezvous cache's bookkeeping (common/transport/rdma/
 * land_tab.c) without a device: grants, generations, the checks on a
 * cached write's immediate, the memory cap, and a model of the protocol
 * (random ranges, config switches that change them, grants delayed on
 * the wire) that checks a cached write never lands in a buffer that was
 * released.  The verbs side runs in the soft-RoCE VM
 * (tests/transport, tests/integration/test_rdma_vm.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"

#ifdef PSCHED_HAVE_RDMA
#include "transport/rdma/land_tab.h"
#include "wire.h"

#define MIB (1ull << 20)

static struct rdmt_land_tab land_new(uint64_t cap)
{
	struct rdmt_land_tab t;

	memset(&t, 0, sizeof(t));
	t.cap = cap;
	return t;
}

static int tok[RDMT_LAND_SLOTS + 8];
static int last_revoke;

/* Receiver: grant (key, off, len) like land.c's offer; the slot. */
static int offer(struct rdmt_land_tab *t, uint64_t key, uint64_t off,
		 uint64_t len, unsigned *gen)
{
	int slot, revoke;

	if (psd_rdmt_land_find(t, key, off, len) >= 0)
		return -2;
	slot = psd_rdmt_land_pick(t, len, &revoke);
	last_revoke = revoke;
	if (slot < 0)
		return -1;
	*gen = psd_rdmt_land_grant(t, (unsigned)slot, key, off, len, &tok[slot],
				   &tok[slot + 1]);
	return slot;
}

static void test_land_generations(void)
{
	struct rdmt_land_tab t = land_new(64 * MIB);
	const char *why = NULL;
	void *buf = NULL, *mr = NULL;
	unsigned gen, gen2;
	int s;

	s = offer(&t, 7, 0, 65536, &gen);
	CHECK_EQ(s, 0);
	CHECK_EQ(gen, 1u);
	CHECK_EQ(offer(&t, 7, 0, 65536, &gen2), -2); /* one slot a range */
	CHECK_U64(t.bytes, ==, rdmt_land_size(65536));
	/* What a whole write into it has (a shorter one waits for its lane
	 * part); nothing for what names no buffer. */
	CHECK_U64(psd_rdmt_land_want(&t, rdmt_imm_land(0, gen)), ==,
		  65536 + PSD_HDR_SIZE);
	CHECK_U64(psd_rdmt_land_want(&t, 5), ==, 0);
	CHECK_U64(psd_rdmt_land_want(&t, rdmt_imm_land(3, 1)), ==, 0);
	/* Not a cached write at all, a slot never granted, a bad length. */
	CHECK_EQ(psd_rdmt_land_claim(&t, 5, 65536 + PSD_HDR_SIZE, &why), -1);
	CHECK(strstr(why, "no landing buffer") != NULL);
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(3, 1),
				     65536 + PSD_HDR_SIZE, &why),
		 -1);
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen),
				     65536 + PSD_HDR_SIZE + 1, &why),
		 -1);
	CHECK(strstr(why, "header") != NULL);
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen + 1),
				     65536 + PSD_HDR_SIZE, &why),
		 -1);
	CHECK(strstr(why, "generation") != NULL);
	/* The right one: BUSY, a second write into it is refused. */
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen),
				     65536 + PSD_HDR_SIZE, &why),
		 0);
	CHECK_EQ(t.v[0].state, RDMT_LAND_BUSY);
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen),
				     65536 + PSD_HDR_SIZE, &why),
		 -1);
	CHECK(strstr(why, "not granted") != NULL);
	/* Granted again: a new generation; the old one is stale now. */
	CHECK(psd_rdmt_land_done(&t, 0, &buf, &mr));
	gen2 = psd_rdmt_land_grant(&t, 0, 7, 0, 65536, NULL, NULL);
	CHECK_EQ(gen2, gen + 1);
	CHECK(t.v[0].buf == &tok[0]); /* same buffer, same range */
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen),
				     65536 + PSD_HDR_SIZE, &why),
		 -1);
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen2),
				     65536 + PSD_HDR_SIZE, &why),
		 0);
	/* Generations wrap within 15 bits and skip 0. */
	t.v[0].gen = RDMT_LAND_GEN_MASK;
	CHECK(psd_rdmt_land_done(&t, 0, &buf, &mr));
	CHECK_EQ(psd_rdmt_land_grant(&t, 0, 7, 0, 65536, NULL, NULL), 1u);
	CHECK_EQ(rdmt_imm_land(5, 1) & 0xffffu, 5u);
	CHECK(rdmt_imm_land(5, 1) & RDMT_IMM_LAND);
	free(t.v);
}

static void test_land_limits(void)
{
	struct rdmt_land_tab off = land_new(0), t = land_new(64 * MIB);
	unsigned gen;

	/* Cache off (PS_RDMA_MR_BUDGET=0), empty or too large messages. */
	CHECK_EQ(offer(&off, 1, 0, 65536, &gen), -1);
	CHECK_EQ(offer(&t, 1, 0, 0, &gen), -1);
	CHECK_EQ(offer(&t, 1, 0, RDMT_LAND_MAX_MSG + 1, &gen), -1);
	CHECK_EQ(offer(&t, 1, 0, RDMT_LAND_MAX_MSG, &gen), 0);
	/* Another partition size makes other ranges of the same key. */
	CHECK_EQ(offer(&t, 1, 0, MIB, &gen), 1);
	CHECK_EQ(offer(&t, 1, MIB, MIB, &gen), 2);
	CHECK_EQ(psd_rdmt_land_find(&t, 1, MIB, MIB), 2);
	CHECK_EQ(psd_rdmt_land_find(&t, 1, MIB, 2 * MIB), -1);
	CHECK_EQ(psd_rdmt_land_find(&t, 2, MIB, MIB), -1);
	free(t.v);
	free(off.v);
}

/* Over the cap: no grant, and the least recently granted range is
 * released after its next write (never while granted). */
static void test_land_cap(void)
{
	struct rdmt_land_tab t = land_new(3 * rdmt_land_size(MIB));
	void *buf = NULL, *mr = NULL;
	const char *why;
	unsigned gen[4];
	int i;

	for (i = 0; i < 3; i++)
		CHECK_EQ(offer(&t, (uint64_t)i, 0, MIB, &gen[i]), i);
	/* Key 0 is used again: key 1 is now the least recent. */
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(0, gen[0]),
				     MIB + PSD_HDR_SIZE, &why),
		 0);
	CHECK(psd_rdmt_land_done(&t, 0, &buf, &mr));
	gen[0] = psd_rdmt_land_grant(&t, 0, 0, 0, MIB, NULL, NULL);
	CHECK_EQ(offer(&t, 3, 0, MIB, &gen[3]), -1);
	CHECK(t.v[1].drop);
	CHECK_EQ(last_revoke, 1); /* the peer is asked to return it */
	CHECK(!t.v[0].drop && !t.v[2].drop);
	/* Still granted: it stays, with its buffer. */
	CHECK_EQ(t.v[1].state, RDMT_LAND_GRANTED);
	CHECK(t.v[1].buf == &tok[1]);
	CHECK_EQ(offer(&t, 3, 0, MIB, &gen[3]), -1); /* marks key 2 too */
	CHECK(t.v[2].drop);
	CHECK_EQ(last_revoke, 2);
	/* The peer returns key 2 unused (a RETURN for key 1, which was not
	 * returned, or of another generation, is refused). */
	CHECK_EQ(psd_rdmt_land_returned(&t, 2, gen[2] + 1, &buf, &mr), -1);
	CHECK_EQ(psd_rdmt_land_returned(&t, 0, gen[0], &buf, &mr), -1);
	CHECK_EQ(psd_rdmt_land_returned(&t, 2, gen[2], &buf, &mr), 0);
	CHECK(buf == &tok[2]);
	CHECK_EQ(t.v[2].state, RDMT_LAND_FREE);
	CHECK_EQ(psd_rdmt_land_returned(&t, 2, gen[2], &buf, &mr), -1);
	/* Its next write comes: delivered, then released. */
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(1, gen[1]),
				     MIB + PSD_HDR_SIZE, &why),
		 1);
	CHECK(!psd_rdmt_land_done(&t, 1, &buf, &mr));
	CHECK(buf == &tok[1] && mr == &tok[2]);
	CHECK_EQ(t.v[1].state, RDMT_LAND_FREE);
	CHECK_U64(t.bytes, ==, 1 * rdmt_land_size(MIB));
	/* A write naming the released slot is refused. */
	CHECK_EQ(psd_rdmt_land_claim(&t, rdmt_imm_land(1, gen[1]),
				     MIB + PSD_HDR_SIZE, &why),
		 -1);
	/* Room again: the new range reuses a slot, with a new generation. */
	CHECK_EQ(offer(&t, 3, 0, MIB, &gen[3]), 1);
	CHECK_U64(gen[3], !=, gen[1]);
	free(t.v);
}

static void test_grant_tab(void)
{
	struct rdmt_grant_tab g = { 0 };

	CHECK_EQ(psd_rdmt_grant_find(&g, 1, 0, MIB), -1);
	CHECK_EQ(psd_rdmt_grant_take(&g, RDMT_LAND_SLOTS, false, 1, 1, 0, MIB,
				     0x1000, 9),
		 -EPROTO);
	CHECK_EQ(psd_rdmt_grant_take(&g, 4, false, 1, 1, 0, 0, 0x1000, 9),
		 -EPROTO);
	CHECK_EQ(psd_rdmt_grant_take(&g, 4, false, 1, 1, 0,
				     RDMT_LAND_MAX_MSG + 1, 0x1000, 9),
		 -EPROTO);
	CHECK_EQ(psd_rdmt_grant_take(&g, 4, false, 3, 1, 0, MIB, 0x1000, 9), 0);
	CHECK_EQ(psd_rdmt_grant_find(&g, 1, 0, MIB), 4);
	CHECK_EQ(g.v[4].state, RDMT_GRANT_READY);
	CHECK_EQ(g.v[4].gen, 3u);
	CHECK_U64(g.v[4].addr, ==, 0x1000);
	CHECK_EQ(psd_rdmt_grant_find(&g, 1, 0, MIB / 2), -1);
	CHECK_EQ(psd_rdmt_grant_take(&g, 4, true, 0, 0, 0, 0, 0, 0), 0);
	CHECK_EQ(psd_rdmt_grant_find(&g, 1, 0, MIB), -1);
	/* Revoke: only a READY grant of that generation is returned. */
	CHECK_EQ(psd_rdmt_grant_take(&g, 4, false, 5, 1, 0, MIB, 0x1000, 9), 0);
	CHECK_EQ(psd_rdmt_grant_revoke(&g, 4, 4), 0);
	CHECK_EQ(psd_rdmt_grant_revoke(&g, 9, 5), 0);
	g.v[4].state = RDMT_GRANT_USED; /* written already */
	CHECK_EQ(psd_rdmt_grant_revoke(&g, 4, 5), 0);
	g.v[4].state = RDMT_GRANT_READY;
	CHECK_EQ(psd_rdmt_grant_revoke(&g, 4, 5), 1);
	CHECK_EQ(g.v[4].state, RDMT_GRANT_RETURN);
	CHECK_EQ(psd_rdmt_grant_find(&g, 1, 0, MIB), -1); /* not usable */
	free(g.v);
}

/* A re-grant piggybacked on a SEND names only slot and generation: it
 * is taken only for a grant this side has written into. */
static void test_grant_again(void)
{
	struct rdmt_grant_tab g = { 0 };

	CHECK_EQ(psd_rdmt_grant_again(&g, 0, 2), -EPROTO); /* no grants */
	CHECK_EQ(psd_rdmt_grant_take(&g, 2, false, 7, 3, 4096, MIB, 0x2000, 11),
		 0);
	/* READY: not written yet, so nothing was taken back. */
	CHECK_EQ(psd_rdmt_grant_again(&g, 2, 8), -EPROTO);
	CHECK_EQ(g.v[2].state, RDMT_GRANT_READY);
	g.v[2].state = RDMT_GRANT_USED;
	CHECK_EQ(psd_rdmt_grant_again(&g, 3, 8), -EPROTO); /* unknown slot */
	CHECK_EQ(psd_rdmt_grant_again(&g, RDMT_LAND_SLOTS + 1, 8), -EPROTO);
	CHECK_EQ(psd_rdmt_grant_again(&g, 2, 0), -EPROTO);
	CHECK_EQ(psd_rdmt_grant_again(&g, 2, 7), -EPROTO); /* same gen */
	CHECK_EQ(g.v[2].state, RDMT_GRANT_USED);
	CHECK_EQ(psd_rdmt_grant_again(&g, 2, 8), 0);
	CHECK_EQ(g.v[2].state, RDMT_GRANT_READY);
	CHECK_EQ(g.v[2].gen, 8u);
	CHECK_U64(g.v[2].addr, ==, 0x2000);
	CHECK_EQ(g.v[2].rkey, 11u);
	CHECK_EQ(psd_rdmt_grant_find(&g, 3, 4096, MIB), 2);
	/* Released, then a re-grant of it: refused. */
	CHECK_EQ(psd_rdmt_grant_take(&g, 2, true, 0, 0, 0, 0, 0, 0), 0);
	CHECK_EQ(psd_rdmt_grant_again(&g, 2, 9), -EPROTO);
	free(g.v);
}

/*
 * The protocol as land.c and send.c run it, with grants and releases
 * delayed on the wire (FIFO, delivered at random moments) and writes
 * delivered at once.  Config switches change the partition size, so the
 * ranges change under live grants.  Checks: every cached write the
 * receiver accepts names a live buffer of exactly its range, every
 * buffer released was not granted at the time, and the model's cached
 * writes are a good share of all (the cache works).
 */
#define M_KEYS 6
#define M_WIRE 4096

struct m_buf {
	uint64_t key, off, len;
	bool live;
};

struct m_msg {
	unsigned slot, gen;
	bool release, revoke, again;
	uint64_t key, off, len, addr;
};

static void test_land_model(void)
{
	static struct m_buf bufs[20000];
	static struct m_msg wire[M_WIRE];
	struct rdmt_land_tab t = land_new(24 * rdmt_land_size(65536));
	struct rdmt_grant_tab g = { 0 };
	unsigned nbufs = 0, wh = 0, wl = 0, cached = 0, rts = 0;
	unsigned revokes = 0, returned = 0, agains = 0;
	int revoke;
	uint64_t part = 65536, step;
	const char *why;
	int i, slot, gi;

	test_rng_seed(12);
	for (step = 0; step < 20000; step++) {
		uint64_t key = test_rng_below(M_KEYS), total = 4 * 65536;
		uint64_t off = part * test_rng_below(total / part);
		uint64_t len = part;
		struct m_buf *b;
		void *vb = NULL, *vm = NULL;

		if (test_rng_below(2000) == 0) /* config switch */
			part = (uint64_t)1 << (14 + test_rng_below(5));
		/* Deliver some of what is on the wire to the sender. */
		for (i = (int)test_rng_below(3); i > 0 && wl; i--, wl--) {
			struct m_msg *m = &wire[wh++ % M_WIRE];

			if (m->revoke) {
				void *rb = NULL, *rm = NULL;

				if (!psd_rdmt_grant_revoke(&g, m->slot, m->gen))
					continue; /* used: the write comes */
				/* RETURN, delivered at once. */
				CHECK_EQ(psd_rdmt_land_returned(
						 &t, m->slot, m->gen, &rb, &rm),
					 0);
				((struct m_buf *)rb)->live = false;
				g.v[m->slot].state = RDMT_GRANT_NONE;
				returned++;
				continue;
			}
			if (m->again) {
				CHECK_EQ(psd_rdmt_grant_again(&g, m->slot,
							      m->gen),
					 0);
				agains++;
				continue;
			}
			CHECK_EQ(psd_rdmt_grant_take(&g, m->slot, m->release,
						     m->gen, m->key, m->off,
						     m->len, m->addr, 1),
				 0);
		}
		gi = psd_rdmt_grant_find(&g, key, off, len);
		if (gi < 0 || g.v[gi].state != RDMT_GRANT_READY) {
			/* RTS/CTS, then the receiver offers a grant. */
			unsigned gen;

			rts++;
			if (psd_rdmt_land_find(&t, key, off, len) >= 0)
				continue;
			slot = psd_rdmt_land_pick(&t, len, &revoke);
			if (revoke >= 0) {
				wire[(wh + wl++) % M_WIRE] = (struct m_msg){
					.slot = (unsigned)revoke,
					.gen = t.v[revoke].gen,
					.revoke = true
				};
				revokes++;
			}
			if (slot < 0)
				continue;
			CHECK(nbufs < sizeof(bufs) / sizeof(bufs[0]));
			b = &bufs[nbufs++];
			*b = (struct m_buf){ key, off, len, true };
			gen = psd_rdmt_land_grant(&t, (unsigned)slot, key, off,
						  len, b, b);
			CHECK(wl < M_WIRE);
			wire[(wh + wl++) % M_WIRE] =
				(struct m_msg){ .slot = (unsigned)slot,
						.gen = gen,
						.key = key,
						.off = off,
						.len = len,
						.addr = (uintptr_t)b };
			continue;
		}
		/* Cached write into the granted buffer. */
		b = (struct m_buf *)(uintptr_t)g.v[gi].addr;
		CHECK(b->live);
		CHECK(b->key == key && b->off == off && b->len == len);
		g.v[gi].state = RDMT_GRANT_USED;
		slot = psd_rdmt_land_claim(
			&t, rdmt_imm_land((unsigned)gi, g.v[gi].gen),
			len + PSD_HDR_SIZE, &why);
		CHECK_EQ(slot, gi);
		CHECK(t.v[slot].buf == b);
		cached++;
		if (psd_rdmt_land_done(&t, (unsigned)slot, &vb, &vm)) {
			unsigned gen = psd_rdmt_land_grant(
				&t, (unsigned)slot, key, off, len, NULL, NULL);

			/* A GRANT, or only (slot, gen) on another SEND. */
			wire[(wh + wl++) % M_WIRE] =
				(struct m_msg){ .slot = (unsigned)slot,
						.gen = gen,
						.again = test_rng_below(2),
						.key = key,
						.off = off,
						.len = len,
						.addr = (uintptr_t)b };
		} else {
			CHECK(vb == b);
			b->live = false; /* freed: the sender's grant is USED */
			wire[(wh + wl++) % M_WIRE] =
				(struct m_msg){ .slot = (unsigned)slot,
						.release = true };
		}
		CHECK(wl < M_WIRE);
	}
	/* Every slot's bytes are accounted for. */
	{
		uint64_t sum = 0;

		for (i = 0; i < (int)t.n; i++)
			if (t.v[i].state != RDMT_LAND_FREE)
				sum += rdmt_land_size(t.v[i].len);
		CHECK_U64(sum, ==, t.bytes);
		CHECK_U64(t.bytes, <=, t.cap);
	}
	/* Config switches left ranges unused: revoked, and given back. */
	CHECK_U64(revokes, >, 0);
	CHECK_U64(returned, >, 0);
	CHECK_U64(agains, >, 0);
	printf("# model: %u cached writes, %u RTS/CTS, %u revoked, %u "
	       "returned, %u re-granted on another SEND\n",
	       cached, rts, revokes, returned, agains);
	CHECK_U64(cached, >, 3 * rts); /* the cache carries most messages */
	free(t.v);
	free(g.v);
}

const struct test_case test_list[] = {
	{ "land_generations", test_land_generations },
	{ "land_limits", test_land_limits },
	{ "land_cap", test_land_cap },
	{ "grant_tab", test_grant_tab },
	{ "grant_again", test_grant_again },
	{ "land_model", test_land_model },
	{ NULL, NULL },
};
#else
static void test_no_rdma(void)
{
	test_skip("built without libibverbs/librdmacm (HAVE_RDMA)");
}

const struct test_case test_list[] = {
	{ "rdma_land", test_no_rdma },
	{ NULL, NULL },
};
#endif
