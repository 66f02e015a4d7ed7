/* SPDX-License-Identifier: MIT */
/*
 * SHA-256, HMAC-SHA256 and the constant-time comparison of the job
 * authentication handshake (common/auth.c), from GNU Nettle; CRC-32 of
 * the optimizer-state files (common/optim_state.c), from zlib.  Thin
 * wrappers, so that callers name no library and the tests check the
 * integration against the FIPS 180 and RFC 4231 vectors
 * (tests/unit/test_auth.c) and the CRC-32 check value
 * (tests/unit/test_optim.c).
 *
 * Why Nettle: a few hashes per connection need a small, stable,
 * audited library more than a fast one, and libpsched is also loaded by
 * Python through ctypes.  libnettle8 is about 0.3 MiB (OpenSSL's
 * libcrypto: 4.5 MiB), is on every distribution (GnuTLS needs it), has
 * kept this API since 2.x, runs SHA-256 on the SHA extensions where the
 * CPU has them (Debian builds it "fat") and has memeql_sec() for the
 * comparison.
 */
#ifndef PSCHED_COMMON_DIGEST_H
#define PSCHED_COMMON_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/sha2.h>

#define PSD_SHA256_LEN SHA256_DIGEST_SIZE

struct psd_sha256 {
	struct sha256_ctx ctx;
};

void psd_sha256_init(struct psd_sha256 *s);
void psd_sha256_update(struct psd_sha256 *s, const void *data, size_t len);
void psd_sha256_final(struct psd_sha256 *s, uint8_t out[PSD_SHA256_LEN]);
void psd_sha256(const void *data, size_t len, uint8_t out[PSD_SHA256_LEN]);

/* HMAC-SHA256 of the concatenation of @nparts parts under @key. */
struct psd_iov_c {
	const void *base;
	size_t len;
};
void psd_hmac_sha256(const void *key, size_t klen,
		     const struct psd_iov_c *parts, unsigned nparts,
		     uint8_t out[PSD_SHA256_LEN]);

/* Compare in time independent of where @a and @b differ. */
bool psd_mem_equal_ct(const void *a, const void *b, size_t len);

/* CRC-32 (IEEE 802.3, as zlib and gzip) of @len bytes, continuing from
 * @crc (0 to start); psd_crc32() starts. */
uint32_t psd_crc32_more(uint32_t crc, const void *buf, size_t len);

static inline uint32_t psd_crc32(const void *buf, size_t len)
{
	return psd_crc32_more(0, buf, len);
}

#endif
