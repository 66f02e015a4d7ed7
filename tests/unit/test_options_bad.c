// SPDX-License-Identifier: MIT
/*
 * Node options: rejection of bad values from the environment and from
 * flags, each with a message naming the variable or flag.
 */
#include "options_util.h"

static void test_options_env_bad_role(void)
{
	env_bad("DMLC_ROLE", "boss");
	env_bad("DMLC_ROLE", "Worker");
	env_bad("DMLC_ROLE", "worker ");
	env_clear();
}

static void test_options_env_bad_numbers(void)
{
	env_bad("DMLC_NUM_SERVER", "12abc");
	env_bad("DMLC_NUM_WORKER", "-1");
	env_bad("DMLC_NUM_WORKER", " 3");
	env_bad("DMLC_NUM_SERVER", "4294967296"); /* above 32 bits */
	env_bad("DMLC_NUM_SERVER", "99999999999999999999999");
	env_bad("DMLC_PS_ROOT_PORT", "-5");
	env_bad("DMLC_PORT", "80x");
	env_bad("PORT", "-1");
	env_bad("PS_VERBOSE", "abc");
	env_bad("PS_VERBOSE", "1x");
	/* Range checks (their messages: test_options_env_bad_port_range
	 * and test_options_env_bad_zero_count). */
	CHECK_EQ(env_try("DMLC_PORT", "70000"), -EINVAL);
	CHECK_EQ(env_try("DMLC_PORT", "65536"), -EINVAL);
	CHECK_EQ(env_try("DMLC_PS_ROOT_PORT", "65536"), -EINVAL);
	CHECK_EQ(env_try("PORT", "70000"), -EINVAL);
	CHECK_EQ(env_try("DMLC_NUM_SERVER", "0"), -EINVAL);
	CHECK_EQ(env_try("DMLC_NUM_WORKER", "0"), -EINVAL);
	env_clear();
}

/*
 * Regression (bug fixed in options.c): a port above 65535 is rejected with
 * -EINVAL, but by cfg_check(), whose message is "environment: port above
 * 65535" and does not name the variable (DMLC_PORT / DMLC_PS_ROOT_PORT),
 * although psched.h promises psched_errmsg() names it.
 */
static void test_options_env_bad_port_range(void)
{
	env_bad("DMLC_PORT", "70000");
	env_bad("DMLC_PS_ROOT_PORT", "70000");
	env_clear();
}

/*
 * Regression (bug fixed in options.c): DMLC_NUM_SERVER=0 is rejected with
 * -EINVAL, but the message ("environment: the job needs at least one
 * server and one worker") does not name DMLC_NUM_SERVER.
 */
static void test_options_env_bad_zero_count(void)
{
	env_bad("DMLC_NUM_SERVER", "0");
	env_bad("DMLC_NUM_WORKER", "0");
	env_clear();
}

static void test_options_env_bad_sizes(void)
{
	env_bad("PS_PARTITION_BYTES", "4Q");
	env_bad("PS_PARTITION_BYTES", "-4K");
	env_bad("PS_PARTITION_BYTES", "-1"); /* not 2^64-1 */
	env_bad("PS_CREDIT_BYTES", "-0");
	env_bad("PS_PARTITION_BYTES", "4K7");
	env_bad("PS_PARTITION_BYTES", "17179869184G"); /* 2^64: overflow */
	env_bad("BYTEPS_PARTITION_BYTES", "1T");
	env_bad("PS_MAX_TENSOR_BYTES", "lots");
	env_bad("PS_CREDIT_BYTES", "12abc");
	env_bad("PS_MAX_PARKED_BYTES", "much");
	env_bad("PS_MAX_STEPS_AHEAD", "-1");
	env_bad("PS_MAX_STEPS_AHEAD", "4294967296");
	env_clear();
}

/*
 * Regression (bug fixed in options.c): a size with a suffix but no digits is
 * accepted as 0 - strtoull() parses no number (0, end at the suffix) and
 * the suffix is then applied - so PS_MAX_TENSOR_BYTES=G silently makes the
 * limit 0 and PS_PARTITION_BYTES=K means "no partitioning".
 */
static void test_options_env_bad_size_no_digits(void)
{
	env_bad("PS_PARTITION_BYTES", "K");
	env_bad("PS_MAX_TENSOR_BYTES", "G");
	env_bad("PS_CREDIT_BYTES", "MiB");
	env_clear();
}

/*
 * Regression (bug fixed in options.c): "4KBB" is accepted as 4096 - the suffix
 * parser skips an optional 'i' or 'B' and then another optional 'B', so a
 * doubled "BB" passes.
 */
static void test_options_env_bad_size_suffix_doubled(void)
{
	env_bad("PS_PARTITION_BYTES", "4KBB");
	env_clear();
}

static void test_options_env_bad_heartbeat(void)
{
	env_bad("PS_HEARTBEAT_INTERVAL", "-1");
	env_bad("PS_HEARTBEAT_INTERVAL", "0");
	env_bad("PS_HEARTBEAT_INTERVAL", "abc");
	env_bad("PS_HEARTBEAT_INTERVAL", "1s");
	env_bad("PS_HEARTBEAT_INTERVAL", "nan");
	env_bad("PS_HEARTBEAT_TIMEOUT", "-1");
	env_bad("PS_HEARTBEAT_TIMEOUT", "0");
	env_bad("PS_HEARTBEAT_TIMEOUT", "abc");
	env_bad("PS_HEARTBEAT_TIMEOUT", "inf");
	env_clear();
}

/*
 * Regression (bug fixed in options.c): PS_HEARTBEAT_INTERVAL=0.0001 passes the
 * "> 0" check of opt_set() but (unsigned)(0.0001 * 1000 + 0.5) is 0, so
 * the 0 that "0" is rejected for gets stored anyway; with tick_ms 0 the
 * van never ticks, i.e. heartbeats are silently off.  Same for every
 * OPT_SECONDS option below 0.0005 s.  Reject it or store at least 1 ms.
 */
static void test_options_env_heartbeat_rounds_to_zero(void)
{
	struct psched_cfg cfg;
	int ret;

	fresh(&cfg);
	env_set("PS_HEARTBEAT_INTERVAL", "0.0001");
	ret = psched_cfg_from_env(&cfg);
	env_clear();
	if (ret == 0)
		CHECK_INT(cfg.heartbeat_interval_ms, >, 0);
	else
		CHECK_EQ(ret, -EINVAL);
}

/*
 * Regression (bug fixed in options.c): numbers are parsed with strtoull(base
 * 0), so DMLC_NUM_SERVER=010 means 8 servers (octal) and DMLC_PORT=08080 is
 * rejected.  ps-lite reads these with atoi (decimal); a leading zero must
 * not change the value.
 */
static void test_options_env_leading_zero_decimal(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("DMLC_NUM_SERVER", "010");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.num_server, 10);
	env_clear();
}

static void test_options_env_bad_strings(void)
{
	char uri[301], host[257], iface[65];
	struct psched_cfg cfg;

	memset(uri, 'a', sizeof(uri) - 1);
	uri[sizeof(uri) - 1] = '\0';
	env_bad("DMLC_PS_ROOT_URI", uri);
	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	env_bad("DMLC_NODE_HOST", host); /* 256 chars: no room for NUL */
	memset(iface, 'i', sizeof(iface) - 1);
	iface[sizeof(iface) - 1] = '\0';
	env_bad("DMLC_INTERFACE", iface);
	env_bad("PS_TRANSPORT", "udp");
	env_bad("PS_SERVER_MODE", "lazy");

	/* One byte shorter fits exactly. */
	fresh(&cfg);
	host[255] = '\0';
	env_set("DMLC_NODE_HOST", host);
	from_env_ok(&cfg);
	CHECK_EQ(strlen(cfg.node_host), 255);
	CHECK(memcmp(cfg.node_host, host, 256) == 0);
	env_clear();
}

/* A secret too long for its buffer is refused without being echoed:
 * the message goes to stderr and logs. */
static void test_options_bad_secret_not_shown(void)
{
	char secret[301], *argv[4];
	struct psched_cfg cfg;
	int argc = 3;

	memset(secret, 's', sizeof(secret) - 1);
	secret[sizeof(secret) - 1] = '\0';
	env_bad("PS_JOB_TOKEN", secret);
	CHECK(strstr(psched_errmsg(), "sss") == NULL);
	fresh(&cfg);
	argv[0] = arg("prog");
	argv[1] = arg("--job-token");
	argv[2] = secret;
	argv[3] = NULL;
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, false), -EINVAL);
	CHECK(strstr(psched_errmsg(), "job-token") != NULL);
	CHECK(strstr(psched_errmsg(), "sss") == NULL);
}

static void test_options_flag_bad_values(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	flag_bad("--role", "boss");
	flag_bad("--num-server", "12abc");
	flag_bad("--num-worker", "-3");
	flag_bad("--root-port", "-1");
	flag_bad("--partition-bytes", "4Q");
	flag_bad("--heartbeat-interval", "0");
	flag_bad("--heartbeat-interval", "-1");
	flag_bad("--heartbeat-timeout", "abc");
	flag_bad("--transport", "carrier-pigeon");
	flag_bad("--verbose", "loud");
	/* Range checks (messages: test_options_flag_bad_range_names_flag) */
	{
		char *argv[] = { arg("prog"), arg("--port=65536"), NULL };
		char *argv2[] = { arg("prog"), arg("--num-worker=0"), NULL };
		int argc = 2;

		psd_cfg_defaults(&cfg);
		CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, false),
			 -EINVAL);
		argc = 2;
		psd_cfg_defaults(&cfg);
		CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv2, false),
			 -EINVAL);
	}
}

/*
 * Regression (bug fixed in options.c): like the environment case, --port 70000
 * and --num-server 0 fail in cfg_check() with "command line: ..." and the
 * message does not name the flag.
 */
static void test_options_flag_bad_range_names_flag(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	flag_bad("--port", "70000");
	flag_bad("--num-server", "0");
}

/* ---- usage --------------------------------------------------------- */

const struct test_case test_list[] = {
	{ "options_env_bad_role", test_options_env_bad_role },
	{ "options_env_bad_numbers", test_options_env_bad_numbers },
	{ "options_env_bad_port_range", test_options_env_bad_port_range },
	{ "options_env_bad_zero_count", test_options_env_bad_zero_count },
	{ "options_env_bad_sizes", test_options_env_bad_sizes },
	{ "options_env_bad_size_no_digits",
	  test_options_env_bad_size_no_digits },
	{ "options_env_bad_size_suffix_doubled",
	  test_options_env_bad_size_suffix_doubled },
	{ "options_env_bad_heartbeat", test_options_env_bad_heartbeat },
	{ "options_env_heartbeat_rounds_to_zero",
	  test_options_env_heartbeat_rounds_to_zero },
	{ "options_env_leading_zero_decimal",
	  test_options_env_leading_zero_decimal },
	{ "options_env_bad_strings", test_options_env_bad_strings },
	{ "options_bad_secret_not_shown", test_options_bad_secret_not_shown },
	{ "options_flag_bad_values", test_options_flag_bad_values },
	{ "options_flag_bad_range_names_flag",
	  test_options_flag_bad_range_names_flag },
	{ NULL, NULL },
};
