// SPDX-License-Identifier: MIT
/* SHA-256 per FIPS 180-4 section 6.2, HMAC per RFC 2104. */
#include <string.h>

#include "sha256.h"

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t sha_ror(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha_block(struct psd_sha256 *s, const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
	unsigned i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (; i < 64; i++) {
		uint32_t s0 = sha_ror(w[i - 15], 7) ^ sha_ror(w[i - 15], 18) ^
			      (w[i - 15] >> 3);
		uint32_t s1 = sha_ror(w[i - 2], 17) ^ sha_ror(w[i - 2], 19) ^
			      (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = s->h[0];
	b = s->h[1];
	c = s->h[2];
	d = s->h[3];
	e = s->h[4];
	f = s->h[5];
	g = s->h[6];
	h = s->h[7];
	for (i = 0; i < 64; i++) {
		t1 = h + (sha_ror(e, 6) ^ sha_ror(e, 11) ^ sha_ror(e, 25)) +
		     ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
		t2 = (sha_ror(a, 2) ^ sha_ror(a, 13) ^ sha_ror(a, 22)) +
		     ((a & b) ^ (a & c) ^ (b & c));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	s->h[0] += a;
	s->h[1] += b;
	s->h[2] += c;
	s->h[3] += d;
	s->h[4] += e;
	s->h[5] += f;
	s->h[6] += g;
	s->h[7] += h;
}

void psd_sha256_init(struct psd_sha256 *s)
{
	static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
					0xa54ff53a, 0x510e527f, 0x9b05688c,
					0x1f83d9ab, 0x5be0cd19 };

	memcpy(s->h, iv, sizeof(iv));
	s->bytes = 0;
	s->nbuf = 0;
}

void psd_sha256_update(struct psd_sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t n;

	s->bytes += len;
	while (len) {
		if (!s->nbuf && len >= PSD_SHA256_BLOCK) {
			sha_block(s, p);
			p += PSD_SHA256_BLOCK;
			len -= PSD_SHA256_BLOCK;
			continue;
		}
		n = PSD_SHA256_BLOCK - s->nbuf;
		if (n > len)
			n = len;
		memcpy(s->buf + s->nbuf, p, n);
		s->nbuf += n;
		p += n;
		len -= n;
		if (s->nbuf == PSD_SHA256_BLOCK) {
			sha_block(s, s->buf);
			s->nbuf = 0;
		}
	}
}

void psd_sha256_final(struct psd_sha256 *s, uint8_t out[PSD_SHA256_LEN])
{
	uint64_t bits = s->bytes * 8;
	unsigned i;

	s->buf[s->nbuf++] = 0x80;
	if (s->nbuf > PSD_SHA256_BLOCK - 8) {
		memset(s->buf + s->nbuf, 0, PSD_SHA256_BLOCK - s->nbuf);
		sha_block(s, s->buf);
		s->nbuf = 0;
	}
	memset(s->buf + s->nbuf, 0, PSD_SHA256_BLOCK - 8 - s->nbuf);
	for (i = 0; i < 8; i++)
		s->buf[PSD_SHA256_BLOCK - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha_block(s, s->buf);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
	memset(s, 0, sizeof(*s));
}

void psd_sha256(const void *data, size_t len, uint8_t out[PSD_SHA256_LEN])
{
	struct psd_sha256 s;

	psd_sha256_init(&s);
	psd_sha256_update(&s, data, len);
	psd_sha256_final(&s, out);
}

void psd_hmac_sha256(const void *key, size_t klen,
		     const struct psd_iov_c *parts, unsigned nparts,
		     uint8_t out[PSD_SHA256_LEN])
{
	uint8_t k[PSD_SHA256_BLOCK] = { 0 }, pad[PSD_SHA256_BLOCK];
	uint8_t inner[PSD_SHA256_LEN];
	struct psd_sha256 s;
	unsigned i;

	/* A key longer than a block is hashed first (RFC 2104 section 2). */
	if (klen > PSD_SHA256_BLOCK)
		psd_sha256(key, klen, k);
	else if (klen)
		memcpy(k, key, klen);
	for (i = 0; i < PSD_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	psd_sha256_init(&s);
	psd_sha256_update(&s, pad, sizeof(pad));
	for (i = 0; i < nparts; i++)
		psd_sha256_update(&s, parts[i].base, parts[i].len);
	psd_sha256_final(&s, inner);
	for (i = 0; i < PSD_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	psd_sha256_init(&s);
	psd_sha256_update(&s, pad, sizeof(pad));
	psd_sha256_update(&s, inner, sizeof(inner));
	psd_sha256_final(&s, out);
	memset(k, 0, sizeof(k));
	memset(pad, 0, sizeof(pad));
	memset(inner, 0, sizeof(inner));
}

bool psd_mem_equal_ct(const void *a, const void *b, size_t len)
{
	const volatile uint8_t *x = a, *y = b;
	uint8_t d = 0;
	size_t i;

	for (i = 0; i < len; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}
