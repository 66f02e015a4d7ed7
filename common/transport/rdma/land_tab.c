// SPDX-License-Identifier: MIT
/*
 * RDMA rendezvous cache, the bookkeeping of grants (receiver) and of the
 * peer's grants (sender).  No verbs: land.c does the registrations and the
 * messages.  Design: rdma_internal.h, "Rendezvous cache"; land_tab.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "wire.h"

#include "land_tab.h"

int psd_rdmt_land_find(const struct rdmt_land_tab *t, uint64_t key,
		       uint64_t off, uint64_t len)
{
	unsigned i;

	for (i = 0; t->v && i < t->n; i++)
		if (t->v[i].state != RDMT_LAND_FREE && t->v[i].key == key &&
		    t->v[i].off == off && t->v[i].len == len)
			return (int)i;
	return -1;
}

/* Mark the least recently granted slot not yet marked for release;
 * the slot to revoke, or -1. */
static int land_mark_lru(struct rdmt_land_tab *t)
{
	struct rdmt_land *l, *lru = NULL;
	unsigned i;

	for (i = 0; i < t->n; i++) {
		l = &t->v[i];
		if (l->state != RDMT_LAND_FREE && !l->drop &&
		    (!lru || l->used < lru->used))
			lru = l;
	}
	if (!lru)
		return -1;
	lru->drop = true;
	if (lru->state != RDMT_LAND_GRANTED || lru->revoked)
		return -1;
	lru->revoked = true;
	return (int)(lru - t->v);
}

int psd_rdmt_land_pick(struct rdmt_land_tab *t, uint64_t len, int *revoke)
{
	unsigned i;

	*revoke = -1;
	if (!t->cap || !len || len > RDMT_LAND_MAX_MSG)
		return -1;
	if (!t->v) {
		t->v = calloc(RDMT_LAND_SLOTS, sizeof(*t->v));
		if (!t->v)
			return -1;
	}
	if (t->bytes + rdmt_land_size(len) > t->cap) {
		*revoke = land_mark_lru(t);
		return -1;
	}
	for (i = 0; i < t->n; i++)
		if (t->v[i].state == RDMT_LAND_FREE)
			return (int)i;
	if (t->n < RDMT_LAND_SLOTS)
		return (int)t->n++;
	*revoke = land_mark_lru(t);
	return -1;
}

unsigned psd_rdmt_land_grant(struct rdmt_land_tab *t, unsigned slot,
			     uint64_t key, uint64_t off, uint64_t len,
			     void *buf, void *mr)
{
	struct rdmt_land *l = &t->v[slot];

	if (buf) {
		l->key = key;
		l->off = off;
		l->len = len;
		l->buf = buf;
		l->mr = mr;
		l->drop = false;
		l->revoked = false;
		t->bytes += rdmt_land_size(len);
	}
	l->gen = (uint16_t)((l->gen + 1) & RDMT_LAND_GEN_MASK);
	if (!l->gen)
		l->gen = 1;
	l->state = RDMT_LAND_GRANTED;
	l->used = ++t->tick;
	return l->gen;
}

/* The slot a cached write's immediate names, or NULL (not a cached
 * write, or past the table). */
static struct rdmt_land *rdmt_land_named(const struct rdmt_land_tab *t,
					 uint32_t imm)
{
	unsigned slot = imm & 0xffffu;

	if (!(imm & RDMT_IMM_LAND) || !t->v || slot >= t->n)
		return NULL;
	return &t->v[slot];
}

/* The bytes of a whole cached write into @l: payload, then header. */
static uint64_t rdmt_land_whole(const struct rdmt_land *l)
{
	return l->len + PSD_HDR_SIZE;
}

uint64_t psd_rdmt_land_want(const struct rdmt_land_tab *t, uint32_t imm)
{
	const struct rdmt_land *l = rdmt_land_named(t, imm);

	return l && l->buf ? rdmt_land_whole(l) : 0;
}

int psd_rdmt_land_claim(struct rdmt_land_tab *t, uint32_t imm,
			uint32_t byte_len, const char **why)
{
	unsigned gen = (imm >> 16) & RDMT_LAND_GEN_MASK;
	struct rdmt_land *l = rdmt_land_named(t, imm);

	if (!l) {
		*why = "names no landing buffer this side granted";
		return -1;
	}
	if (l->state != RDMT_LAND_GRANTED) {
		*why = "names a landing buffer that is not granted now";
		return -1;
	}
	if (l->gen != gen) {
		*why = "names an older grant of the landing buffer "
		       "(generation mismatch)";
		return -1;
	}
	if (byte_len != rdmt_land_whole(l)) {
		*why = "is not the granted range's payload and header";
		return -1;
	}
	l->state = RDMT_LAND_BUSY;
	return (int)(l - t->v);
}

bool psd_rdmt_land_done(struct rdmt_land_tab *t, unsigned slot, void **buf,
			void **mr)
{
	struct rdmt_land *l = &t->v[slot];

	if (!l->drop && t->bytes <= t->cap)
		return true;
	*buf = l->buf;
	*mr = l->mr;
	t->bytes -= rdmt_land_size(l->len);
	l->buf = NULL;
	l->mr = NULL;
	l->drop = false;
	l->revoked = false;
	l->state = RDMT_LAND_FREE;
	return false;
}

int psd_rdmt_land_returned(struct rdmt_land_tab *t, unsigned slot, unsigned gen,
			   void **buf, void **mr)
{
	struct rdmt_land *l;

	if (!t->v || slot >= t->n)
		return -1;
	l = &t->v[slot];
	if (l->state != RDMT_LAND_GRANTED || !l->revoked ||
	    l->gen != (gen & RDMT_LAND_GEN_MASK))
		return -1;
	/* The peer forgot the grant before returning it: free to go. */
	l->state = RDMT_LAND_BUSY;
	return psd_rdmt_land_done(t, slot, buf, mr) ? -1 : 0;
}

int psd_rdmt_grant_find(const struct rdmt_grant_tab *t, uint64_t key,
			uint64_t off, uint64_t len)
{
	unsigned i;

	for (i = 0; t->v && i < t->n; i++)
		if ((t->v[i].state == RDMT_GRANT_READY ||
		     t->v[i].state == RDMT_GRANT_USED) &&
		    t->v[i].key == key && t->v[i].off == off &&
		    t->v[i].len == len)
			return (int)i;
	return -1;
}

int psd_rdmt_grant_take(struct rdmt_grant_tab *t, unsigned slot, bool release,
			unsigned gen, uint64_t key, uint64_t off, uint64_t len,
			uint64_t addr, uint32_t rkey)
{
	struct rdmt_grant *g;

	if (slot >= RDMT_LAND_SLOTS)
		return -EPROTO;
	if (!t->v) {
		t->v = calloc(RDMT_LAND_SLOTS, sizeof(*t->v));
		if (!t->v)
			return -ENOMEM;
	}
	if (slot >= t->n)
		t->n = slot + 1;
	g = &t->v[slot];
	if (release) {
		g->state = RDMT_GRANT_NONE;
		return 0;
	}
	if (!len || len > RDMT_LAND_MAX_MSG)
		return -EPROTO;
	g->key = key;
	g->off = off;
	g->len = len;
	g->addr = addr;
	g->rkey = rkey;
	g->gen = (uint16_t)(gen & RDMT_LAND_GEN_MASK);
	g->state = RDMT_GRANT_READY;
	return 0;
}

int psd_rdmt_grant_again(struct rdmt_grant_tab *t, unsigned slot, unsigned gen)
{
	struct rdmt_grant *g;

	gen &= RDMT_LAND_GEN_MASK;
	if (!t->v || slot >= t->n || !gen)
		return -EPROTO;
	g = &t->v[slot];
	/* Granted again only after our write into it was taken. */
	if (g->state != RDMT_GRANT_USED || gen == g->gen)
		return -EPROTO;
	g->gen = (uint16_t)gen;
	g->state = RDMT_GRANT_READY;
	return 0;
}

int psd_rdmt_grant_revoke(struct rdmt_grant_tab *t, unsigned slot, unsigned gen)
{
	struct rdmt_grant *g;

	if (!t->v || slot >= t->n)
		return 0;
	g = &t->v[slot];
	if (g->state != RDMT_GRANT_READY ||
	    g->gen != (gen & RDMT_LAND_GEN_MASK))
		return 0;
	g->state = RDMT_GRANT_RETURN;
	return 1;
}
