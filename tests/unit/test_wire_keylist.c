// SPDX-License-Identifier: MIT
/*
 * Key-list headers (common/wire.h, PSD_F_KEYLIST, PSD_F_KLCACHED and
 * PSD_F_KLPACKED): the sizes that must agree (keys, lengths, values), tags,
 * the packed key section's length, and what the flags may ride on.
 */
#include "klpack.h"
#include "wire_util.h"

/* A push of @n keys of @ulen float32 each (ulen 0: per-key lengths, the
 * values @span bytes). */
static struct psd_hdr kl_push(uint64_t n, uint32_t ulen, uint64_t span)
{
	struct psd_hdr h = { 0 };

	h.type = PSD_MSG_PUSH;
	h.dtype = PSCHED_F32;
	h.flags = PSD_F_KEYLIST;
	h.sender = 3;
	h.key = 42;
	h.part = n;
	h.offset = ulen;
	h.span = h.total = ulen ? n * ulen * 4 : span;
	h.length = n * (ulen ? 8 : 12) + h.span;
	h.step = 1;
	h.req = 9;
	return h;
}

static void test_kl_accepts(void)
{
	struct psd_hdr h = kl_push(1000, 1, 0);

	expect_accept(&h, MAX_TENSOR);
	round_trip(&h, MAX_TENSOR);
	h = kl_push(10, 0, 4 * 27); /* per-key lengths */
	expect_accept(&h, MAX_TENSOR);
	h = kl_push(0, 1, 0); /* an empty slice of a push */
	expect_accept(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0); /* a pull: keys only */
	h.type = PSD_MSG_PULL;
	h.length = 1000 * 8;
	expect_accept(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0); /* a tagged list named again: values only */
	h.flags |= PSD_F_KLCACHED;
	h.epoch = 7;
	h.length = h.span;
	expect_accept(&h, MAX_TENSOR);
	h.type = PSD_MSG_PULL; /* ... a pull of it: nothing */
	h.length = 0;
	expect_accept(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0); /* the answer */
	h.type = PSD_MSG_PULL_RESP;
	h.length = h.span;
	expect_accept(&h, MAX_TENSOR);
	h.type = PSD_MSG_PUSH_ACK;
	h.length = 0;
	expect_accept(&h, MAX_TENSOR);
}

static void test_kl_rejects_sizes(void)
{
	struct psd_hdr h = kl_push(1000, 1, 0);

	h.length -= 4; /* a value short */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.span = h.total = 3996; /* values of 999 keys */
	h.length -= 4;
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.total = h.span + 4; /* total must equal span */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(10, 0, 6); /* values not whole float32s */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.type = PSD_MSG_PULL; /* a pull carrying values */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1, 1, 0); /* n * len * 4 overflowing 64 bits */
	h.part = 1ull << 62;
	h.offset = 16;
	h.span = h.total = 0;
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1, 1, 0); /* a key count whose keys overflow */
	h.part = UINT64_MAX / 4;
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(2, 1, 0);
	h.offset = 1ull << 33; /* a length above u32 */
	expect_reject(&h, MAX_TENSOR);
}

static void test_kl_rejects_flags(void)
{
	struct psd_hdr h = kl_push(1000, 1, 0);

	h.type = PSD_MSG_INIT; /* key lists need no init */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(0, 0, 0); /* nor control messages (found by fuzz_wire) */
	h.type = PSD_MSG_CONTROL;
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.flags |= PSD_F_COMPRESSED;
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.flags |= PSD_F_KLCACHED; /* cached without a tag */
	h.length = h.span;
	expect_reject(&h, MAX_TENSOR);
	h.epoch = 3;
	h.length = h.span + 8000; /* cached but carrying keys */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.flags = PSD_F_KLCACHED; /* without PSD_F_KEYLIST */
	h.epoch = 3;
	h.length = h.span;
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.type = PSD_MSG_PUSH_ACK; /* an answer with a payload */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0);
	h.flags = 0x80; /* unknown flag */
	expect_reject(&h, MAX_TENSOR);
}

/* Push @h with its keys packed in a section of @sec bytes. */
static struct psd_hdr kl_packed(struct psd_hdr h, uint64_t sec)
{
	bool push = h.type == PSD_MSG_PUSH || h.type == PSD_MSG_PUSHPULL;

	h.flags |= PSD_F_KLPACKED;
	h.length = sec + (h.offset ? 0 : 4 * h.part) + (push ? h.span : 0);
	return h;
}

static void test_kl_packed(void)
{
	uint64_t min = psd_klpack_min_len(1000); /* 4 blocks */
	struct psd_hdr h;

	CHECK_U64(min, ==, 80); /* 4 x 17 + 7, rounded up to 8 */
	h = kl_packed(kl_push(1000, 1, 0), min);
	expect_accept(&h, MAX_TENSOR);
	round_trip(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1000, 1, 0), 8000); /* no smaller than plain */
	expect_accept(&h, MAX_TENSOR);
	h = kl_packed(kl_push(10, 0, 4 * 27), 24); /* per-key lengths */
	expect_accept(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0); /* a pull */
	h.type = PSD_MSG_PULL;
	h = kl_packed(h, min);
	expect_accept(&h, MAX_TENSOR);
	h.type = PSD_MSG_PUSHPULL; /* ... a pushpull, values missing */
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1000, 1, 0), min - 8); /* section too short */
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1000, 1, 0), min + 4); /* not a multiple of 8 */
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1000, 1, 0), min);
	h.length = h.span - 8; /* shorter than the values */
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(0, 1, 0), 24); /* an empty list */
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1000, 1, 0), min); /* with a cached tag */
	h.flags |= PSD_F_KLCACHED;
	h.epoch = 3;
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1000, 1, 0), min);
	h.flags &= (uint8_t)~PSD_F_KEYLIST; /* without PSD_F_KEYLIST */
	expect_reject(&h, MAX_TENSOR);
	h = kl_push(1000, 1, 0); /* on an answer */
	h.type = PSD_MSG_PULL_RESP;
	h.length = h.span;
	h.flags |= PSD_F_KLPACKED;
	expect_reject(&h, MAX_TENSOR);
	h.type = PSD_MSG_PUSH_ACK;
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
	/* a key count far beyond what the section can hold */
	h = kl_packed(kl_push(1000, 1, 0), min);
	h.part = 1ull << 40;
	h.offset = 0;
	h.span = h.total = 0;
	h.length = min + 4 * h.part;
	expect_reject(&h, MAX_TENSOR);
	h = kl_packed(kl_push(1, 1, 0), 24); /* lengths overflowing */
	h.part = UINT64_MAX / 2;
	h.offset = 0;
	h.span = h.total = 0;
	h.length = 24;
	expect_reject(&h, MAX_TENSOR);
}

const struct test_case test_list[] = {
	{ "kl_packed", test_kl_packed },
	{ "kl_accepts", test_kl_accepts },
	{ "kl_rejects_sizes", test_kl_rejects_sizes },
	{ "kl_rejects_flags", test_kl_rejects_flags },
	{ NULL, NULL },
};
