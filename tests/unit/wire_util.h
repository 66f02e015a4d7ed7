/* SPDX-License-Identifier: MIT */
/* Helpers of the wire header tests (test_wire.c, test_wire_reject.c). */
#ifndef PSCHED_TESTS_UNIT_WIRE_UTIL_H
#define PSCHED_TESTS_UNIT_WIRE_UTIL_H

#include <errno.h>
#include <string.h>

#include "../harness.h"
#include "../../common/wire.h"
#include "psched.h"

#define GIB	    (1ull << 30)
#define MAX_TENSOR  (4ull * GIB)
#define FUZZ_ROUNDS 100000

/* Little-endian readers written independently of wire.c. */
static inline uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t)v);
	wr32(p + 4, (uint32_t)(v >> 32));
}

static inline void check_hdr_equal(const struct psd_hdr *a,
				   const struct psd_hdr *b)
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
static inline void round_trip(const struct psd_hdr *h, uint64_t max_tensor)
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
static inline struct psd_hdr base_push(void)
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

static inline void expect_accept_at(const char *file, int line,
				    const struct psd_hdr *h,
				    uint64_t max_tensor)
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

static inline void expect_reject_buf_at(const char *file, int line,
					const uint8_t *buf, uint64_t max_tensor)
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

static inline void expect_reject_at(const char *file, int line,
				    const struct psd_hdr *h,
				    uint64_t max_tensor)
{
	uint8_t buf[PSD_HDR_SIZE];

	psd_hdr_encode(h, buf);
	expect_reject_buf_at(file, line, buf, max_tensor);
}

#define expect_accept(h, max) expect_accept_at(__FILE__, __LINE__, (h), (max))
#define expect_reject(h, max) expect_reject_at(__FILE__, __LINE__, (h), (max))
#define expect_reject_buf(b, max)                                              \
	expect_reject_buf_at(__FILE__, __LINE__, (b), (max))

#endif
