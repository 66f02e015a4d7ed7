// SPDX-License-Identifier: MIT
/*
 * Issue 13's C pieces: bfloat16 conversion (every bfloat16 value, and
 * rounding against a bit-level re-derivation), the compression codec
 * (quantisation with error feedback, packing at every alignment,
 * malformed payloads changing nothing), the compressed-push header rules,
 * optimizer state records (round trip through an updater, byte-range
 * mapping into other ranges, malformed records) and state files (CRC).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "compress.h"
#include "digest.h"
#include "optim.h"
#include "updater.h"
#include "wire.h"

static uint32_t f2u(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	return x;
}

static float u2f(uint32_t x)
{
	float f;

	memcpy(&f, &x, 4);
	return f;
}

static void test_optim_bf16_every_value(void)
{
	uint32_t h;
	float f;

	for (h = 0; h < 0x10000u; h++) {
		f = psd_bf16_to_f32((uint16_t)h);
		if (isnan(f)) {
			CHECK(isnan(psd_bf16_to_f32(psd_f32_to_bf16(f))));
			continue;
		}
		if (psd_f32_to_bf16(f) != h)
			test_fail_at(__FILE__, __LINE__,
				     "bf16 0x%04x -> %g -> "
				     "0x%04x",
				     h, f, psd_f32_to_bf16(f));
	}
}

/* Round to nearest even by comparing distances to the two neighbours. */
static uint16_t bf16_ref(float f)
{
	uint32_t x = f2u(f);
	uint16_t lo = (uint16_t)(x >> 16), hi = (uint16_t)(lo + 1);
	double dl = fabs((double)f - psd_bf16_to_f32(lo));
	double dh = fabs((double)psd_bf16_to_f32(hi) - f);

	if ((x & 0xffffu) == 0)
		return lo;
	if (dl < dh)
		return lo;
	if (dh < dl)
		return hi;
	return lo & 1 ? hi : lo;
}

static void test_optim_bf16_rounding(void)
{
	unsigned i;
	uint32_t x;
	float f;

	CHECK_EQ(psd_f32_to_bf16(1.0f), 0x3f80);
	CHECK_EQ(psd_f32_to_bf16(u2f(0x3f808000u)), 0x3f80); /* tie: even */
	CHECK_EQ(psd_f32_to_bf16(u2f(0x3f818000u)), 0x3f82); /* tie: even */
	CHECK_EQ(psd_f32_to_bf16(u2f(0x3f808001u)), 0x3f81);
	CHECK_EQ(psd_f32_to_bf16(u2f(0x7f7fffffu)), 0x7f80); /* up to inf */
	CHECK_EQ(psd_f32_to_bf16(-INFINITY), 0xff80);
	test_rng_seed(13);
	for (i = 0; i < 200000; i++) {
		x = (uint32_t)test_rng_next();
		f = u2f(x);
		if (isnan(f) || isinf(f) || (x & 0x7f800000u) == 0x7f000000u)
			continue; /* near the top binade: inf is right too */
		if (psd_f32_to_bf16(f) != bf16_ref(f))
			test_fail_at(__FILE__, __LINE__,
				     "0x%08x -> 0x%04x, "
				     "want 0x%04x",
				     x, psd_f32_to_bf16(f), bf16_ref(f));
	}
	{
		uint16_t d[3] = { 0x3f80, 0x4000, 0xc040 }; /* 1, 2, -3 */
		const uint16_t s[3] = { 0x3f80, 0x3f80, 0x4040 };

		psd_bf16_add(d, s, 3);
		CHECK_EQ(d[0], 0x4000);
		CHECK_EQ(d[1], 0x4040);
		CHECK_EQ(d[2], 0);
	}
}

static void test_optim_compress_roundtrip(void)
{
	float g[37], res[37], res2[37], back[37], want;
	uint8_t codes[37], buf[64];
	unsigned kind, i, start, n;

	for (kind = PSD_CMP_2BIT; kind <= PSD_CMP_1BIT; kind++) {
		memset(res, 0, sizeof(res));
		memset(res2, 0, sizeof(res2));
		for (i = 0; i < 37; i++)
			g[i] = sinf((float)i * 0.7f) * 0.9f;
		psd_cmp_quantize((int)kind, 0.5f, g, res, codes, 37);
		for (i = 0; i < 37; i++) {
			float r = g[i];

			if (kind == PSD_CMP_2BIT)
				want = r >= 0.5f ? 0.5f
						 : (r <= -0.5f ? -0.5f : 0);
			else
				want = r > 0.5f ? 1.0f : -1.0f;
			CHECK_NEAR(res[i], r - want, 1e-7);
			res2[i] = r - want;
		}
		/* Every start alignment inside a byte and every length. */
		for (start = 0; start < 9; start++) {
			for (n = 0; start + n <= 37; n += 5) {
				uint64_t len = psd_cmp_len((int)kind, n);

				psd_cmp_pack((int)kind, 0.5f, codes + start, n,
					     buf);
				CHECK_EQ(psd_cmp_unpack(buf, len, back, n, 0),
					 0);
				for (i = 0; i < n; i++) {
					float q =
						g[start + i] - res2[start + i];

					CHECK_NEAR(back[i], q, 1e-7);
				}
				/* The wrong length is refused. */
				CHECK_EQ(psd_cmp_unpack(buf, len + 1, back, n,
							0),
					 -EPROTO);
			}
		}
		/* Error feedback: the second push carries the residual. */
		psd_cmp_quantize((int)kind, 0.5f, g, res, codes, 37);
		for (i = 0; i < 37; i++) {
			float r = res2[i] + g[i];

			if (kind == PSD_CMP_2BIT)
				want = r >= 0.5f ? 0.5f
						 : (r <= -0.5f ? -0.5f : 0);
			else
				want = r > 0.5f ? 1.0f : -1.0f;
			CHECK_NEAR(res[i], r - want, 1e-6);
		}
	}
}

static void test_optim_compress_malformed(void)
{
	uint8_t codes[10] = { 0, 1, 2, 0, 1, 2, 2, 1, 0, 0 };
	uint8_t buf[16], bad[16];
	float dst[10], keep[10];
	uint64_t len = psd_cmp_len(PSD_CMP_2BIT, 10);
	unsigned i;

	for (i = 0; i < 10; i++)
		dst[i] = keep[i] = (float)i;
	psd_cmp_pack(PSD_CMP_2BIT, 0.25f, codes, 10, buf);
	memcpy(bad, buf, sizeof(buf));
	bad[PSD_CMP_HDR + 2] |= 0x0c; /* element 9 gets code 3 */
	CHECK_EQ(psd_cmp_unpack(bad, len, dst, 10, 1), -EPROTO);
	CHECK(!memcmp(dst, keep, sizeof(dst))); /* nothing written */
	memcpy(bad, buf, sizeof(buf));
	bad[0] = 3; /* unknown kind */
	CHECK_EQ(psd_cmp_unpack(bad, len, dst, 10, 1), -EPROTO);
	memcpy(bad, buf, sizeof(buf));
	bad[2] = 1; /* reserved byte */
	CHECK_EQ(psd_cmp_unpack(bad, len, dst, 10, 1), -EPROTO);
	memcpy(bad, buf, sizeof(buf));
	{
		float inf = INFINITY;

		memcpy(bad + 4, &inf, 4);
	}
	CHECK_EQ(psd_cmp_unpack(bad, len, dst, 10, 1), -EPROTO);
	CHECK_EQ(psd_cmp_unpack(buf, 7, dst, 10, 1), -EPROTO);
	CHECK(!memcmp(dst, keep, sizeof(dst)));
	CHECK_EQ(psd_cmp_unpack(buf, len, dst, 10, 1), 0);
	CHECK_NEAR(dst[1], 1.25, 1e-7);
	CHECK_NEAR(dst[2], 2 - 0.25, 1e-7);
	CHECK_EQ(psd_cmp_kind_of("2bit"), PSD_CMP_2BIT);
	CHECK_EQ(psd_cmp_kind_of("1bit"), PSD_CMP_1BIT);
	CHECK_EQ(psd_cmp_kind_of(NULL), PSD_CMP_NONE);
	CHECK_EQ(psd_cmp_kind_of("4bit"), -1);
}

static int hdr_roundtrip(struct psd_hdr *h)
{
	uint8_t buf[PSD_HDR_SIZE];
	struct psd_hdr out;
	const char *why;

	psd_hdr_encode(h, buf);
	return psd_hdr_decode(buf, 1u << 30, &out, &why);
}

static void test_optim_wire_compressed(void)
{
	struct psd_hdr h = {
		.type = PSD_MSG_PUSH,
		.dtype = PSCHED_F32,
		.flags = PSD_F_COMPRESSED,
		.total = 400,
		.offset = 100,
		.span = 300,
		.step = 1,
	};

	h.length = psd_cmp_len(PSD_CMP_2BIT, 75);
	CHECK_EQ(hdr_roundtrip(&h), 0);
	h.length = psd_cmp_len(PSD_CMP_1BIT, 75);
	CHECK_EQ(hdr_roundtrip(&h), 0);
	h.length = 300; /* uncompressed length with the flag */
	CHECK_EQ(hdr_roundtrip(&h), -EPROTO);
	h.length = psd_cmp_len(PSD_CMP_2BIT, 75);
	h.dtype = PSCHED_F64;
	h.total = 400;
	CHECK_EQ(hdr_roundtrip(&h), -EPROTO);
	h.dtype = PSCHED_F32;
	h.type = PSD_MSG_PULL;
	h.length = 0;
	CHECK_EQ(hdr_roundtrip(&h), -EPROTO); /* flag on a pull */
	h.type = PSD_MSG_PUSH;
	h.flags = 0x04; /* unknown flag */
	h.length = 300;
	CHECK_EQ(hdr_roundtrip(&h), -EPROTO);
	h.flags = 0;
	h.dtype = PSCHED_BF16;
	h.span = 300;
	CHECK_EQ(hdr_roundtrip(&h), 0);
	h.dtype = PSCHED_DTYPE_MAX + 1;
	CHECK_EQ(hdr_roundtrip(&h), -EPROTO);
	CHECK_STR(psched_dtype_name(PSCHED_BF16), "bfloat16");
	CHECK_STR(psched_dtype_name((enum psched_dtype)99), "?");
}

/* A holder of bytes [off, off + len) of keys 1 and 2 (float32, 64 B). */
struct range_arg {
	uint64_t off, len;
};

static bool range_of(void *arg, uint64_t key, uint8_t *dtype, uint64_t *total,
		     uint64_t *off, uint64_t *len)
{
	const struct range_arg *ra = arg;

	if (key != 1 && key != 2)
		return false;
	*dtype = PSCHED_F32;
	*total = 64;
	*off = ra->off;
	*len = ra->len;
	return true;
}

static void adam_steps(struct psd_updater *u, uint64_t off, uint64_t len,
		       float *w, int steps)
{
	float g[16];
	int s, i;

	for (s = 0; s < steps; s++) {
		for (i = 0; i < 16; i++)
			g[i] = sinf((float)(i + s * 3));
		/* Chunks of 8 then the rest of the range. */
		CHECK(psd_upd_apply(u, 1, PSCHED_F32, off, len, off, w, g, 8));
		CHECK(psd_upd_apply(u, 1, PSCHED_F32, off, len, off + 8, w + 2,
				    g + 2, len - 8));
	}
}

static void test_optim_states_by_byte_range(void)
{
	struct psched_optimizer o;
	struct psd_updater a, b, c;
	struct range_arg whole = { 0, 64 }, lo = { 0, 24 }, hi = { 24, 40 };
	float wa[16], wb[16], wc[16];
	char name[16];
	uint8_t *buf;
	size_t len;
	int i;

	CHECK_EQ(psched_optimizer_defaults(&o, "adam"), 0);
	CHECK_NEAR(o.learning_rate, 0.001, 1e-15);
	o.learning_rate = 0.05;
	psd_upd_init(&a);
	psd_upd_init(&b);
	psd_upd_init(&c);
	CHECK_EQ(psd_upd_set_optimizer(&a, &o), 0);
	CHECK_EQ(psd_upd_set_optimizer(&b, &o), 0);
	CHECK_EQ(psd_upd_set_optimizer(&c, &o), 0);
	for (i = 0; i < 16; i++)
		wa[i] = (float)i * 0.1f;
	adam_steps(&a, 0, 64, wa, 3);
	CHECK_EQ(psd_upd_states_dump(&a, range_of, &whole, &buf, &len, name),
		 0);
	CHECK_STR(name, "adam");
	CHECK_U64(len, ==, psd_opt_rec_size(16, 2, false, 4));
	/* Two holders of other ranges take their parts of the record. */
	CHECK_EQ(psd_upd_states_load(&b, "adam", buf, len, range_of, &lo, true),
		 0);
	CHECK_EQ(psd_upd_states_load(&c, "adam", buf, len, range_of, &hi, true),
		 0);
	memcpy(wb, wa, sizeof(wa));
	memcpy(wc, wa, sizeof(wa));
	adam_steps(&a, 0, 64, wa, 2);
	/* b and c each step their own range, cut differently. */
	{
		float g[16];
		int s;

		for (s = 3; s < 5; s++) {
			for (i = 0; i < 16; i++)
				g[i] = sinf((float)(i + (s - 3) * 3));
			CHECK(psd_upd_apply(&b, 1, PSCHED_F32, 0, 24, 0, wb, g,
					    24));
			CHECK(psd_upd_apply(&c, 1, PSCHED_F32, 24, 40, 24,
					    wc + 6, g + 6, 40));
		}
	}
	for (i = 0; i < 16; i++)
		CHECK_NEAR(i < 6 ? wb[i] : wc[i], wa[i], 1e-7);
	/* Another optimizer, a bad record, an unknown key: refused, and the
	 * loaded states stay. */
	CHECK_EQ(psd_upd_states_load(&b, "sgd", buf, len, range_of, &lo, true),
		 -EINVAL);
	buf[35] = 5; /* esize */
	CHECK_EQ(psd_upd_states_load(&b, "adam", buf, len, range_of, &lo, true),
		 -EPROTO);
	buf[35] = 4;
	buf[0] = 9; /* key 9: not held */
	CHECK_EQ(psd_upd_states_load(&b, "adam", buf, len, range_of, &lo, true),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "key 9"));
	CHECK_EQ(
		psd_upd_states_load(&b, "adam", buf, len, range_of, &lo, false),
		0); /* skipped by a holder of some keys */
	CHECK_EQ(psd_upd_states_load(&b, "adam", buf, len - 1, range_of, &lo,
				     true),
		 -EPROTO);
	free(buf);
	psd_upd_fini(&a);
	psd_upd_fini(&b);
	psd_upd_fini(&c);
}

/* A holder of key 1 only, bytes [0, 64). */
static bool range_key1(void *arg, uint64_t key, uint8_t *dtype, uint64_t *total,
		       uint64_t *off, uint64_t *len)
{
	(void)arg;
	if (key != 1)
		return false;
	*dtype = PSCHED_F32;
	*total = 64;
	*off = 0;
	*len = 64;
	return true;
}

/* One key's states dumped and merged (a snapshot, key by key): the other
 * key's states stay as they were. */
static void test_optim_key_states_merge(void)
{
	struct psched_optimizer o;
	struct range_arg whole = { 0, 64 };
	struct psd_updater a, d;
	float w1[16], w2[16], v1[16];
	uint8_t *one, *all, *after;
	size_t lone, lall, lafter;
	char name[16];
	int i;

	CHECK_EQ(psched_optimizer_defaults(&o, "adam"), 0);
	psd_upd_init(&a);
	psd_upd_init(&d);
	CHECK_EQ(psd_upd_set_optimizer(&a, &o), 0);
	CHECK_EQ(psd_upd_set_optimizer(&d, &o), 0);
	for (i = 0; i < 16; i++)
		w1[i] = w2[i] = (float)i;
	adam_steps(&a, 0, 64, w1, 3); /* key 1 in a: 3 steps */
	/* d: key 1 after 1 step, key 2 after 2 steps */
	memcpy(v1, w2, sizeof(v1));
	adam_steps(&d, 0, 64, v1, 1);
	{
		float g[16] = { 0 };

		for (i = 0; i < 2; i++)
			CHECK(psd_upd_apply(&d, 2, PSCHED_F32, 0, 64, 0, w2, g,
					    64));
	}
	CHECK_EQ(psd_upd_key_states_dump(&a, 1, range_of, &whole, &one, &lone,
					 name),
		 0);
	CHECK_STR(name, "adam");
	CHECK_U64(lone, ==, psd_opt_rec_size(16, 2, false, 4));
	CHECK_EQ(psd_upd_states_dump(&d, range_of, &whole, &all, &lall, name),
		 0);
	CHECK_U64(lall, ==, 2 * lone);
	CHECK_EQ(psd_upd_states_merge(&d, "adam", one, lone, range_key1, NULL),
		 0);
	CHECK_EQ(psd_upd_key_states_dump(&d, 1, range_of, &whole, &after,
					 &lafter, name),
		 0);
	/* key 1 is now a's (its update counts say 3) */
	CHECK_U64(lafter, ==, lone);
	CHECK(!memcmp(after, one, lone));
	free(after);
	/* key 2's states are still there, unchanged */
	CHECK_EQ(psd_upd_key_states_dump(&d, 2, range_of, &whole, &after,
					 &lafter, name),
		 0);
	CHECK_U64(lafter, ==, lone);
	CHECK(!memcmp(after, all[0] == 2 ? all : all + lone, lone));
	free(after);
	/* A merge under another optimizer's name is refused. */
	CHECK_EQ(psd_upd_states_merge(&d, "sgd", one, lone, range_key1, NULL),
		 -EINVAL);
	free(one);
	free(all);
	psd_upd_fini(&a);
	psd_upd_fini(&d);
}

static void test_optim_state_file(void)
{
	char path[] = "/tmp/psched-optim-XXXXXX";
	const uint8_t *recs;
	uint8_t data[100], *buf;
	char name[16];
	size_t len;
	FILE *f;
	int fd, i;

	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	for (i = 0; i < 100; i++)
		data[i] = (uint8_t)(i * 7);
	CHECK_EQ(psd_opt_file_write(path, "rmsprop", data, 100), 0);
	CHECK_EQ(psd_opt_file_read(path, &buf, &recs, &len, name), 0);
	CHECK_STR(name, "rmsprop");
	CHECK_U64(len, ==, 100);
	CHECK(!memcmp(recs, data, 100));
	free(buf);
	/* One flipped bit anywhere: the checksum refuses the file. */
	f = fopen(path, "r+b");
	CHECK(f != NULL);
	fseek(f, 40, SEEK_SET);
	fputc(data[12] ^ 0x10, f);
	fclose(f);
	CHECK_EQ(psd_opt_file_read(path, &buf, &recs, &len, name), -EPROTO);
	CHECK(strstr(psched_errmsg(), "checksum"));
	CHECK(psd_crc32("123456789", 9) == 0xcbf43926u); /* the check value */
	unlink(path);
	CHECK_EQ(psd_opt_file_read(path, &buf, &recs, &len, name), -ENOENT);
}

const struct test_case test_list[] = {
	{ "bf16_every_value", test_optim_bf16_every_value },
	{ "bf16_rounding", test_optim_bf16_rounding },
	{ "compress_roundtrip", test_optim_compress_roundtrip },
	{ "compress_malformed", test_optim_compress_malformed },
	{ "wire_compressed", test_optim_wire_compressed },
	{ "states_by_byte_range", test_optim_states_by_byte_range },
	{ "state_file", test_optim_state_file },
	{ "key_states_merge", test_optim_key_states_merge },
	{ NULL, NULL },
};
