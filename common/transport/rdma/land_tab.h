/* SPDX-License-Identifier: MIT */
/*
 * RDMA rendezvous cache, the bookkeeping (no verbs here, so unit tests can
 * drive it without a device; land.c does the verbs side).  Design:
 * rdma_internal.h, "Rendezvous cache".
 *
 * Receiver: struct rdmt_land_tab, one per connection, the landing buffers
 * this side granted to the peer, by slot.  A slot is FREE, GRANTED (the
 * peer may RDMA-write one message into it at any time, so its buffer must
 * stay registered) or BUSY (a write landed; the van thread is delivering
 * it).  Only a BUSY slot may be freed or re-granted: a granted buffer is
 * never released under the peer.  Each grant bumps the slot's generation,
 * which travels in the immediate of the write, so a write naming an old
 * grant is refused instead of delivered.
 *
 * Sender: struct rdmt_grant_tab, the peer's grants by its slot number:
 * READY (may write once) or USED (written, waiting for the peer to grant
 * it again or release it).
 *
 * Every function: the caller holds dev->lock.
 */
#ifndef PSCHED_COMMON_TRANSPORT_RDMA_LAND_TAB_H
#define PSCHED_COMMON_TRANSPORT_RDMA_LAND_TAB_H

#include <stdbool.h>
#include <stdint.h>

#define RDMT_LAND_SLOTS	   1024u
#define RDMT_IMM_LAND	   0x80000000u /* immediate: a cached write */
#define RDMT_LAND_GEN_MASK 0x7fffu
#define RDMT_LAND_MAX_MSG  (4u << 20)	 /* larger: always RTS/CTS */
#define RDMT_LAND_CAP	   (64ull << 20) /* bytes per connection */
#define RDMT_LAND_HDR	   128u		 /* header room after the payload */

enum rdmt_land_state {
	RDMT_LAND_FREE = 0,
	RDMT_LAND_GRANTED,
	RDMT_LAND_BUSY,
};

struct rdmt_land {
	uint64_t key, off, len;
	void *buf;     /* len + RDMT_LAND_HDR bytes: payload, then header;
			* NULL when FREE */
	void *mr;      /* its struct ibv_mr * */
	uint64_t used; /* tick of the last grant (LRU) */
	uint16_t gen;
	uint8_t state;
	bool drop;    /* release after the next write instead of re-granting */
	bool revoked; /* REVOKE sent: the peer returns it or writes once */
};

struct rdmt_land_tab {
	struct rdmt_land *v; /* RDMT_LAND_SLOTS entries, on first use */
	unsigned n;	     /* slots [0, n) have been used */
	uint64_t bytes;	     /* buffer bytes held */
	uint64_t cap;	     /* 0: the cache is off */
	uint64_t tick;
};

enum rdmt_grant_state {
	RDMT_GRANT_NONE = 0,
	RDMT_GRANT_READY,
	RDMT_GRANT_USED,
	RDMT_GRANT_RETURN, /* revoked while READY: RETURN to be posted */
};

struct rdmt_grant {
	uint64_t key, off, len;
	uint64_t addr;
	uint32_t rkey;
	uint16_t gen;
	uint8_t state;
};

struct rdmt_grant_tab {
	struct rdmt_grant *v; /* RDMT_LAND_SLOTS entries, on first grant */
	unsigned n;
};

static inline uint32_t rdmt_imm_land(unsigned slot, unsigned gen)
{
	return RDMT_IMM_LAND | (gen & RDMT_LAND_GEN_MASK) << 16 |
	       (slot & 0xffffu);
}

/* Bytes a landing buffer for a @len-byte payload takes. */
static inline uint64_t rdmt_land_size(uint64_t len)
{
	return RDMT_LAND_HDR + len;
}

/* Receiver. */
int psd_rdmt_land_find(const struct rdmt_land_tab *t, uint64_t key,
		       uint64_t off, uint64_t len);
/* A slot for a new grant of a @len-byte range, or -1: the cache is off,
 * @len is out of range, or there is no room.  Then the least recently
 * granted slot is marked to be released after its next write, and
 * *@revoke is set to it (else -1): the caller sends the peer a REVOKE,
 * so a range no longer used (config switch, re-init) gives its room back
 * too. */
int psd_rdmt_land_pick(struct rdmt_land_tab *t, uint64_t len, int *revoke);
/* The peer RETURNed revoked slot @slot of generation @gen unused: 0 and
 * the slot is FREE (*@buf, *@mr are the caller's to free), or -1. */
int psd_rdmt_land_returned(struct rdmt_land_tab *t, unsigned slot, unsigned gen,
			   void **buf, void **mr);
/* The slot is granted now (new buffer @buf/@mr, or a re-grant of a BUSY
 * slot when @buf is NULL); returns the generation to send. */
unsigned psd_rdmt_land_grant(struct rdmt_land_tab *t, unsigned slot,
			     uint64_t key, uint64_t off, uint64_t len,
			     void *buf, void *mr);
/* The bytes a whole cached write with immediate @imm has (payload and
 * header) when it names a slot holding a buffer, else 0. */
uint64_t psd_rdmt_land_want(const struct rdmt_land_tab *t, uint32_t imm);
/* A cached write arrived with immediate @imm, @byte_len bytes long
 * (one write: the payload, then the header right after it):
 * the slot (now BUSY), or -1 with *@why saying what is wrong with it. */
int psd_rdmt_land_claim(struct rdmt_land_tab *t, uint32_t imm,
			uint32_t byte_len, const char **why);
/* Delivery of BUSY @slot is over: true to grant it again (the caller
 * calls psd_rdmt_land_grant() with @buf NULL), false to release it: the
 * slot is FREE again and the buffer and MR (*@buf, *@mr) are the caller's to
 * free. */
bool psd_rdmt_land_done(struct rdmt_land_tab *t, unsigned slot, void **buf,
			void **mr);

/* Sender.  find matches READY and USED grants. */
int psd_rdmt_grant_find(const struct rdmt_grant_tab *t, uint64_t key,
			uint64_t off, uint64_t len);
/* The peer granted (@release false) or released slot @slot; -EPROTO for
 * a slot out of range, -ENOMEM. */
int psd_rdmt_grant_take(struct rdmt_grant_tab *t, unsigned slot, bool release,
			unsigned gen, uint64_t key, uint64_t off, uint64_t len,
			uint64_t addr, uint32_t rkey);
/* The peer granted slot @slot again with generation @gen (a regrant
 * piggybacked on a SEND): the range, address and rkey stay.  -EPROTO
 * unless the slot is USED (our write into it is what it took back). */
int psd_rdmt_grant_again(struct rdmt_grant_tab *t, unsigned slot, unsigned gen);
/* The peer revokes slot @slot of generation @gen: 1 when it is READY
 * (now RETURN: the caller posts a RETURN), 0 when it was used already
 * (the write is on its way and the peer releases it after) or unknown. */
int psd_rdmt_grant_revoke(struct rdmt_grant_tab *t, unsigned slot,
			  unsigned gen);

#endif
