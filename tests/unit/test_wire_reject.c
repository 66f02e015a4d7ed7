// SPDX-License-Identifier: MIT
/*
 * Data-plane header (common/wire.h): one rejection case per framing rule,
 * and a fixed-seed fuzz loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire_util.h"

static void test_wire_base_is_valid(void)
{
	struct psd_hdr h = base_push();

	/* Every rejection below mutates this one header. */
	expect_accept(&h, MAX_TENSOR);
}

static void test_wire_reject_bad_magic(void)
{
	struct psd_hdr h = base_push();
	uint8_t buf[PSD_HDR_SIZE], bad[PSD_HDR_SIZE];
	int i;

	psd_hdr_encode(&h, buf);
	for (i = 0; i < 4; i++) {
		memcpy(bad, buf, sizeof(bad));
		bad[i] ^= 0x20; /* "pSD1", "PsD1", ... */
		expect_reject_buf(bad, MAX_TENSOR);
	}
	memcpy(bad, buf, sizeof(bad));
	memcpy(bad, "1DSP", 4); /* big-endian magic */
	expect_reject_buf(bad, MAX_TENSOR);
	memset(bad, 0, 4);
	expect_reject_buf(bad, MAX_TENSOR);
}

static void test_wire_reject_bad_version(void)
{
	struct psd_hdr h = base_push();
	uint8_t buf[PSD_HDR_SIZE];
	static const uint8_t versions[] = { 0, 2, 0x81, 0xff };
	size_t i;

	for (i = 0; i < sizeof(versions); i++) {
		psd_hdr_encode(&h, buf);
		buf[4] = versions[i];
		expect_reject_buf(buf, MAX_TENSOR);
	}
}

static void test_wire_reject_type_zero(void)
{
	struct psd_hdr h = base_push();

	h.type = 0;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_type_above_max(void)
{
	struct psd_hdr h = base_push();

	h.type = PSD_MSG_TYPE_MAX + 1;
	expect_reject(&h, MAX_TENSOR);
	h.type = 0x80;
	expect_reject(&h, MAX_TENSOR);
	h.type = 0xff;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_bad_dtype(void)
{
	struct psd_hdr h = base_push();

	h.dtype = PSCHED_DTYPE_MAX; /* the largest valid one is fine */
	h.part = 0;
	expect_accept(&h, MAX_TENSOR);
	h.dtype = PSCHED_DTYPE_MAX + 1;
	expect_reject(&h, MAX_TENSOR);
	h.dtype = 0xff;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_unknown_flags(void)
{
	struct psd_hdr h = base_push();
	unsigned bit;

	for (bit = 1; bit < 8; bit++) {
		h.flags = (uint8_t)(1u << bit);
		expect_reject(&h, MAX_TENSOR);
	}
	h.flags = 0xff;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_reserved_nonzero(void)
{
	struct psd_hdr h = base_push();
	uint8_t buf[PSD_HDR_SIZE];
	int i;

	for (i = 92; i < 96; i++) {
		psd_hdr_encode(&h, buf);
		buf[i] = 1;
		expect_reject_buf(buf, MAX_TENSOR);
		buf[i] = 0x80;
		expect_reject_buf(buf, MAX_TENSOR);
	}
}

static void test_wire_reject_status_on_request(void)
{
	static const uint8_t reqs[] = { PSD_MSG_PUSH, PSD_MSG_PULL,
					PSD_MSG_PUSHPULL, PSD_MSG_INIT };
	struct psd_hdr h = base_push();
	size_t i;

	for (i = 0; i < sizeof(reqs); i++) {
		h.type = reqs[i];
		h.flags = reqs[i] == PSD_MSG_INIT ? PSD_F_HAS_VALUE : 0;
		h.length = reqs[i] == PSD_MSG_PULL ? 0 : h.span;
		h.status = 0;
		expect_accept(&h, MAX_TENSOR);
		h.status = -EIO;
		expect_reject(&h, MAX_TENSOR);
		h.status = INT32_MIN;
		expect_reject(&h, MAX_TENSOR);
	}
}

static void test_wire_reject_positive_status(void)
{
	static const uint8_t types[] = { PSD_MSG_CONTROL, PSD_MSG_PUSH_ACK,
					 PSD_MSG_PULL_RESP };
	struct psd_hdr h = base_push();
	size_t i;

	for (i = 0; i < sizeof(types); i++) {
		h.type = types[i];
		h.length = 0;
		h.status = 1;
		expect_reject(&h, MAX_TENSOR);
		h.status = INT32_MAX;
		expect_reject(&h, MAX_TENSOR);
	}
}

static void test_wire_reject_control_too_large(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_CONTROL;
	h.length = PSD_MAX_CONTROL;
	expect_accept(&h, MAX_TENSOR);
	h.length = PSD_MAX_CONTROL + 1;
	expect_reject(&h, MAX_TENSOR);
	h.length = UINT64_MAX;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_push_length_not_span(void)
{
	struct psd_hdr h = base_push();

	h.length = h.span + 4;
	expect_reject(&h, MAX_TENSOR);
	h.length = h.span - 4;
	expect_reject(&h, MAX_TENSOR);
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
	h.type = PSD_MSG_PUSHPULL;
	h.length = h.span;
	expect_accept(&h, MAX_TENSOR);
	h.length = h.span * 2;
	expect_reject(&h, MAX_TENSOR);
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_pull_with_payload(void)
{
	struct psd_hdr h = base_push();

	h.type = PSD_MSG_PULL;
	h.length = 0;
	expect_accept(&h, MAX_TENSOR);
	h.length = h.span;
	expect_reject(&h, MAX_TENSOR);
	h.length = 1;
	expect_reject(&h, MAX_TENSOR);
	/* PUSH_ACK carries no payload either. */
	h.type = PSD_MSG_PUSH_ACK;
	h.length = 4;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_init_with_value_wrong_length(void)
{
	struct psd_hdr h = base_push();

	h.type = PSD_MSG_INIT;
	h.flags = PSD_F_HAS_VALUE;
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
	h.length = h.span + 4;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_init_without_value_with_payload(void)
{
	struct psd_hdr h = base_push();

	h.type = PSD_MSG_INIT;
	h.flags = 0;
	h.length = h.span;
	expect_reject(&h, MAX_TENSOR);
	h.length = 4;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_pull_resp_status_with_payload(void)
{
	struct psd_hdr h = base_push();

	h.type = PSD_MSG_PULL_RESP;
	h.status = -EIO;
	h.length = h.span;
	expect_reject(&h, MAX_TENSOR);
	/* And the converse: success without the span's bytes. */
	h.status = 0;
	h.length = 0;
	expect_reject(&h, MAX_TENSOR);
	h.length = h.span - 4;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_total_zero(void)
{
	struct psd_hdr h = base_push();

	h.total = 0;
	h.offset = 0;
	h.span = 0;
	h.length = 0;
	h.part = 0;
	expect_reject(&h, MAX_TENSOR);
	h.type = PSD_MSG_PULL;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_total_above_max(void)
{
	struct psd_hdr h = base_push();
	static const uint8_t answers[] = { PSD_MSG_PUSH_ACK,
					   PSD_MSG_PULL_RESP };
	size_t i;

	/* Requests over the limit are well framed: the server refuses that
	 * one request (server/kvs_rx.c), the connection goes on. */
	h.total = 1ull << 40; /* 1 TiB with a 4 GiB limit */
	expect_accept(&h, MAX_TENSOR);
	h.total = MAX_TENSOR; /* at the limit is fine */
	expect_accept(&h, MAX_TENSOR);
	/* Answers over the limit are a bad peer. */
	for (i = 0; i < sizeof(answers); i++) {
		h = base_push();
		h.type = answers[i];
		h.length = 0;
		h.status = PSCHED_ESIZE;
		h.total = 1ull << 40;
		expect_reject(&h, MAX_TENSOR);
		h.total = MAX_TENSOR + 4;
		expect_reject(&h, MAX_TENSOR);
		h.total = MAX_TENSOR;
		expect_accept(&h, MAX_TENSOR);
		h.total = UINT64_MAX - 3;
		expect_reject(&h, MAX_TENSOR);
	}
}

static void test_wire_reject_range_beyond_total(void)
{
	struct psd_hdr h = base_push();

	h.offset = h.total - 256;
	h.span = 512;
	h.length = 512;
	expect_reject(&h, MAX_TENSOR);
	h.offset = h.total; /* empty range at the end is inside */
	h.span = 0;
	h.length = 0;
	expect_accept(&h, MAX_TENSOR);
	h.offset = h.total + 4;
	expect_reject(&h, MAX_TENSOR);
	h.offset = 0;
	h.span = h.total + 4;
	h.length = h.span;
	expect_reject(&h, MAX_TENSOR);
}

static void test_wire_reject_range_overflow(void)
{
	struct psd_hdr h = base_push();

	/* RAW and PULL: only the range rule can fire. */
	h.type = PSD_MSG_PULL;
	h.dtype = PSCHED_RAW;
	h.length = 0;
	h.part = 0;
	h.offset = UINT64_MAX;
	h.span = 2; /* offset + span wraps to 1 */
	expect_reject(&h, MAX_TENSOR);
	h.offset = 16;
	h.span = UINT64_MAX - 7; /* wraps to 8, inside total */
	expect_reject(&h, MAX_TENSOR);
	h.offset = UINT64_MAX;
	h.span = UINT64_MAX;
	expect_reject(&h, MAX_TENSOR);
	h.offset = 1;
	h.span = UINT64_MAX;
	expect_reject(&h, UINT64_MAX);
	/* Also with max_tensor = 2^64-1 and total = 2^64-1. */
	h.total = UINT64_MAX;
	h.offset = UINT64_MAX;
	h.span = 2;
	expect_reject(&h, UINT64_MAX);
	h.span = 0;
	expect_accept(&h, UINT64_MAX);
}

static void test_wire_reject_misaligned(void)
{
	struct psd_hdr h = base_push();

	h.dtype = PSCHED_F32;
	h.total = 10;
	h.offset = 2;
	h.span = 6;
	h.length = 6;
	h.part = 6;
	expect_reject(&h, MAX_TENSOR);
	/* The same sizes are fine as bytes. */
	h.dtype = PSCHED_RAW;
	expect_accept(&h, MAX_TENSOR);

	/* Each field misaligned on its own. */
	h.dtype = PSCHED_F32;
	h.total = 16;
	h.offset = 4;
	h.span = 8;
	h.length = 8;
	h.part = 4;
	expect_accept(&h, MAX_TENSOR);
	h.total = 18;
	expect_reject(&h, MAX_TENSOR);
	h.total = 16;
	h.offset = 2;
	expect_reject(&h, MAX_TENSOR);
	h.offset = 4;
	h.span = 6;
	h.length = 6;
	expect_reject(&h, MAX_TENSOR);
	h.span = 8;
	h.length = 8;
	h.part = 6;
	expect_reject(&h, MAX_TENSOR);

	/* 8-byte types reject 4-byte alignment. */
	h.part = 8;
	h.offset = 0;
	h.dtype = PSCHED_F64;
	expect_accept(&h, MAX_TENSOR);
	h.offset = 4;
	h.span = 8;
	expect_reject(&h, MAX_TENSOR);
	h.dtype = PSCHED_I64;
	expect_reject(&h, MAX_TENSOR);
	h.dtype = PSCHED_I32;
	expect_accept(&h, MAX_TENSOR);
	h.offset = 1;
	h.span = 4;
	h.length = 4;
	expect_reject(&h, MAX_TENSOR);
}

/* ---- fuzz ---------------------------------------------------------- */

/* A random buffer, often nudged towards a valid header so the accepted
 * path is exercised too. */
static void fuzz_fill(uint8_t *buf)
{
	size_t i;
	uint64_t total;

	for (i = 0; i < PSD_HDR_SIZE; i += 8)
		wr64(buf + i, test_rng_next());
	if (test_rng_below(8) == 0)
		return; /* fully random */
	wr32(buf, PSD_HDR_MAGIC);
	buf[4] = (uint8_t)(test_rng_below(16) ? PSD_HDR_VERSION
					      : test_rng_next());
	buf[5] = (uint8_t)(test_rng_below(16)
				   ? 1 + test_rng_below(PSD_MSG_TYPE_MAX)
				   : test_rng_next());
	buf[6] = (uint8_t)(test_rng_below(16) ? test_rng_below(5)
					      : test_rng_next());
	buf[7] = (uint8_t)(test_rng_below(16) ? test_rng_below(2)
					      : test_rng_next());
	if (test_rng_below(2))
		wr32(buf + 12, test_rng_below(2)
				       ? 0
				       : (uint32_t) - (int)test_rng_below(50));
	total = 8 * (1 + test_rng_below(64));
	if (test_rng_below(4)) {
		uint64_t off = 4 * test_rng_below(total / 4 + 1);
		uint64_t span = 4 * test_rng_below((total - off) / 4 + 1);

		wr64(buf + 24, total);
		wr64(buf + 32, off);
		wr64(buf + 40, span);
		wr64(buf + 48, test_rng_below(2) ? span : 0);
		wr64(buf + 56, 4 * test_rng_below(8));
	} else if (test_rng_below(2)) {
		wr64(buf + 48, test_rng_below(1u << 21));
	}
	if (test_rng_below(16))
		wr32(buf + 92, 0);
}

static void test_wire_fuzz_decode(void)
{
	uint8_t buf[PSD_HDR_SIZE], re[PSD_HDR_SIZE];
	struct psd_hdr h;
	const char *why;
	unsigned accepted = 0, i;
	int ret;

	test_rng_seed(0x5053443146555a5aull);
	for (i = 0; i < FUZZ_ROUNDS; i++) {
		fuzz_fill(buf);
		why = NULL;
		ret = psd_hdr_decode(buf, MAX_TENSOR, &h, &why);
		if (ret != 0 && ret != -EPROTO)
			test_fail_at(__FILE__, __LINE__,
				     "round %u: decode returned %d", i, ret);
		CHECK(why != NULL);
		if (ret) {
			CHECK(*why != '\0');
			continue;
		}
		accepted++;
		CHECK_INT(h.type, >=, 1);
		CHECK_INT(h.type, <=, PSD_MSG_TYPE_MAX);
		CHECK_INT(h.dtype, <=, PSCHED_DTYPE_MAX);
		CHECK_INT(h.status, <=, 0);
		memset(re, 0, sizeof(re));
		psd_hdr_encode(&h, re);
		if (memcmp(re, buf, sizeof(buf)))
			test_fail_at(__FILE__, __LINE__,
				     "round %u: accepted header does not "
				     "re-encode to the same bytes",
				     i);
	}
	/* The loop must have exercised the accepted path, not only
	 * rejections. */
	CHECK_INT(accepted, >, 1000);
	CHECK_INT(accepted, <, FUZZ_ROUNDS);
}

const struct test_case test_list[] = {
	{ "wire_base_is_valid", test_wire_base_is_valid },
	{ "wire_reject_bad_magic", test_wire_reject_bad_magic },
	{ "wire_reject_bad_version", test_wire_reject_bad_version },
	{ "wire_reject_type_zero", test_wire_reject_type_zero },
	{ "wire_reject_type_above_max", test_wire_reject_type_above_max },
	{ "wire_reject_bad_dtype", test_wire_reject_bad_dtype },
	{ "wire_reject_unknown_flags", test_wire_reject_unknown_flags },
	{ "wire_reject_reserved_nonzero", test_wire_reject_reserved_nonzero },
	{ "wire_reject_status_on_request", test_wire_reject_status_on_request },
	{ "wire_reject_positive_status", test_wire_reject_positive_status },
	{ "wire_reject_control_too_large", test_wire_reject_control_too_large },
	{ "wire_reject_push_length_not_span",
	  test_wire_reject_push_length_not_span },
	{ "wire_reject_pull_with_payload", test_wire_reject_pull_with_payload },
	{ "wire_reject_init_with_value_wrong_length",
	  test_wire_reject_init_with_value_wrong_length },
	{ "wire_reject_init_without_value_with_payload",
	  test_wire_reject_init_without_value_with_payload },
	{ "wire_reject_pull_resp_status_with_payload",
	  test_wire_reject_pull_resp_status_with_payload },
	{ "wire_reject_total_zero", test_wire_reject_total_zero },
	{ "wire_reject_total_above_max", test_wire_reject_total_above_max },
	{ "wire_reject_range_beyond_total",
	  test_wire_reject_range_beyond_total },
	{ "wire_reject_range_overflow", test_wire_reject_range_overflow },
	{ "wire_reject_misaligned", test_wire_reject_misaligned },
	{ "wire_fuzz_decode", test_wire_fuzz_decode },
	{ NULL, NULL },
};
