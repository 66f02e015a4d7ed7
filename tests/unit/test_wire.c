// SPDX-License-Identifier: MIT
/*
 * Data-plane header (common/wire.h): encode/decode round trip of every
 * field for every message type and the exact byte layout
 * (test_wire_reject.c: the framing rules and a fuzz loop).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire_util.h"

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
	{ NULL, NULL },
};
