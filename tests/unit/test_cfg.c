// SPDX-License-Identifier: MIT
/*
 * The opaque configuration (common/cfg.c): psched_cfg_create() holds the
 * defaults, psched_cfg_get() of every option of the table reads back
 * through psched_cfg_set() to the same configuration, values written in
 * any accepted form read back in the canonical one, and bad names,
 * values and buffers get clear errors.
 */
#include "options_util.h"
#include "options_int.h"

static void cfg_get_is(const struct psched_cfg *cfg, const char *name,
		       const char *want)
{
	char buf[300];

	CHECK_EQ(psched_cfg_get(cfg, name, buf, sizeof(buf)), 0);
	CHECK_STR(buf, want);
}

static void test_cfg_create_holds_defaults(void)
{
	struct psched_cfg *cfg = NULL, def;

	env_clear();
	psd_cfg_defaults(&def);
	CHECK_EQ(psched_cfg_create(&cfg), 0);
	CHECK(cfg != NULL);
	CHECK(!memcmp(cfg, &def, sizeof(def)));
	psched_cfg_destroy(cfg);
	psched_cfg_destroy(NULL); /* a no-op */
}

/* Every option: what get says, set takes back, changing nothing. */
static void test_cfg_every_option_round_trips(void)
{
	struct psched_cfg *cfg, def;
	char buf[300];
	size_t i;

	psd_cfg_defaults(&def);
	CHECK_EQ(psched_cfg_create(&cfg), 0);
	for (i = 0; i < psd_nopts; i++) {
		CHECK_EQ(
			psched_cfg_get(cfg, psd_opts[i].flag, buf, sizeof(buf)),
			0);
		if (psched_cfg_set(cfg, psd_opts[i].flag, buf))
			test_fail_at(__FILE__, __LINE__,
				     "--%s: get gave '%s', set refused it: %s",
				     psd_opts[i].flag, buf, psched_errmsg());
		if (memcmp(cfg, &def, sizeof(def)))
			test_fail_at(__FILE__, __LINE__,
				     "--%s: set of '%s' changed the config",
				     psd_opts[i].flag, buf);
	}
	psched_cfg_destroy(cfg);
}

static void test_cfg_set_then_get(void)
{
	struct psched_cfg *cfg;

	CHECK_EQ(psched_cfg_create(&cfg), 0);
	cfg_get_is(cfg, "role", "worker");
	CHECK_EQ(psched_cfg_set(cfg, "role", "server"), 0);
	cfg_get_is(cfg, "role", "server");
	CHECK_EQ(psched_cfg_set(cfg, "num-server", "4"), 0);
	cfg_get_is(cfg, "num-server", "4");
	/* a variable names its option too */
	CHECK_EQ(psched_cfg_set(cfg, "DMLC_NUM_WORKER", "3"), 0);
	cfg_get_is(cfg, "num-worker", "3");
	cfg_get_is(cfg, "DMLC_NUM_WORKER", "3");
	CHECK_EQ(psched_cfg_set(cfg, "partition-bytes", "4M"), 0);
	cfg_get_is(cfg, "partition-bytes", "4194304");
	CHECK_EQ(psched_cfg_set(cfg, "request-timeout", "0.5"), 0);
	cfg_get_is(cfg, "request-timeout", "0.5");
	CHECK_EQ(psched_cfg_set(cfg, "keylist-cache", "off"), 0);
	cfg_get_is(cfg, "keylist-cache", "0");
	CHECK_EQ(psched_cfg_set(cfg, "transport", "ibverbs"), 0);
	cfg_get_is(cfg, "transport", "rdma");
	cfg_get_is(cfg, "rdma-gid-index", ""); /* unset */
	CHECK_EQ(psched_cfg_set(cfg, "rdma-gid-index", "7"), 0);
	cfg_get_is(cfg, "rdma-gid-index", "7");
	CHECK_EQ(psched_cfg_set(cfg, "rdma-gid-index", ""), 0);
	cfg_get_is(cfg, "rdma-gid-index", "");
	CHECK_EQ(psched_cfg_set(cfg, "rdma-buf-bytes", "64K"), 0);
	cfg_get_is(cfg, "rdma-buf-bytes", "65536");
	CHECK_EQ(psched_cfg_set(cfg, "autotune-retune-threshold", "0.25"), 0);
	cfg_get_is(cfg, "autotune-retune-threshold", "0.25");
	CHECK_EQ(psched_cfg_set(cfg, "sender-nice", "-5"), 0);
	cfg_get_is(cfg, "sender-nice", "-5");
	psched_cfg_destroy(cfg);
}

static void test_cfg_errors(void)
{
	struct psched_cfg *cfg;
	char buf[4];

	CHECK_EQ(psched_cfg_create(NULL), -EINVAL);
	CHECK_EQ(psched_cfg_create(&cfg), 0);
	CHECK_EQ(psched_cfg_set(cfg, "no-such-option", "1"), -ENOENT);
	CHECK(strstr(psched_errmsg(), "no-such-option") != NULL);
	CHECK_EQ(psched_cfg_get(cfg, "--num-server", buf, sizeof(buf)),
		 -ENOENT);
	CHECK_EQ(psched_cfg_set(cfg, "num-server", "0"), -EINVAL);
	CHECK(strstr(psched_errmsg(), "num-server") != NULL);
	CHECK_EQ(psched_cfg_set(cfg, "num-server", "many"), -EINVAL);
	CHECK_EQ(psched_cfg_set(cfg, "rdma-port", "300"), -EINVAL);
	cfg_get_is(cfg, "num-server", "1"); /* refused values change nothing */
	cfg_get_is(cfg, "rdma-port", "1");
	CHECK_EQ(psched_cfg_set(cfg, "job-token", "s3cret"), 0);
	CHECK_EQ(psched_cfg_set(NULL, "role", "worker"), -EINVAL);
	CHECK_EQ(psched_cfg_set(cfg, NULL, "worker"), -EINVAL);
	CHECK_EQ(psched_cfg_set(cfg, "role", NULL), -EINVAL);
	CHECK_EQ(psched_cfg_get(cfg, "role", NULL, 4), -EINVAL);
	/* "127.0.0.1" does not fit in 4 bytes: what fits, and -ERANGE */
	CHECK_EQ(psched_cfg_get(cfg, "root-uri", buf, sizeof(buf)), -ERANGE);
	CHECK_STR(buf, "127");
	CHECK(strstr(psched_errmsg(), "root-uri") != NULL);
	psched_cfg_destroy(cfg);
}

const struct test_case test_list[] = {
	{ "cfg_create_holds_defaults", test_cfg_create_holds_defaults },
	{ "cfg_every_option_round_trips", test_cfg_every_option_round_trips },
	{ "cfg_set_then_get", test_cfg_set_then_get },
	{ "cfg_errors", test_cfg_errors },
	{ NULL, NULL },
};
