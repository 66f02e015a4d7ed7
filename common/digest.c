// SPDX-License-Identifier: MIT
/* The digests of digest.h over Nettle and zlib. */
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <zlib.h>

#include "digest.h"

void psd_sha256_init(struct psd_sha256 *s)
{
	sha256_init(&s->ctx);
}

void psd_sha256_update(struct psd_sha256 *s, const void *data, size_t len)
{
	sha256_update(&s->ctx, len, data);
}

void psd_sha256_final(struct psd_sha256 *s, uint8_t out[PSD_SHA256_LEN])
{
	sha256_digest(&s->ctx, PSD_SHA256_LEN, out);
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
	struct hmac_sha256_ctx h;
	unsigned i;

	hmac_sha256_set_key(&h, klen, key);
	for (i = 0; i < nparts; i++)
		hmac_sha256_update(&h, parts[i].len, parts[i].base);
	hmac_sha256_digest(&h, PSD_SHA256_LEN, out);
	/* The context holds the key's inner and outer states. */
	explicit_bzero(&h, sizeof(h));
}

bool psd_mem_equal_ct(const void *a, const void *b, size_t len)
{
	return memeql_sec(a, b, len) != 0;
}

uint32_t psd_crc32_more(uint32_t crc, const void *buf, size_t len)
{
	return (uint32_t)crc32_z(crc, buf, len);
}
