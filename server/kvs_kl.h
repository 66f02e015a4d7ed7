/* SPDX-License-Identifier: MIT */
/*
 * Key lists on a server, private to server/kvs_keylist.c (requests, steps,
 * waits) and the store: server/kvs_klstore.c and kvs_klapply.c (its
 * updates).  The design is described at the top of kvs_keylist.c.  Van
 * thread only.
 */
#ifndef PSCHED_SERVER_KVS_KL_H
#define PSCHED_SERVER_KVS_KL_H

#include "kvs.h"

#define KL_NONE UINT32_MAX
/* Header flag of this server's own (never on the wire: psd_hdr_decode()
 * refuses unknown flags): the keys were unpacked and checked sorted
 * already (kvs_keylist.c, kl_unpack_own()): kl_parse() need not check
 * again. */
#define KL_F_SORTED 0x80u

/* A worker's last tagged list on this server (wire.h PSD_F_KLCACHED). */
struct psd_kl_wcache {
	uint32_t tag; /* 0: none */
	uint32_t ulen;
	uint64_t n;
	uint64_t *keys;
	uint32_t *lens;	    /* when ulen is 0 */
	uint64_t whole_gen; /* gen + 1 when it was the whole store */
	uint32_t *idx;	    /* its slots in the store, valid while */
	uint64_t idx_gen;   /* ... this is gen + 1 */
};

struct psd_kvs_kl {
	bool has_dtype;
	uint8_t dtype;
	unsigned esize;
	uint64_t n;	/* keys stored */
	uint64_t *keys; /* sorted */
	/* A second sorted run (a key block), NULL: keys holds every key.
	 * Slots, values and sums are run after run: keys' n - n2 first,
	 * then keys2's.  See psd_kl_insert(). */
	uint64_t *keys2;
	uint64_t n2;
	uint32_t ulen; /* elements of every key, 0: lens/offs */
	uint32_t *lens;
	uint64_t *offs;	    /* element offset of each key */
	uint64_t nelem;	    /* elements stored */
	uint8_t *val, *acc; /* nelem elements each */
	/* The key blocks val and acc lie in when adopted from a message
	 * (psd_kl_rxbuf()), NULL when they are their own allocation. */
	uint64_t *val_blk, *acc_blk;
	uint32_t *stamp;       /* per key: step whose push acc holds */
	uint64_t version;      /* steps applied */
	unsigned got;	       /* workers whose push of the open step is in */
	bool *have;	       /* [nworker] */
	unsigned full;	       /* pushes of the whole store this step */
	bool partial;	       /* stamps in use this step */
	struct psd_list held;  /* early pushes, struct psd_kvs_wait */
	struct psd_list pulls; /* pulls for a later version */
	struct psd_kl_wcache *wc; /* [nworker]: each worker's tagged list */
	uint64_t gen;		  /* bumped when keys are added */
	uint32_t *idx;		  /* slots of the list being handled */
	uint64_t idx_cap;
	uint8_t *out; /* a pull answer gathered (psd_big_alloc) */
	uint64_t out_cap;
	/* Packed keys (PSD_F_KLPACKED): unpacked here when the message is
	 * not in a buffer of its own; a section moved aside to unpack in
	 * place when it is (kvs_keylist.c kl_unpack_own()). */
	uint64_t *ukeys;
	uint64_t ukeys_cap;
	uint8_t *pk;
	uint64_t pk_cap;
	uint64_t max_ukeys; /* PS_MAX_TENSOR_BYTES / 8 (0: no limit) */
	bool huge;	    /* PS_KEYLIST_HUGEPAGES: big arrays in huge pages */
};

/* A list as it arrived (payload pointers into the message). */
struct psd_kl_list {
	uint64_t n;
	const uint64_t *keys;
	const uint32_t *lens; /* NULL: ulen each */
	uint32_t ulen;
	const uint8_t *vals; /* push only */
	uint64_t bytes;
	struct psd_kl_wcache *wc; /* the tagged copy, if any */
	uint32_t tag;		  /* came with its keys and this tag */
	/* The payload is a key block from psd_kl_rxbuf() starting with
	 * the keys: an empty store adopts it rather than copying. */
	bool own;
	/* keys is a key block (a tagged list's); own or blk: its keys may
	 * still be packed (kvs_klstore.c, struct psd_kl_keyhdr) */
	bool blk;
};

static inline uint32_t psd_kl_len_of(const struct psd_kl_list *l, uint64_t i)
{
	return l->lens ? l->lens[i] : l->ulen;
}

static inline uint32_t psd_kl_slen(const struct psd_kvs_kl *kl, uint64_t j)
{
	return kl->ulen ? kl->ulen : kl->lens[j];
}

static inline uint64_t psd_kl_soff(const struct psd_kvs_kl *kl, uint64_t j)
{
	return kl->ulen ? j * kl->ulen : kl->offs[j];
}

/* kvs_klstore.c (psd_kl_packed_len(): kvs_keylist.c) */
/* The keys of list @l written out (a key block's may still be packed). */
void psd_kl_list_ready(const struct psd_kl_list *l);
/* Are key block @k's keys still packed (tests)? */
bool psd_kl_keys_packed(const uint64_t *k);
/* The key-list state, made on first use (NULL: no memory). */
struct psd_kvs_kl *psd_kl_get(struct psched_node *n);
/*
 * A scratch array of the store (@buf, *@cap elements of @esize bytes)
 * with room for @n: @buf itself, or a new array (*@cap set, @buf freed;
 * its contents are not kept; made even for @n 0 when @buf is NULL).  NULL
 * only without memory, @buf then left as it was.
 */
void *psd_kl_grow(const struct psd_kvs_kl *kl, void *buf, uint64_t *cap,
		  uint64_t n, size_t esize);
/* Bytes of request @h's packed key section (PSD_F_KLPACKED). */
uint64_t psd_kl_packed_len(const struct psd_hdr *h);
/* Keep @l as worker @wrank's tagged list, if it came with a tag. */
void psd_kl_remember(struct psd_kvs_kl *kl, int wrank,
		     const struct psd_kl_list *l, bool whole);
/* Slots of @l's keys (KL_NONE: not stored, counted in *@nnew); a key of
 * another length: PSCHED_ESIZE, its index in *@bad. */
int psd_kl_slots(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		 const uint32_t **idx, uint64_t *nnew, uint64_t *bad);
/* Is @l the whole store, in order (remembered for tagged lists)? */
bool psd_kl_is_whole(const struct psd_kvs_kl *kl, const struct psd_kl_list *l);
bool psd_kl_is_whole_cmp(const struct psd_kvs_kl *kl,
			 const struct psd_kl_list *l);
/* A buffer of @len bytes for a message's payload that the store can
 * adopt as its key array (psd_kl_list.own), or NULL; its bytes from
 * @from on are faulted in at once (what the receive writes).
 * psd_kl_rxbuf_put() drops the message's hold on it. */
void *psd_kl_rxbuf(const struct psd_kvs_kl *kl, uint64_t len, uint64_t from);
/* Request @h with packed keys of one length, received into @own from
 * psd_kl_rxbuf() as kl_unpack_own() (kvs_keylist.c) says, but its keys
 * left packed until read (struct psd_kl_keyhdr): the section is checked
 * and kept aside, *@raw describes the plain request.  0, -EPROTO with
 * *@why, -ENOMEM. */
int psd_kl_own_lazy(const struct psd_hdr *h, void *own, struct psd_hdr *raw,
		    const char **why);
void psd_kl_rxbuf_put(void *buf);
/* kvs_klapply.c */
/* Store @l's @nnew new keys (value 0): all or nothing (-ENOMEM); 1:
 * @l's values added to the open step too (see kvs_klapply.c). */
int psd_kl_insert(struct psd_kvs *s, struct psd_kvs_kl *kl,
		  const struct psd_kl_list *l, uint64_t nnew);
/* @l's keys all new, stored and added without a lookup: 1; 0: maybe not,
 * nothing done (kvs_klapply.c); -ENOMEM. */
int psd_kl_insert_new(struct psd_kvs *s, struct psd_kvs_kl *kl,
		      const struct psd_kl_list *l);
/* Is @l one of the two runs of the store, key for key (tagged lists share
 * the run's array: a pointer compare)?  Its slots are then *@base + i. */
bool psd_kl_run_of(const struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		   uint64_t *base);
/* Add @l, the run at slot @base (psd_kl_run_of()), to the open step. */
int psd_kl_add_run(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		   uint64_t base);
/* Add @l (every key stored, slots @idx unless @whole) to the open step. */
int psd_kl_add(struct psd_kvs_kl *kl, const struct psd_kl_list *l, bool whole,
	       const uint32_t *idx);
/* Fold the open step in: version + 1. */
void psd_kl_commit(struct psd_kvs *s, struct psd_kvs_kl *kl);

/* The store's big arrays and its refcounted key arrays, shared by
 * kvs_klstore.c (which defines them) and kvs_klapply.c.  The header sits
 * in the 64 bytes before a key array's first key. */
struct psd_kl_keyhdr {
	size_t refs;
	uint8_t *pk; /* packed keys not yet written out (malloc'd) */
	uint64_t pklen, pkn;
	char pad[32];
};

void *psd_kl_alloc(const struct psd_kvs_kl *kl, size_t len, bool zero);
void psd_kl_free(void *p);
bool psd_kl_has(const uint64_t *k, uint64_t n, uint64_t key);
struct psd_kl_keyhdr *psd_kl_hdr(const uint64_t *k);
uint64_t psd_kl_key_at(const uint64_t *k, uint64_t i);
uint64_t *psd_kl_keys_alloc(const struct psd_kvs_kl *kl, uint64_t n);
uint64_t *psd_kl_keys_get(uint64_t *k);
bool psd_kl_keys_lazy(const uint64_t *k);
void psd_kl_keys_put(uint64_t *k);
uint64_t psd_kl_lkey_at(const struct psd_kl_list *l, uint64_t i);
void psd_kl_store_ready(const struct psd_kvs_kl *kl);
void psd_kl_vals_free(uint8_t *p, uint64_t *blk);

#endif
