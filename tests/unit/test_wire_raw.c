// SPDX-License-Identifier: MIT
/*
 * Raw-family headers (common/wire.h, PSD_F_RAW): what a request and its
 * answers carry (keys, optional per-key counts, values), the sizes that
 * must agree, and what the flag may ride on.
 */
#include "wire_util.h"

/* A push of @n keys with (@lens) or without counts and @span value
 * bytes. */
static struct psd_hdr raw_push(uint64_t n, bool lens, uint64_t span)
{
	struct psd_hdr h = { 0 };

	h.type = PSD_MSG_PUSH;
	h.flags = PSD_F_RAW;
	h.sender = 3;
	h.key = n ? 42 : 0;
	h.part = n;
	h.offset = lens ? 1 : 0;
	h.span = h.total = span;
	h.length = n * (lens ? 12 : 8) + span;
	h.epoch = (uint32_t)-5;		/* cmd -5 */
	h.step = 0x8000000100000007ull; /* a tag */
	h.req = 9;
	h.priority = -3;
	return h;
}

static void test_raw_accepts(void)
{
	struct psd_hdr h = raw_push(100, false, 400);

	expect_accept(&h, MAX_TENSOR);
	round_trip(&h, MAX_TENSOR);
	h = raw_push(100, true, 1234); /* counts of any size */
	expect_accept(&h, MAX_TENSOR);
	round_trip(&h, MAX_TENSOR);
	h = raw_push(0, false, 17); /* values without keys (SimpleApp) */
	expect_accept(&h, MAX_TENSOR);
	h = raw_push(0, false, 0); /* nothing at all */
	expect_accept(&h, MAX_TENSOR);
	h = raw_push(100, false, 0); /* a pull: keys only */
	h.type = PSD_MSG_PULL;
	expect_accept(&h, MAX_TENSOR);
	h = raw_push(100, true, 800); /* a pushpull */
	h.type = PSD_MSG_PUSHPULL;
	expect_accept(&h, MAX_TENSOR);
	h.type = PSD_MSG_PULL_RESP; /* the answer: the same layout */
	expect_accept(&h, MAX_TENSOR);
	h.status = PSCHED_EREMOTE; /* a refusal: nothing */
	h.length = 0;
	expect_accept(&h, MAX_TENSOR);
	h = raw_push(100, false, 400); /* a push's answer */
	h.type = PSD_MSG_PUSH_ACK;
	h.length = 0;
	expect_accept(&h, MAX_TENSOR);
	h = raw_push(100, true, 800); /* an answer for the keys asked */
	h.type = PSD_MSG_PULL_RESP;
	h.offset = PSD_RAW_LENS | PSD_RAW_ASKED;
	h.length = 100 * 4 + 800;
	expect_accept(&h, MAX_TENSOR);
	round_trip(&h, MAX_TENSOR);
	h.offset = PSD_RAW_ASKED; /* without counts: values only */
	h.length = 800;
	expect_accept(&h, MAX_TENSOR);
}

static void test_raw_rejects_sizes(void)
{
	struct psd_hdr h = raw_push(100, false, 400);

	h.length--; /* a byte short */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, true, 400);
	h.length -= 4 * 100; /* counts announced, not there */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, false, 400);
	h.offset = 4; /* counts and keys-asked are the only bits */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, false, 400);
	h.offset = PSD_RAW_ASKED; /* keys left out of a request */
	h.length = 400;
	expect_reject(&h, MAX_TENSOR);
	h.type = PSD_MSG_PULL_RESP; /* an answer: keys left out, but sent */
	h.length = 100 * 8 + 400;
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, false, 400);
	h.total = 401; /* total and span differ */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, false, 400);
	h.type = PSD_MSG_PULL; /* a pull carrying values */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, false, 400);
	h.type = PSD_MSG_PUSH_ACK; /* an ack with a payload */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(10, false, 8 * GIB); /* an answer above the limit */
	h.type = PSD_MSG_PULL_RESP;
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(1, false, 0); /* keys overflowing the length */
	h.part = UINT64_MAX / 4;
	h.length = 8;
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(100, false, 400);
	h.type = PSD_MSG_PULL_RESP;
	h.status = PSCHED_EREMOTE; /* a refusal with a payload */
	expect_reject(&h, MAX_TENSOR);
}

static void test_raw_rejects_flags(void)
{
	struct psd_hdr h = raw_push(10, false, 40);

	h.flags |= PSD_F_KEYLIST; /* never with another flag */
	expect_reject(&h, MAX_TENSOR);
	h.flags = PSD_F_RAW | PSD_F_COMPRESSED;
	expect_reject(&h, MAX_TENSOR);
	h.flags = PSD_F_RAW | PSD_F_ROWS;
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(10, false, 40);
	h.type = PSD_MSG_INIT; /* no init */
	expect_reject(&h, MAX_TENSOR);
	h = raw_push(0, false, 0);
	h.type = PSD_MSG_CONTROL;
	expect_reject(&h, MAX_TENSOR);
}

/* Every decoded raw header keeps the rules: random fields, the flag set. */
static void test_raw_random(void)
{
	struct psd_hdr h, got;
	uint8_t buf[PSD_HDR_SIZE];
	const char *why;
	int accepted = 0;

	for (int i = 0; i < FUZZ_ROUNDS; i++) {
		h = raw_push(test_rng_below(4), test_rng_below(2),
			     test_rng_below(64));
		h.type = (uint8_t)(1 + test_rng_below(PSD_MSG_TYPE_MAX));
		if (test_rng_below(2))
			h.length += test_rng_below(3) -
				    1; /* off by one either way */
		if (test_rng_below(4) == 0)
			h.offset = test_rng_below(5);
		psd_hdr_encode(&h, buf);
		if (psd_hdr_decode(buf, MAX_TENSOR, &got, &why))
			continue;
		accepted++;
		CHECK(got.flags == PSD_F_RAW);
		CHECK(got.type != PSD_MSG_INIT && got.type != PSD_MSG_CONTROL);
		CHECK_U64(got.total, ==, got.span);
		CHECK(got.offset <= (PSD_RAW_LENS | PSD_RAW_ASKED));
		if (got.offset & PSD_RAW_ASKED)
			CHECK(got.type == PSD_MSG_PULL_RESP);
		if (got.type == PSD_MSG_PUSH_ACK)
			CHECK_U64(got.length, ==, 0);
		else
			CHECK_U64(got.length, ==,
				  got.part * ((got.offset & PSD_RAW_ASKED ? 0
									  : 8) +
					      (got.offset & PSD_RAW_LENS ? 4
									 : 0)) +
					  got.span);
	}
	CHECK(accepted > 0);
}

const struct test_case test_list[] = {
	{ "raw_accepts", test_raw_accepts },
	{ "raw_rejects_sizes", test_raw_rejects_sizes },
	{ "raw_rejects_flags", test_raw_rejects_flags },
	{ "raw_random", test_raw_random },
	{ NULL, NULL },
};
