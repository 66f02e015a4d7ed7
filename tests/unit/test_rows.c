// SPDX-License-Identifier: MIT
/*
 * Row-sparse rules shared by worker and server (common/rows.h) and the
 * PSD_F_ROWS framing (common/wire.c): row placement covers every row once
 * and the owner agrees with it; malformed headers and payloads (bad
 * lengths, row ids out of range, unsorted or repeated ids, zero pieces)
 * are refused with a reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../../common/rows.h"
#include "psched.h"

static void test_rows_place_covers(void)
{
	static const uint64_t tabs[] = { 1, 2, 3, 7, 1000, 10000001 };
	unsigned ns, s, t;
	uint64_t lo, n, next, id;

	for (t = 0; t < sizeof(tabs) / sizeof(tabs[0]); t++)
		for (ns = 1; ns <= 9; ns++) {
			next = 0;
			for (s = 0; s < ns; s++) {
				psd_rows_place(tabs[t], ns, s, &lo, &n);
				CHECK_U64(lo, ==, next);
				/* balanced: sizes differ by at most one */
				CHECK_U64(n, <=, tabs[t] / ns + 1);
				CHECK_U64(n, >=, tabs[t] / ns);
				next = lo + n;
				for (id = lo; id < lo + n && id < lo + 3; id++)
					CHECK_EQ(
						psd_rows_owner(tabs[t], ns, id),
						s);
				if (n)
					CHECK_EQ(psd_rows_owner(tabs[t], ns,
								lo + n - 1),
						 s);
			}
			CHECK_U64(next, ==, tabs[t]);
		}
}

/* A push header of @nrows rows of @rb bytes for a server holding rows
 * [lo, lo + n) of a table of @rows rows. */
static struct psd_hdr rows_hdr(uint8_t type, uint64_t rows, uint64_t rb,
			       uint64_t lo, uint64_t n, uint32_t nrows)
{
	struct psd_hdr h = { 0 };

	h.type = type;
	h.dtype = PSCHED_F32;
	h.flags = PSD_F_ROWS;
	h.key = 5;
	h.total = rows * rb;
	h.offset = lo * rb;
	h.span = n * rb;
	h.part = rb;
	h.step = 1;
	h.length = PSD_ROWS_PREFIX +
		   (uint64_t)nrows * (psd_msg_is_push(type) ? 8 + rb : 8);
	return h;
}

static int decode(const struct psd_hdr *h, const char **why)
{
	uint8_t buf[PSD_HDR_SIZE];
	struct psd_hdr out;

	psd_hdr_encode(h, buf);
	return psd_hdr_decode(buf, 1ull << 32, &out, why);
}

static void test_rows_wire_framing(void)
{
	struct psd_hdr h = rows_hdr(PSD_MSG_PUSH, 100, 16, 50, 50, 3);
	const char *why;

	CHECK_EQ(decode(&h, &why), 0);
	h.length += 1; /* not a whole number of rows */
	CHECK_EQ(decode(&h, &why), -EPROTO);
	h.length = 4; /* shorter than the prefix */
	CHECK_EQ(decode(&h, &why), -EPROTO);
	h = rows_hdr(PSD_MSG_PUSH, 100, 16, 50, 50, 3);
	h.part = 0; /* no row size */
	CHECK_EQ(decode(&h, &why), -EPROTO);
	h.part = 24; /* total not a whole number of rows */
	CHECK_EQ(decode(&h, &why), -EPROTO);
	CHECK(strstr(why, "row") != NULL);
	h = rows_hdr(PSD_MSG_PUSH, 100, 16, 50, 50, 3);
	h.flags |= PSD_F_COMPRESSED;
	CHECK_EQ(decode(&h, &why), -EPROTO);
	/* a pushpull carries a push's ids and rows */
	h = rows_hdr(PSD_MSG_PUSHPULL, 100, 16, 50, 50, 3);
	CHECK_EQ(decode(&h, &why), 0);
	h.length += 8; /* ids without their rows */
	CHECK_EQ(decode(&h, &why), -EPROTO);
	h = rows_hdr(PSD_MSG_PUSH_ACK, 100, 16, 50, 50, 0);
	h.length = 0;
	CHECK_EQ(decode(&h, &why), -EPROTO);
	CHECK(strstr(why, "ack") != NULL);
	h = rows_hdr(PSD_MSG_PULL, 100, 16, 0, 50, 7);
	CHECK_EQ(decode(&h, &why), 0);
	h.length += 4;
	CHECK_EQ(decode(&h, &why), -EPROTO);
	h = rows_hdr(PSD_MSG_INIT, 100, 16, 0, 50, 0);
	h.length = 0;
	CHECK_EQ(decode(&h, &why), 0);
	h.length = 16;
	CHECK_EQ(decode(&h, &why), -EPROTO);
	h = rows_hdr(PSD_MSG_PULL_RESP, 100, 16, 0, 50, 0);
	h.length = 5 * 16;
	CHECK_EQ(decode(&h, &why), 0);
	h.length = 5 * 16 + 8;
	CHECK_EQ(decode(&h, &why), -EPROTO);
}

/* A push payload of @n ids (rows zero) into @buf. */
static void rows_payload(uint8_t *buf, const uint64_t *ids, uint32_t n,
			 uint32_t pieces, uint64_t rb)
{
	struct psd_rows_prefix p = { .nrows = n, .pieces = pieces };

	psd_rows_prefix_put(buf, &p);
	memcpy(buf + PSD_ROWS_PREFIX, ids, n * 8);
	memset(buf + PSD_ROWS_PREFIX + n * 8, 0, n * rb);
}

static void test_rows_check_payload(void)
{
	uint8_t buf[512];
	char why[256];
	uint64_t ok[3] = { 50, 51, 99 }, out[3] = { 50, 100, 120 },
		 low[3] = { 49, 50, 51 }, unsorted[3] = { 50, 70, 60 },
		 dup[3] = { 50, 60, 60 };
	struct psd_hdr h = rows_hdr(PSD_MSG_PUSH, 100, 16, 50, 50, 3);

	rows_payload(buf, ok, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), 0);
	rows_payload(buf, out, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "row id 100") && strstr(why, "outside"));
	rows_payload(buf, low, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "row id 49") != NULL);
	rows_payload(buf, unsorted, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "increasing") != NULL);
	rows_payload(buf, dup, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	rows_payload(buf, ok, 3, 0, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "zero pieces") != NULL);
	/* the count in the prefix disagrees with the length */
	rows_payload(buf, ok, 2, 1, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "row count") != NULL);
	/* an empty push is fine */
	h = rows_hdr(PSD_MSG_PUSH, 100, 16, 50, 50, 0);
	rows_payload(buf, ok, 0, 1, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), 0);
	/* pushpulls: a push's layout, pieces announced */
	h = rows_hdr(PSD_MSG_PUSHPULL, 100, 16, 50, 50, 3);
	rows_payload(buf, ok, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), 0);
	rows_payload(buf, ok, 3, 0, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	CHECK(strstr(why, "zero pieces") != NULL);
	rows_payload(buf, unsorted, 3, 2, 16);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
	/* pulls: ids only */
	h = rows_hdr(PSD_MSG_PULL, 100, 16, 50, 50, 3);
	rows_payload(buf, ok, 3, 0, 0);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), 0);
	rows_payload(buf, out, 3, 0, 0);
	CHECK_EQ(psd_rows_check(&h, buf, 50, 50, why, sizeof(why)), -EPROTO);
}

static void test_rows_add_dtypes(void)
{
	float f[3] = { 1, 2, 3 }, g[3] = { 0.5f, -2, 4 };
	double d[2] = { 1e300, 1 }, e[2] = { 1e300, -3 };
	uint16_t b[2] = { 0x3f80, 0x4000 },
		 c[2] = { 0x3f80, 0x3f80 }; /* bf16 */

	psd_rows_add(PSCHED_F32, f, g, sizeof(f));
	CHECK(f[0] == 1.5f && f[1] == 0 && f[2] == 7);
	psd_rows_add(PSCHED_F64, d, e, sizeof(d));
	CHECK(d[0] == 2e300 && d[1] == -2);
	psd_rows_add(PSCHED_BF16, b, c, sizeof(b));
	CHECK_EQ(b[0], 0x4000); /* 1 + 1 = 2 */
	CHECK_EQ(b[1], 0x4040); /* 2 + 1 = 3 */
}

/* Rows of lengths around the 32-byte vector step, at unaligned
 * addresses: every element summed once (vector part and tail), nothing
 * past the row touched; int32 wraps around. */
static void test_rows_add_lengths(void)
{
	float fd[80], fs[80];
	uint32_t id[20], is[20];
	double dd[20], ds[20];
	unsigned n, i, off;

	for (off = 0; off < 2; off++)
		for (n = 0; n <= 70; n++) {
			for (i = 0; i < 80; i++) {
				fd[i] = (float)i;
				fs[i] = (float)(1000 + 3 * i);
			}
			psd_rows_add(PSCHED_F32, fd + off, fs + off,
				     n * sizeof(float));
			for (i = 0; i < 80; i++)
				CHECK(fd[i] == (i >= off && i < off + n
							? (float)(1000 + 4 * i)
							: (float)i));
		}
	for (n = 0; n <= 19; n++) {
		for (i = 0; i < 20; i++) {
			dd[i] = i;
			ds[i] = 0.5 * i;
			id[i] = 0xfffffff0u + i;
			is[i] = 0x20;
		}
		psd_rows_add(PSCHED_F64, dd, ds, n * sizeof(double));
		psd_rows_add(PSCHED_I32, id, is, n * sizeof(uint32_t));
		for (i = 0; i < 20; i++) {
			CHECK(dd[i] == (i < n ? 1.5 * i : i));
			CHECK_EQ(id[i], i < n ? 0x10u + i : 0xfffffff0u + i);
		}
	}
}

const struct test_case test_list[] = {
	{ "rows_place_covers", test_rows_place_covers },
	{ "rows_wire_framing", test_rows_wire_framing },
	{ "rows_check_payload", test_rows_check_payload },
	{ "rows_add_lengths", test_rows_add_lengths },
	{ "rows_add_dtypes", test_rows_add_dtypes },
	{ NULL, NULL },
};
