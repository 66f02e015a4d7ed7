/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the job
 * authentication handshake (common/auth.c).  Written here rather than
 * linked from OpenSSL or libsodium: a few hashes per connection need no
 * speed, and libpsched (also loaded by Python through ctypes) keeps its
 * two dependencies.  Checked against the FIPS 180 and RFC 4231 vectors
 * (tests/unit/test_auth.c).
 */
#ifndef PSCHED_COMMON_SHA256_H
#define PSCHED_COMMON_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PSD_SHA256_LEN	 32u
#define PSD_SHA256_BLOCK 64u

struct psd_sha256 {
	uint32_t h[8];
	uint64_t bytes; /* message length so far */
	uint8_t buf[PSD_SHA256_BLOCK];
	size_t nbuf;
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

#endif
