// SPDX-License-Identifier: MIT
/*
 * Data-plane header (common/wire.h): encode/decode round trip of every
 * field for every message type, the exact byte layout, one rejection case
 * per framing rule, and a fixed-seed fuzz loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../../common/wire.h"
#include "psched.h"

#define GIB	    (1ull << 30)
#define MAX_TENSOR  (4ull * GIB)
#define FUZZ_ROUNDS 100000

/* Little-endian readers written independently of wire.c. */
static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t)v);
	wr32(p + 4, (uint32_t)(v >> 32));
}

static void check_hdr_equal(const struct psd_hdr *a, const struct psd_hdr *b)
{
	CHECK_EQ(a->type, b->type);
	CHECK_EQ(a->dtype, b->dtype);
	CHECK_EQ(a->flags, b->flags);
	CHECK_EQ(a->sender, b->sender);
	CHECK_EQ(a->status, b->status);
	CHECK_U64(a->key, ==, b->key);
	CHECK_U64(a->total, ==, b->total);
	CHECK_U64(a->offset, ==, b->offset);
	CHECK_U64(a->span, ==, b->span);
	CHECK_U64(a->length, ==, b->length);
	CHECK_U64(a->part, ==, b->part);
	CHECK_U64(a->step, ==, b->step);
	CHECK_U64(a->req, ==, b->req);
	CHECK_U64(a->slot, ==, b->slot);
	CHECK_U64(a->epoch, ==, b->epoch);
	CHECK_EQ(a->priority, b->priority);
}

/* Encode @h, decode it back and compare every field. */
static void round_trip(const struct psd_hdr *h, uint64_t max_tensor)
{
	uint8_t buf[PSD_HDR_SIZE];
	struct psd_hdr out;
	const char *why = NULL;
	int ret;

	memset(buf, 0xa5, sizeof(buf));
	psd_hdr_encode(h, buf);
	/* Poison the output so a field decode forgets to set shows up. */
	memset(&out, 0x5a, sizeof(out));
	ret = psd_hdr_decode(buf, max_tensor, &out, &why);
	if (ret)
		test_fail_at(__FILE__, __LINE__, "type %u rejected (%d): %s",
			     h->type, ret, why ? why : "(null)");
	check_hdr_equal(&out, h);
}

/* A valid f32 push of a 1 KiB tensor: the base every rejection mutates. */
static struct psd_hdr base_push(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PUSH;
	h.dtype = PSCHED_F32;
	h.sender = 9;
	h.key = 42;
	h.total = 1024;
	h.offset = 256;
	h.span = 512;
	h.length = 512;
	h.part = 128;
	h.step = 3;
	h.req = 77;
	h.slot = 1;
	h.epoch = 2;
	h.priority = -5;
	return h;
}

static void expect_accept_at(const char *file, int line,
			     const struct psd_hdr *h, uint64_t max_tensor)
{
	uint8_t buf[PSD_HDR_SIZE];
	struct psd_hdr out;
	const char *why = NULL;
	int ret;

	psd_hdr_encode(h, buf);
	ret = psd_hdr_decode(buf, max_tensor, &out, &why);
	if (ret)
		test_fail_at(file, line, "valid header rejected (%d): %s", ret,
			     why ? why : "(null)");
}

static void expect_reject_buf_at(const char *file, int line, const uint8_t *buf,
				 uint64_t max_tensor)
{
	struct psd_hdr out;
	const char *why = NULL;
	int ret;

	ret = psd_hdr_decode(buf, max_tensor, &out, &why);
	if (ret != -EPROTO)
		test_fail_at(file, line,
			     "malformed header: decode returned %d, want %d "
			     "(-EPROTO)",
			     ret, -EPROTO);
	if (!why || !*why)
		test_fail_at(file, line, "rejection without a reason");
}

static void expect_reject_at(const char *file, int line,
			     const struct psd_hdr *h, uint64_t max_tensor)
{
	uint8_t buf[PSD_HDR_SIZE];

	psd_hdr_encode(h, buf);
	expect_reject_buf_at(file, line, buf, max_tensor);
}

#define expect_accept(h, max) expect_accept_at(__FILE__, __LINE__, (h), (max))
#define expect_reject(h, max) expect_reject_at(__FILE__, __LINE__, (h), (max))
#define expect_reject_buf(b, max)                                              \
	expect_reject_buf_at(__FILE__, __LINE__, (b), (max))

/* ---- round trip ---------------------------------------------------- */

static void test_wire_round_trip_control(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_CONTROL;
	h.sender = INT32_MIN;
	h.status = INT32_MIN; /* control is not a request: may carry it */
	h.key = UINT64_MAX;
	h.total = UINT64_MAX; /* range is not checked for control */
	h.offset = UINT64_MAX;
	h.span = UINT64_MAX;
	h.length = PSD_MAX_CONTROL;
	h.part = UINT64_MAX;
	h.step = UINT64_MAX;
	h.req = UINT64_MAX;
	h.slot = UINT32_MAX;
	h.epoch = UINT32_MAX;
	h.priority = INT32_MIN;
	round_trip(&h, MAX_TENSOR);

	h.status = -1;
	h.sender = INT32_MAX;
	h.priority = INT32_MAX;
	h.length = 0;
	h.key = 0;
	round_trip(&h, MAX_TENSOR);
}

static void test_wire_round_trip_push(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PUSH;
	h.dtype = PSCHED_F64;
	h.sender = 12345;
	h.key = UINT64_MAX;
	h.total = UINT64_MAX - 7; /* largest multiple of 8 */
	h.offset = UINT64_MAX - 7 - 8 * 1000;
	h.span = 8 * 1000;
	h.length = 8 * 1000;
	h.part = 8ull << 40;
	h.step = UINT64_MAX;
	h.req = UINT64_MAX - 1;
	h.slot = UINT32_MAX;
	h.epoch = UINT32_MAX - 1;
	h.priority = INT32_MIN;
	round_trip(&h, UINT64_MAX);

	h.dtype = PSCHED_RAW;
	h.total = 1;
	h.offset = 0;
	h.span = 1;
	h.length = 1;
	h.part = 0;
	h.priority = -1;
	h.sender = -1;
	round_trip(&h, 1);
}

static void test_wire_round_trip_pull(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PULL;
	h.dtype = PSCHED_I32;
	h.sender = 7;
	h.key = UINT64_MAX;
	h.total = MAX_TENSOR;
	h.offset = MAX_TENSOR - 4096;
	h.span = 4096;
	h.length = 0;
	h.part = 1024;
	h.step = 1ull << 63;
	h.req = 0x0123456789abcdefull;
	h.slot = 0x80000000u;
	h.epoch = 1;
	h.priority = -1000000;
	round_trip(&h, MAX_TENSOR);
}

static void test_wire_round_trip_pushpull(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PUSHPULL;
	h.dtype = PSCHED_I64;
	h.sender = INT32_MAX;
	h.key = UINT64_MAX;
	h.total = 1ull << 32;
	h.offset = 0;
	h.span = 1ull << 32;
	h.length = 1ull << 32;
	h.part = 1ull << 20;
	h.step = 99;
	h.req = UINT64_MAX;
	h.slot = 5;
	h.epoch = UINT32_MAX;
	h.priority = INT32_MAX;
	round_trip(&h, MAX_TENSOR);
}

static void test_wire_round_trip_push_ack(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PUSH_ACK;
	h.dtype = PSCHED_F32;
	h.sender = 3;
	h.status = PSCHED_ESIZE; /* a psched code below every errno */
	h.key = UINT64_MAX;
	h.total = 4;
	h.offset = 0;
	h.span = 4;
	h.length = 0;
	h.step = 1;
	h.req = 1;
	h.slot = 0;
	h.epoch = 0;
	h.priority = -2;
	round_trip(&h, MAX_TENSOR);

	h.status = INT32_MIN;
	round_trip(&h, MAX_TENSOR);
	h.status = 0;
	round_trip(&h, MAX_TENSOR);
}

static void test_wire_round_trip_pull_resp(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PULL_RESP;
	h.dtype = PSCHED_F32;
	h.sender = 1;
	h.key = UINT64_MAX;
	h.total = 4096;
	h.offset = 1024;
	h.span = 2048;
	h.length = 2048; /* success: the span's bytes follow */
	h.part = 512;
	h.step = 17;
	h.req = 1000;
	h.slot = 2;
	h.epoch = 3;
	h.priority = -7;
	round_trip(&h, MAX_TENSOR);

	h.status = -ENOMEM; /* error: no payload */
	h.length = 0;
	round_trip(&h, MAX_TENSOR);
	h.status = INT32_MIN;
	round_trip(&h, MAX_TENSOR);
}

static void test_wire_round_trip_init(void)
{
	struct psd_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_INIT;
	h.dtype = PSCHED_F64;
	h.flags = PSD_F_HAS_VALUE;
	h.sender = 4;
	h.key = UINT64_MAX;
	h.total = 8 * 3;
	h.offset = 8;
	h.span = 16;
	h.length = 16;
	h.part = 0;
	h.step = 0;
	h.req = 5;
	h.slot = 1;
	h.epoch = 0;
	h.priority = INT32_MIN;
	round_trip(&h, MAX_TENSOR);

	h.flags = 0; /* declaration only: no payload */
	h.length = 0;
	round_trip(&h, MAX_TENSOR);
}

/* ---- exact layout -------------------------------------------------- */

static void test_wire_byte_layout(void)
{
	struct psd_hdr h;
	uint8_t buf[PSD_HDR_SIZE];

	memset(&h, 0, sizeof(h));
	h.type = PSD_MSG_PULL_RESP;
	h.dtype = PSCHED_I64;
	h.flags = 0;
	h.sender = 0x11223344;
	h.status = -2;
	h.key = 0x0102030405060708ull;
	h.total = 0x1000;
	h.offset = 0x0800;
	h.span = 0x0400;
	h.length = 0;
	h.part = 0x0200;
	h.step = 0xa1a2a3a4a5a6a7a8ull;
	h.req = 0xb1b2b3b4b5b6b7b8ull;
	h.slot = 0xc1c2c3c4u;
	h.epoch = 0xd1d2d3d4u;
	h.priority = -3;
	memset(buf, 0xee, sizeof(buf));
	psd_hdr_encode(&h, buf);

	CHECK_EQ(PSD_HDR_SIZE, 96);
	CHECK_EQ(buf[0], 'P');
	CHECK_EQ(buf[1], 'S');
	CHECK_EQ(buf[2], 'D');
	CHECK_EQ(buf[3], '1');
	CHECK_U64(le32(buf + 0), ==, PSD_HDR_MAGIC);
	CHECK_EQ(buf[4], 1);
	CHECK_EQ(buf[5], 6);
	CHECK_EQ(buf[6], 4);
	CHECK_EQ(buf[7], 0);
	/* sender 0x11223344, little-endian */
	CHECK_EQ(buf[8], 0x44);
	CHECK_EQ(buf[9], 0x33);
	CHECK_EQ(buf[10], 0x22);
	CHECK_EQ(buf[11], 0x11);
	/* status -2 = 0xfffffffe */
	CHECK_EQ(buf[12], 0xfe);
	CHECK_EQ(buf[13], 0xff);
	CHECK_EQ(buf[14], 0xff);
	CHECK_EQ(buf[15], 0xff);
	/* key: lowest byte first */
	CHECK_EQ(buf[16], 0x08);
	CHECK_EQ(buf[17], 0x07);
	CHECK_EQ(buf[22], 0x02);
	CHECK_EQ(buf[23], 0x01);
	CHECK_U64(le64(buf + 24), ==, 0x1000);
	CHECK_EQ(buf[24], 0x00);
	CHECK_EQ(buf[25], 0x10);
	CHECK_U64(le64(buf + 32), ==, 0x0800);
	CHECK_U64(le64(buf + 40), ==, 0x0400);
	CHECK_U64(le64(buf + 48), ==, 0);
	CHECK_U64(le64(buf + 56), ==, 0x0200);
	CHECK_U64(le64(buf + 64), ==, 0xa1a2a3a4a5a6a7a8ull);
	CHECK_EQ(buf[64], 0xa8);
	CHECK_U64(le64(buf + 72), ==, 0xb1b2b3b4b5b6b7b8ull);
	CHECK_U64(le32(buf + 80), ==, 0xc1c2c3c4u);
	CHECK_EQ(buf[80], 0xc4);
	CHECK_U64(le32(buf + 84), ==, 0xd1d2d3d4u);
	CHECK_U64(le32(buf + 88), ==, 0xfffffffdu);
	CHECK_EQ(buf[92], 0);
	CHECK_EQ(buf[93], 0);
	CHECK_EQ(buf[94], 0);
	CHECK_EQ(buf[95], 0);
}

/* A header written by hand byte by byte decodes to the right fields. */
static void test_wire_decode_hand_built(void)
{
	uint8_t buf[PSD_HDR_SIZE];
	struct psd_hdr h;
	const char *why = NULL;

	memset(buf, 0, sizeof(buf));
	memcpy(buf, "PSD1", 4);
	buf[4] = 1;
	buf[5] = PSD_MSG_INIT;
	buf[6] = PSCHED_F32;
	buf[7] = PSD_F_HAS_VALUE;
	wr32(buf + 8, 0xfffffffbu); /* sender -5 */
	wr64(buf + 16, 0xfedcba9876543210ull);
	wr64(buf + 24, 64);
	wr64(buf + 32, 16);
	wr64(buf + 40, 32);
	wr64(buf + 48, 32);
	wr64(buf + 56, 8);
	wr64(buf + 64, 11);
	wr64(buf + 72, 12);
	wr32(buf + 80, 13);
	wr32(buf + 84, 14);
	wr32(buf + 88, 0x80000000u);
	CHECK_EQ(psd_hdr_decode(buf, MAX_TENSOR, &h, &why), 0);
	CHECK_EQ(h.type, PSD_MSG_INIT);
	CHECK_EQ(h.dtype, PSCHED_F32);
	CHECK_EQ(h.flags, PSD_F_HAS_VALUE);
	CHECK_EQ(h.sender, -5);
	CHECK_EQ(h.status, 0);
	CHECK_U64(h.key, ==, 0xfedcba9876543210ull);
	CHECK_U64(h.total, ==, 64);
	CHECK_U64(h.offset, ==, 16);
	CHECK_U64(h.span, ==, 32);
	CHECK_U64(h.length, ==, 32);
	CHECK_U64(h.part, ==, 8);
	CHECK_U64(h.step, ==, 11);
	CHECK_U64(h.req, ==, 12);
	CHECK_U64(h.slot, ==, 13);
	CHECK_U64(h.epoch, ==, 14);
	CHECK_EQ(h.priority, INT32_MIN);
}

static void test_wire_type_names(void)
{
	CHECK_STR(psd_msg_type_name(PSD_MSG_CONTROL), "control");
	CHECK_STR(psd_msg_type_name(PSD_MSG_PUSH), "push");
	CHECK_STR(psd_msg_type_name(PSD_MSG_PULL), "pull");
	CHECK_STR(psd_msg_type_name(PSD_MSG_PUSHPULL), "pushpull");
	CHECK_STR(psd_msg_type_name(PSD_MSG_PUSH_ACK), "push-ack");
	CHECK_STR(psd_msg_type_name(PSD_MSG_PULL_RESP), "pull-resp");
	CHECK_STR(psd_msg_type_name(PSD_MSG_INIT), "init");
	CHECK_STR(psd_msg_type_name(0), "?");
	CHECK_STR(psd_msg_type_name(PSD_MSG_TYPE_MAX + 1), "?");
	CHECK_STR(psd_msg_type_name(~0u), "?");
	CHECK(psd_msg_is_request(PSD_MSG_PUSH));
	CHECK(psd_msg_is_request(PSD_MSG_PULL));
	CHECK(psd_msg_is_request(PSD_MSG_PUSHPULL));
	CHECK(psd_msg_is_request(PSD_MSG_INIT));
	CHECK(!psd_msg_is_request(PSD_MSG_CONTROL));
	CHECK(!psd_msg_is_request(PSD_MSG_PUSH_ACK));
	CHECK(!psd_msg_is_request(PSD_MSG_PULL_RESP));
}

/* ---- rejection: one case per rule ---------------------------------- */

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

	h.dtype = PSCHED_F16; /* the largest valid one is fine */
	h.part = 0;
	expect_accept(&h, MAX_TENSOR);
	h.dtype = PSCHED_F16 + 1;
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

	h.total = 1ull << 40; /* 1 TiB with a 4 GiB limit */
	expect_reject(&h, MAX_TENSOR);
	h.total = MAX_TENSOR + 4;
	expect_reject(&h, MAX_TENSOR);
	h.total = MAX_TENSOR; /* at the limit is fine */
	expect_accept(&h, MAX_TENSOR);
	h.total = UINT64_MAX - 3;
	expect_reject(&h, MAX_TENSOR);
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
		CHECK_INT(h.dtype, <=, PSCHED_F16);
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
	{ "wire_round_trip_control", test_wire_round_trip_control },
	{ "wire_round_trip_push", test_wire_round_trip_push },
	{ "wire_round_trip_pull", test_wire_round_trip_pull },
	{ "wire_round_trip_pushpull", test_wire_round_trip_pushpull },
	{ "wire_round_trip_push_ack", test_wire_round_trip_push_ack },
	{ "wire_round_trip_pull_resp", test_wire_round_trip_pull_resp },
	{ "wire_round_trip_init", test_wire_round_trip_init },
	{ "wire_byte_layout", test_wire_byte_layout },
	{ "wire_decode_hand_built", test_wire_decode_hand_built },
	{ "wire_type_names", test_wire_type_names },
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
