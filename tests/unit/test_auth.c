// SPDX-License-Identifier: MIT
/*
 * Job authentication (common/digest.c, common/auth.c): SHA-256 against
 * the FIPS 180 examples, HMAC-SHA256 against RFC 4231's test cases, the
 * handshake proofs (each side's, each nonce, each key matters), loading
 * the secret from PS_JOB_TOKEN / PS_JOB_TOKEN_FILE, and the options.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness.h"
#include "cfg.h"
#include "../../common/auth.h"
#include "../../common/digest.h"
#include "psched.h"

static void hex(const uint8_t *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void check_sha(const void *msg, size_t len, const char *want)
{
	uint8_t d[PSD_SHA256_LEN];
	char got[2 * PSD_SHA256_LEN + 1];

	psd_sha256(msg, len, d);
	hex(d, sizeof(d), got);
	CHECK_STR(got, want);
}

/* FIPS 180-2 appendix B (and the empty message). */
static void test_sha256_fips180(void)
{
	static const char two_blocks[] =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	struct psd_sha256 s;
	uint8_t d[PSD_SHA256_LEN], chunk[1000];
	char got[2 * PSD_SHA256_LEN + 1];
	unsigned i;

	check_sha("abc", 3,
		  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f200"
		  "15ad");
	check_sha(two_blocks, strlen(two_blocks),
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db"
		  "06c1");
	check_sha("", 0,
		  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852"
		  "b855");
	/* One million 'a', fed in uneven pieces. */
	memset(chunk, 'a', sizeof(chunk));
	psd_sha256_init(&s);
	for (i = 0; i < 1000000;) {
		unsigned n = 1 + (i * 7) % 997;

		if (n > 1000000 - i)
			n = 1000000 - i;
		psd_sha256_update(&s, chunk, n);
		i += n;
	}
	psd_sha256_final(&s, d);
	hex(d, sizeof(d), got);
	CHECK_STR(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39c"
		       "cc7112cd0");
}

/* Padding edges: 55, 56, 63, 64 and 65 bytes take one or two final
 * blocks; byte-at-a-time updates give the same digest. */
static void test_sha256_block_edges(void)
{
	static const unsigned lens[] = { 55, 56, 63, 64, 65, 119, 128 };
	uint8_t msg[128], one[PSD_SHA256_LEN], bytewise[PSD_SHA256_LEN];
	struct psd_sha256 s;
	unsigned i, j;

	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 31 + 7);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		psd_sha256(msg, lens[i], one);
		psd_sha256_init(&s);
		for (j = 0; j < lens[i]; j++)
			psd_sha256_update(&s, msg + j, 1);
		psd_sha256_final(&s, bytewise);
		CHECK(memcmp(one, bytewise, sizeof(one)) == 0);
	}
	/* The 56-byte message of FIPS 180 is the two-block case. */
	psd_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		   56, one);
	CHECK_EQ(one[0], 0x24);
	CHECK_EQ(one[31], 0xc1);
}

struct hmac_case {
	uint8_t key[131];
	size_t klen;
	const char *data;
	size_t dlen;
	const char *want; /* hex, maybe truncated (case 5) */
};

/* RFC 4231 section 4, test cases 1-7 (HMAC-SHA-256). */
static void test_hmac_rfc4231(void)
{
	static const char d3[] = "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd"
				 "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd"
				 "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd"
				 "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd"
				 "\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd\xdd";
	static const char d4[] = "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
				 "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
				 "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
				 "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
				 "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd";
	static const char d6[] =
		"Test Using Larger Than Block-Size Key - Hash Key First";
	static const char d7[] =
		"This is a test using a larger than block-size key and a "
		"larger than block-size data. The key needs to be hashed "
		"before being used by the HMAC algorithm.";
	static struct hmac_case c[7];
	uint8_t mac[PSD_SHA256_LEN];
	char got[2 * PSD_SHA256_LEN + 1];
	struct psd_iov_c part;
	unsigned i;

	memset(c[0].key, 0x0b, 20);
	c[0].klen = 20;
	c[0].data = "Hi There";
	c[0].want = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e"
		    "32cff7";
	memcpy(c[1].key, "Jefe", 4);
	c[1].klen = 4;
	c[1].data = "what do ya want for nothing?";
	c[1].want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964"
		    "ec3843";
	memset(c[2].key, 0xaa, 20);
	c[2].klen = 20;
	c[2].data = d3;
	c[2].dlen = 50;
	c[2].want = "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ce"
		    "d565fe";
	for (i = 0; i < 25; i++)
		c[3].key[i] = (uint8_t)(i + 1);
	c[3].klen = 25;
	c[3].data = d4;
	c[3].dlen = 50;
	c[3].want = "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff467"
		    "29665b";
	memset(c[4].key, 0x0c, 20);
	c[4].klen = 20;
	c[4].data = "Test With Truncation";
	c[4].want = "a3b6167473100ee06e0c796c2955552b"; /* first 128 bits */
	memset(c[5].key, 0xaa, 131);
	c[5].klen = 131;
	c[5].data = d6;
	c[5].want = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0e"
		    "e37f54";
	memset(c[6].key, 0xaa, 131);
	c[6].klen = 131;
	c[6].data = d7;
	c[6].want = "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c"
		    "3a35e2";
	for (i = 0; i < 7; i++) {
		part.base = c[i].data;
		part.len = c[i].dlen ? c[i].dlen : strlen(c[i].data);
		psd_hmac_sha256(c[i].key, c[i].klen, &part, 1, mac);
		hex(mac, sizeof(mac), got);
		got[strlen(c[i].want)] = '\0';
		CHECK_STR(got, c[i].want);
	}
}

/* Parts are hashed as their concatenation. */
static void test_hmac_parts(void)
{
	struct psd_iov_c whole = { "what do ya want for nothing?", 28 };
	struct psd_iov_c parts[3] = { { "what do", 7 },
				      { "", 0 },
				      { " ya want for nothing?", 21 } };
	uint8_t a[PSD_SHA256_LEN], b[PSD_SHA256_LEN];

	psd_hmac_sha256("Jefe", 4, &whole, 1, a);
	psd_hmac_sha256("Jefe", 4, parts, 3, b);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	CHECK(psd_mem_equal_ct(a, b, sizeof(a)));
	b[17] ^= 0x40;
	CHECK(!psd_mem_equal_ct(a, b, sizeof(a)));
}

static void secret_of(struct psd_auth_secret *s, const char *text)
{
	memset(s, 0, sizeof(*s));
	s->len = strlen(text);
	memcpy(s->key, text, s->len);
}

/* A proof checks only under the same key, side, kind, id and nonces. */
static void test_auth_proofs(void)
{
	struct psd_auth_secret k, other, none;
	uint8_t ni[32], nr[32], p[32], q[32];
	unsigned i;

	secret_of(&k, "0123456789abcdef-job-secret");
	secret_of(&other, "0123456789abcdef-job-secreT");
	memset(&none, 0, sizeof(none));
	none.none = true;
	for (i = 0; i < 32; i++) {
		ni[i] = (uint8_t)i;
		nr[i] = (uint8_t)(100 + i);
	}
	psd_auth_proof(&k, true, PSD_AUTH_HELLO, 5, ni, nr, p);
	CHECK(psd_auth_check(&k, true, PSD_AUTH_HELLO, 5, ni, nr, p, 32));
	CHECK(!psd_auth_check(&other, true, PSD_AUTH_HELLO, 5, ni, nr, p, 32));
	CHECK(!psd_auth_check(&none, true, PSD_AUTH_HELLO, 5, ni, nr, p, 32));
	/* The responder's proof is no initiator's proof (reflection). */
	CHECK(!psd_auth_check(&k, false, PSD_AUTH_HELLO, 5, ni, nr, p, 32));
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_REGISTER, 5, ni, nr, p, 32));
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO, 6, ni, nr, p, 32));
	/* Each channel of a split pair is its own kind: a proof for one
	 * channel opens no other (PS_TCP_SPLIT). */
	CHECK_EQ(psd_auth_hello_kind(0), PSD_AUTH_HELLO);
	CHECK_EQ(psd_auth_hello_kind(1), PSD_AUTH_HELLO_REQ);
	CHECK_EQ(psd_auth_hello_kind(2), PSD_AUTH_HELLO_ANS);
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO_REQ, 5, ni, nr, p, 32));
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO_ANS, 5, ni, nr, p, 32));
	psd_auth_proof(&k, true, PSD_AUTH_HELLO_ANS, 5, ni, nr, q);
	CHECK(psd_auth_check(&k, true, PSD_AUTH_HELLO_ANS, 5, ni, nr, q, 32));
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO_REQ, 5, ni, nr, q, 32));
	/* A recorded proof for other nonces (a replay) fails. */
	nr[31] ^= 1;
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO, 5, ni, nr, p, 32));
	nr[31] ^= 1;
	ni[0] ^= 0x80;
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO, 5, ni, nr, p, 32));
	ni[0] ^= 0x80;
	/* Swapped nonces differ too. */
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO, 5, nr, ni, p, 32));
	/* Short, long, absent proofs. */
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO, 5, ni, nr, p, 31));
	CHECK(!psd_auth_check(&k, true, PSD_AUTH_HELLO, 5, ni, nr, NULL, 32));
	/* It is HMAC-SHA256(K, "psched-auth-1" R kind id_le n_i n_r), the
	 * bytes tests/integration/attack.py computes with Python's hmac. */
	{
		uint8_t msg[13 + 6 + 64];
		struct psd_iov_c part = { msg, sizeof(msg) };

		memcpy(msg, "psched-auth-1", 13);
		msg[13] = 'I';
		msg[14] = PSD_AUTH_REGISTER;
		msg[15] = 2;
		msg[16] = msg[17] = msg[18] = 0;
		memcpy(msg + 19, ni, 32);
		memcpy(msg + 51, nr, 32);
		psd_hmac_sha256(k.key, k.len, &part, 1, q);
		psd_auth_proof(&k, false, PSD_AUTH_REGISTER, 2, ni, nr, p);
		CHECK(memcmp(p, q, 32) == 0);
	}
	/* Nonces are fresh. */
	CHECK_EQ(psd_auth_nonce(ni), 0);
	CHECK_EQ(psd_auth_nonce(nr), 0);
	CHECK(memcmp(ni, nr, 32) != 0);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
	close(fd);
	CHECK_EQ(chmod(path, mode), 0);
}

static bool errmsg_has(const char *what)
{
	return strstr(psched_errmsg(), what) != NULL;
}

static void test_auth_secret_load(void)
{
	struct psd_auth_secret s;
	struct psched_cfg cfg;
	char path[] = "/tmp/psched-auth-test.XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	psd_cfg_defaults(&cfg);
	/* None: refused, saying how to set one. */
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EACCES);
	CHECK(errmsg_has("no job secret"));
	CHECK(errmsg_has("PS_JOB_TOKEN"));
	CHECK(errmsg_has("same random value on every node"));
	CHECK(errmsg_has("PS_ALLOW_UNAUTHENTICATED=1"));
	/* Explicitly unauthenticated: an empty key, marked. */
	cfg.allow_unauthenticated = 1;
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), 0);
	CHECK(s.none);
	CHECK_EQ(s.len, 0);
	/* A secret wins over allowing none. */
	strcpy(cfg.job_token, "a-secret-of-twenty-bytes");
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), 0);
	CHECK(!s.none);
	CHECK_EQ(s.len, 24);
	CHECK(memcmp(s.key, "a-secret-of-twenty-bytes", 24) == 0);
	/* Both: refused. */
	strcpy(cfg.job_token_file, path);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EINVAL);
	CHECK(errmsg_has("set one of them"));
	cfg.job_token[0] = '\0';
	cfg.allow_unauthenticated = 0;
	/* File: one trailing newline (or CRLF) dropped, inner ones kept. */
	write_file(path, "file-secret-0123456789\n", 0600);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), 0);
	CHECK_EQ(s.len, 22);
	CHECK(memcmp(s.key, "file-secret-0123456789", 22) == 0);
	write_file(path, "file-secret\n0123456789\r\n", 0400);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), 0);
	CHECK_EQ(s.len, 22);
	CHECK(memcmp(s.key, "file-secret\n0123456789", 22) == 0);
	/* Readable by all: taken (Kubernetes mounts secrets 0644), warned. */
	write_file(path, "file-secret-0123456789", 0644);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), 0);
	CHECK_EQ(s.len, 22);
	/* Writable by others: refused, naming the mode and the fix. */
	write_file(path, "file-secret-0123456789", 0620);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EACCES);
	CHECK(errmsg_has("writable by others (mode 620)"));
	CHECK(errmsg_has("chmod go-w"));
	write_file(path, "file-secret-0123456789", 0602);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EACCES);
	/* Empty, or just a newline: refused. */
	write_file(path, "\n", 0600);
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EINVAL);
	CHECK(errmsg_has("is empty"));
	/* Over 1 KiB: refused. */
	{
		char big[1200];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		write_file(path, big, 0600);
		CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EINVAL);
		CHECK(errmsg_has("larger than"));
	}
	/* Missing: the path and the reason. */
	unlink(path);
	CHECK(psd_auth_secret_load(&cfg, &s) < 0);
	CHECK(errmsg_has(path));
	/* A directory is no secret. */
	strcpy(cfg.job_token_file, "/tmp");
	CHECK_EQ(psd_auth_secret_load(&cfg, &s), -EINVAL);
	CHECK(errmsg_has("not a regular file"));
}

/* The knobs: defaults, environment, bounds. */
static void test_auth_options(void)
{
	struct psched_cfg cfg;

	psd_cfg_defaults(&cfg);
	CHECK_EQ(cfg.allow_unauthenticated, 0);
	CHECK_EQ(cfg.auth_timeout_ms, 5000);
	CHECK_EQ(cfg.preauth_max_frame, 4096);
	CHECK_EQ(cfg.max_pending_auth, 128);
	CHECK_STR(cfg.job_token_file, "");
	setenv("PS_ALLOW_UNAUTHENTICATED", "1", 1);
	setenv("PS_AUTH_TIMEOUT", "0.5", 1);
	setenv("PS_PREAUTH_MAX_FRAME", "1K", 1);
	setenv("PS_MAX_PENDING_AUTH", "7", 1);
	setenv("PS_JOB_TOKEN_FILE", "/run/secrets/psched", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), 0);
	CHECK_EQ(cfg.allow_unauthenticated, 1);
	CHECK_EQ(cfg.auth_timeout_ms, 500);
	CHECK_EQ(cfg.preauth_max_frame, 1024);
	CHECK_EQ(cfg.max_pending_auth, 7);
	CHECK_STR(cfg.job_token_file, "/run/secrets/psched");
	setenv("PS_PREAUTH_MAX_FRAME", "1M", 1); /* kilobytes, not MiB */
	CHECK_EQ(psched_cfg_from_env(&cfg), -EINVAL);
	CHECK(errmsg_has("PS_PREAUTH_MAX_FRAME"));
	setenv("PS_PREAUTH_MAX_FRAME", "4K", 1);
	setenv("PS_MAX_PENDING_AUTH", "0", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), -EINVAL);
	CHECK(errmsg_has("PS_MAX_PENDING_AUTH"));
	unsetenv("PS_ALLOW_UNAUTHENTICATED");
	unsetenv("PS_AUTH_TIMEOUT");
	unsetenv("PS_PREAUTH_MAX_FRAME");
	unsetenv("PS_MAX_PENDING_AUTH");
	unsetenv("PS_JOB_TOKEN_FILE");
}

const struct test_case test_list[] = {
	{ "sha256_fips180", test_sha256_fips180 },
	{ "sha256_block_edges", test_sha256_block_edges },
	{ "hmac_rfc4231", test_hmac_rfc4231 },
	{ "hmac_parts", test_hmac_parts },
	{ "auth_proofs", test_auth_proofs },
	{ "auth_secret_load", test_auth_secret_load },
	{ "auth_options", test_auth_options },
	{ NULL, NULL },
};
