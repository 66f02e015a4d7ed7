// SPDX-License-Identifier: MIT
/*
 * Node options (include/psched.h psched_cfg_*): defaults, every DMLC_* /
 * PS_* variable, flags and their precedence, argv handling, rejection of
 * bad values with a message naming the variable or flag, and --help text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../../common/internal.h"
#include "psched.h"

/* Every variable psched reads; cleared before and after each test. */
static const char *const env_names[] = {
	"DMLC_ROLE",
	"DMLC_PS_ROOT_URI",
	"DMLC_PS_ROOT_PORT",
	"DMLC_NUM_SERVER",
	"DMLC_NUM_WORKER",
	"DMLC_NODE_HOST",
	"DMLC_INTERFACE",
	"DMLC_PORT",
	"PORT",
	"PS_VERBOSE",
	"PS_HEARTBEAT_INTERVAL",
	"PS_HEARTBEAT_TIMEOUT",
	"PS_CONNECT_TIMEOUT",
	"PS_REQUEST_TIMEOUT",
	"PS_TRANSPORT",
	"PS_SERVER_MODE",
	"PS_MAX_TENSOR_BYTES",
	"PS_PARTITION_BYTES",
	"BYTEPS_PARTITION_BYTES",
	"PS_CREDIT_BYTES",
	"DMLC_ENABLE_RDMA",
	"PS_AUTOTUNE",
	"PS_AUTOTUNE_WARMUP_SAMPLES",
	"PS_AUTOTUNE_STEPS_PER_SAMPLE",
	"PS_AUTOTUNE_MAX_SAMPLES",
	"PS_AUTOTUNE_RETUNE_MAX_SAMPLES",
	"PS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
	"PS_AUTOTUNE_LOG_FILE",
	"PS_AUTOTUNE_RETUNE_THRESHOLD",
	"PS_AUTOTUNE_PARTITION_MIN",
	"PS_AUTOTUNE_PARTITION_MAX",
	"PS_AUTOTUNE_SEED",
	"PS_JOB_TOKEN",
	"PS_SOCKET_BUF_BYTES",
	"PS_RDMA_DEVICE",
	"PS_RDMA_PORT",
	"PS_RDMA_GID_INDEX",
	"PS_RDMA_RECV_DEPTH",
	"PS_RDMA_SEND_DEPTH",
	"PS_RDMA_BUF_BYTES",
	"PS_RDMA_INLINE",
	"PS_RDMA_CQ_DEPTH",
	"PS_RDMA_SPIN_US",
	"PS_RDMA_MR_BUDGET",
	"PS_RDMA_TEST_FAIL_REG",
};

static const char *const flag_names[] = {
	"--role",
	"--root-uri",
	"--root-port",
	"--num-server",
	"--num-worker",
	"--node-host",
	"--interface",
	"--port",
	"--verbose",
	"--heartbeat-interval",
	"--heartbeat-timeout",
	"--connect-timeout",
	"--request-timeout",
	"--transport",
	"--server-mode",
	"--max-tensor-bytes",
	"--partition-bytes",
	"--credit-bytes",
};

#define N_ENV	(sizeof(env_names) / sizeof(env_names[0]))
#define N_FLAGS (sizeof(flag_names) / sizeof(flag_names[0]))

/* parse_args only reorders argv's pointers, never writes the strings. */
static char *arg(const char *s)
{
	return (char *)(uintptr_t)s;
}

static void env_clear(void)
{
	size_t i;

	for (i = 0; i < N_ENV; i++)
		unsetenv(env_names[i]);
}

static void env_set(const char *name, const char *val)
{
	CHECK_EQ(setenv(name, val, 1), 0);
}

/* Start of every test: no stray variable from the caller or a failed
 * earlier test, and a fresh config. */
static void fresh(struct psched_cfg *cfg)
{
	env_clear();
	psched_cfg_init(cfg);
	psd_set_errmsg(0, "%s", "");
}

/* Config from defaults + environment, expecting success. */
static void from_env_ok_at(const char *file, int line, struct psched_cfg *cfg)
{
	int ret;

	psched_cfg_init(cfg);
	ret = psched_cfg_from_env(cfg);
	if (ret)
		test_fail_at(file, line, "psched_cfg_from_env: %d (%s)", ret,
			     psched_errmsg());
}

#define from_env_ok(cfg) from_env_ok_at(__FILE__, __LINE__, (cfg))

/* One variable with a bad value: -EINVAL and a message naming it. */
static void env_bad_at(const char *file, int line, const char *name,
		       const char *val)
{
	struct psched_cfg cfg;
	int ret;

	env_clear();
	env_set(name, val);
	psched_cfg_init(&cfg);
	psd_set_errmsg(0, "%s", "");
	ret = psched_cfg_from_env(&cfg);
	unsetenv(name);
	if (ret != -EINVAL)
		test_fail_at(file, line, "%s=%s: returned %d, want -EINVAL",
			     name, val, ret);
	if (!strstr(psched_errmsg(), name))
		test_fail_at(file, line,
			     "%s=%s: message \"%s\" does not name %s", name,
			     val, psched_errmsg(), name);
}

#define env_bad(name, val) env_bad_at(__FILE__, __LINE__, (name), (val))

/* Only the return code: for values whose message is checked elsewhere. */
static int env_try(const char *name, const char *val)
{
	struct psched_cfg cfg;
	int ret;

	env_clear();
	env_set(name, val);
	psched_cfg_init(&cfg);
	ret = psched_cfg_from_env(&cfg);
	unsetenv(name);
	return ret;
}

/* One flag with a bad value, in both forms: -EINVAL naming the flag. */
static void flag_bad_at(const char *file, int line, const char *flag,
			const char *val)
{
	struct psched_cfg cfg;
	char joined[512];
	char *argv1[] = { arg("prog"), arg(flag), arg(val), NULL };
	char *argv2[] = { arg("prog"), joined, NULL };
	int argc, ret;

	snprintf(joined, sizeof(joined), "%s=%s", flag, val);
	psched_cfg_init(&cfg);
	psd_set_errmsg(0, "%s", "");
	argc = 3;
	ret = psched_cfg_parse_args(&cfg, &argc, argv1, false);
	if (ret != -EINVAL)
		test_fail_at(file, line, "%s %s: returned %d, want -EINVAL",
			     flag, val, ret);
	if (!strstr(psched_errmsg(), flag))
		test_fail_at(file, line,
			     "%s %s: message \"%s\" does not name %s", flag,
			     val, psched_errmsg(), flag);

	psched_cfg_init(&cfg);
	psd_set_errmsg(0, "%s", "");
	argc = 2;
	ret = psched_cfg_parse_args(&cfg, &argc, argv2, false);
	if (ret != -EINVAL)
		test_fail_at(file, line, "%s: returned %d, want -EINVAL",
			     joined, ret);
	if (!strstr(psched_errmsg(), flag))
		test_fail_at(file, line, "%s: message \"%s\" does not name %s",
			     joined, psched_errmsg(), flag);
}

#define flag_bad(flag, val) flag_bad_at(__FILE__, __LINE__, (flag), (val))

/* ---- defaults ------------------------------------------------------ */

static void test_options_defaults(void)
{
	struct psched_cfg cfg;

	env_clear();
	memset(&cfg, 0xff, sizeof(cfg)); /* init must set every field */
	psched_cfg_init(&cfg);
	CHECK_EQ(cfg.role, PSCHED_ROLE_WORKER);
	CHECK_STR(cfg.root_uri, "127.0.0.1");
	CHECK_EQ(cfg.root_port, 9091);
	CHECK_EQ(cfg.num_server, 1);
	CHECK_EQ(cfg.num_worker, 1);
	CHECK_STR(cfg.node_host, "");
	CHECK_STR(cfg.interface, "");
	CHECK_EQ(cfg.port, 0);
	CHECK_EQ(cfg.verbose, 0);
	CHECK_EQ(cfg.heartbeat_interval_ms, 1000);
	CHECK_EQ(cfg.heartbeat_timeout_ms, 10000);
	CHECK_EQ(cfg.connect_timeout_ms, 60000);
	CHECK_EQ(cfg.request_timeout_ms, 120000);
	CHECK_STR(cfg.transport, "auto");
	CHECK_STR(cfg.server_mode, "sync");
	CHECK_U64(cfg.max_tensor_bytes, ==, 4ull << 30);
	CHECK_U64(cfg.partition_bytes, ==, 0);
	CHECK_U64(cfg.credit_bytes, ==, 0);
}

static void test_options_empty_env_keeps_defaults(void)
{
	struct psched_cfg def, cfg;

	fresh(&def);
	from_env_ok(&cfg);
	CHECK(memcmp(&def, &cfg, sizeof(cfg)) == 0);
	/* A variable set to "" counts as unset. */
	env_set("DMLC_NUM_SERVER", "");
	env_set("PS_TRANSPORT", "");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.num_server, 1);
	CHECK_STR(cfg.transport, "auto");
	env_clear();
}

static void test_options_role_names(void)
{
	CHECK_STR(psched_role_name(PSCHED_ROLE_SCHEDULER), "scheduler");
	CHECK_STR(psched_role_name(PSCHED_ROLE_SERVER), "server");
	CHECK_STR(psched_role_name(PSCHED_ROLE_WORKER), "worker");
}

/* ---- environment --------------------------------------------------- */

static void test_options_env_role(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("DMLC_ROLE", "scheduler");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.role, PSCHED_ROLE_SCHEDULER);
	env_set("DMLC_ROLE", "server");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.role, PSCHED_ROLE_SERVER);
	env_set("DMLC_ROLE", "worker");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.role, PSCHED_ROLE_WORKER);
	env_clear();
}

static void test_options_env_cluster(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("DMLC_PS_ROOT_URI", "10.1.2.3");
	env_set("DMLC_PS_ROOT_PORT", "8000");
	env_set("DMLC_NUM_SERVER", "4");
	env_set("DMLC_NUM_WORKER", "16");
	env_set("DMLC_NODE_HOST", "host-a.example");
	env_set("DMLC_INTERFACE", "eth1");
	env_set("DMLC_PORT", "1234");
	env_set("PS_VERBOSE", "2");
	from_env_ok(&cfg);
	CHECK_STR(cfg.root_uri, "10.1.2.3");
	CHECK_EQ(cfg.root_port, 8000);
	CHECK_EQ(cfg.num_server, 4);
	CHECK_EQ(cfg.num_worker, 16);
	CHECK_STR(cfg.node_host, "host-a.example");
	CHECK_STR(cfg.interface, "eth1");
	CHECK_EQ(cfg.port, 1234);
	CHECK_EQ(cfg.verbose, 2);
	/* Untouched options keep their defaults. */
	CHECK_EQ(cfg.role, PSCHED_ROLE_WORKER);
	CHECK_STR(cfg.transport, "auto");
	env_clear();
}

static void test_options_env_ports(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("PORT", "4321");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.port, 4321);
	/* DMLC_PORT is the primary name and wins over PORT. */
	env_set("DMLC_PORT", "1234");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.port, 1234);
	/* Port limits: 65535 is fine, 0 means any. */
	env_set("DMLC_PORT", "65535");
	env_set("DMLC_PS_ROOT_PORT", "65535");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.port, 65535);
	CHECK_EQ(cfg.root_port, 65535);
	env_set("DMLC_PORT", "0");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.port, 0);
	env_clear();
}

static void test_options_env_heartbeat(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("PS_HEARTBEAT_INTERVAL", "0.5");
	env_set("PS_HEARTBEAT_TIMEOUT", "30");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.heartbeat_interval_ms, 500);
	CHECK_EQ(cfg.heartbeat_timeout_ms, 30000);
	env_set("PS_HEARTBEAT_INTERVAL", "2");
	env_set("PS_HEARTBEAT_TIMEOUT", "2.25");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.heartbeat_interval_ms, 2000);
	CHECK_EQ(cfg.heartbeat_timeout_ms, 2250);
	env_set("PS_HEARTBEAT_INTERVAL", "0.001");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.heartbeat_interval_ms, 1);
	/* 1.005 * 1000 is 1004.9999... in binary: rounded, not cut. */
	env_set("PS_HEARTBEAT_INTERVAL", "1.005");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.heartbeat_interval_ms, 1005);
	env_clear();
}

static void test_options_env_transport(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("PS_TRANSPORT", "tcp");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "tcp");
	env_set("PS_TRANSPORT", "rdma");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "rdma");
	env_set("PS_TRANSPORT", "ibverbs");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "rdma");
	env_set("PS_TRANSPORT", "auto");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "auto");
	env_clear();
}

static void test_options_env_enable_rdma(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("DMLC_ENABLE_RDMA", "1");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "rdma");
	/* An explicit PS_TRANSPORT wins. */
	env_set("PS_TRANSPORT", "tcp");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "tcp");
	unsetenv("PS_TRANSPORT");
	env_set("DMLC_ENABLE_RDMA", "0");
	from_env_ok(&cfg);
	CHECK_STR(cfg.transport, "auto");
	env_clear();
}

static void test_options_env_partition_bytes(void)
{
	static const struct {
		const char *val;
		uint64_t want;
	} cases[] = {
		{ "4096", 4096 },
		{ "4K", 4096 },
		{ "4k", 4096 },
		{ "1M", 1ull << 20 },
		{ "2G", 2ull << 30 },
		{ "4MiB", 4ull << 20 },
		{ "3KB", 3ull << 10 },
		{ "0", 0 },
		{ "17179869183G", 17179869183ull << 30 }, /* 2^64 - 2^30 */
	};
	struct psched_cfg cfg;
	size_t i;

	fresh(&cfg);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		env_set("PS_PARTITION_BYTES", cases[i].val);
		from_env_ok(&cfg);
		if (cfg.partition_bytes != cases[i].want)
			test_fail_at(__FILE__, __LINE__,
				     "PS_PARTITION_BYTES=%s: got %llu, want "
				     "%llu",
				     cases[i].val,
				     (unsigned long long)cfg.partition_bytes,
				     (unsigned long long)cases[i].want);
	}
	env_clear();
}

static void test_options_env_partition_alias(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("BYTEPS_PARTITION_BYTES", "8K");
	from_env_ok(&cfg);
	CHECK_U64(cfg.partition_bytes, ==, 8192);
	/* The psched name wins when both are set. */
	env_set("PS_PARTITION_BYTES", "1M");
	from_env_ok(&cfg);
	CHECK_U64(cfg.partition_bytes, ==, 1ull << 20);
	env_clear();
}

static void test_options_env_other_sizes_and_timeouts(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("PS_MAX_TENSOR_BYTES", "1G");
	env_set("PS_CREDIT_BYTES", "16M");
	env_set("PS_CONNECT_TIMEOUT", "5");
	env_set("PS_REQUEST_TIMEOUT", "0.25");
	env_set("PS_SERVER_MODE", "async");
	from_env_ok(&cfg);
	CHECK_U64(cfg.max_tensor_bytes, ==, 1ull << 30);
	CHECK_U64(cfg.credit_bytes, ==, 16ull << 20);
	CHECK_EQ(cfg.connect_timeout_ms, 5000);
	CHECK_EQ(cfg.request_timeout_ms, 250);
	CHECK_STR(cfg.server_mode, "async");
	env_clear();
}

/* ---- flags --------------------------------------------------------- */

static void test_options_flags_win_over_env(void)
{
	struct psched_cfg cfg;
	char *argv[] = { arg("prog"), arg("--num-server"), arg("3"), NULL };
	int argc = 3;

	fresh(&cfg);
	env_set("DMLC_NUM_SERVER", "2");
	env_set("DMLC_NUM_WORKER", "5");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.num_server, 2);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, true), 0);
	CHECK_EQ(cfg.num_server, 3);
	CHECK_EQ(cfg.num_worker, 5); /* env value not named by a flag stays */
	CHECK_EQ(argc, 1);
	env_clear();
}

static void test_options_flags_both_forms(void)
{
	struct psched_cfg cfg;
	char *argv[] = {
		arg("prog"),
		arg("--role=server"),
		arg("--root-uri"),
		arg("sched.example"),
		arg("--root-port=7000"),
		arg("--num-server"),
		arg("6"),
		arg("--num-worker=7"),
		arg("--node-host"),
		arg("10.0.0.9"),
		arg("--interface=ib0"),
		arg("--port"),
		arg("6001"),
		arg("--verbose=1"),
		arg("--heartbeat-interval"),
		arg("0.5"),
		arg("--heartbeat-timeout=3"),
		arg("--connect-timeout"),
		arg("1.5"),
		arg("--request-timeout=9"),
		arg("--transport"),
		arg("ibverbs"),
		arg("--server-mode=async"),
		arg("--max-tensor-bytes"),
		arg("2G"),
		arg("--partition-bytes=4MiB"),
		arg("--credit-bytes"),
		arg("64K"),
		NULL,
	};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

	fresh(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, true), 0);
	CHECK_EQ(argc, 1);
	CHECK_STR(argv[0], "prog");
	CHECK(argv[1] == NULL);
	CHECK_EQ(cfg.role, PSCHED_ROLE_SERVER);
	CHECK_STR(cfg.root_uri, "sched.example");
	CHECK_EQ(cfg.root_port, 7000);
	CHECK_EQ(cfg.num_server, 6);
	CHECK_EQ(cfg.num_worker, 7);
	CHECK_STR(cfg.node_host, "10.0.0.9");
	CHECK_STR(cfg.interface, "ib0");
	CHECK_EQ(cfg.port, 6001);
	CHECK_EQ(cfg.verbose, 1);
	CHECK_EQ(cfg.heartbeat_interval_ms, 500);
	CHECK_EQ(cfg.heartbeat_timeout_ms, 3000);
	CHECK_EQ(cfg.connect_timeout_ms, 1500);
	CHECK_EQ(cfg.request_timeout_ms, 9000);
	CHECK_STR(cfg.transport, "rdma");
	CHECK_STR(cfg.server_mode, "async");
	CHECK_U64(cfg.max_tensor_bytes, ==, 2ull << 30);
	CHECK_U64(cfg.partition_bytes, ==, 4ull << 20);
	CHECK_U64(cfg.credit_bytes, ==, 64ull << 10);
}

static void test_options_flags_unknown_kept(void)
{
	struct psched_cfg cfg;
	char *argv[] = { arg("prog"), arg("--foo"),
			 arg("pos1"), arg("--num-worker"),
			 arg("5"),    arg("--bar=1"),
			 arg("-x"),   arg("--port=80"),
			 arg("pos2"), NULL };
	int argc = 9;

	fresh(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, false), 0);
	CHECK_EQ(cfg.num_worker, 5);
	CHECK_EQ(cfg.port, 80);
	/* Recognised flags (and their values) removed, the rest in order. */
	CHECK_EQ(argc, 6);
	CHECK_STR(argv[0], "prog");
	CHECK_STR(argv[1], "--foo");
	CHECK_STR(argv[2], "pos1");
	CHECK_STR(argv[3], "--bar=1");
	CHECK_STR(argv[4], "-x");
	CHECK_STR(argv[5], "pos2");
	CHECK(argv[6] == NULL);
}

static void test_options_flags_unknown_strict(void)
{
	struct psched_cfg cfg;
	char *argv[] = { arg("prog"), arg("--num-worker=2"),
			 arg("--frobnicate=1"), NULL };
	int argc = 3;

	fresh(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, true), -EINVAL);
	CHECK(strstr(psched_errmsg(), "--frobnicate") != NULL);
	/* A flag that only shares a prefix with a known one is unknown. */
	{
		char *argv2[] = { arg("prog"), arg("--num"), arg("2"), NULL };

		argc = 3;
		psched_cfg_init(&cfg);
		CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv2, true),
			 -EINVAL);
		CHECK(strstr(psched_errmsg(), "--num") != NULL);
	}
}

static void test_options_flags_help(void)
{
	struct psched_cfg cfg;
	char *argv[] = { arg("prog"), arg("--num-server=2"), arg("--help"),
			 NULL };
	char *argv2[] = { arg("prog"), arg("-h"), NULL };
	int argc = 3;

	fresh(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, true), 1);
	CHECK_EQ(cfg.num_server, 2);
	argc = 2;
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv2, false), 1);
}

static void test_options_flags_missing_value(void)
{
	struct psched_cfg cfg;
	char *argv[] = { arg("prog"), arg("--num-worker=2"),
			 arg("--num-server"), NULL };
	int argc = 3;

	fresh(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, false), -EINVAL);
	CHECK(strstr(psched_errmsg(), "--num-server") != NULL);
}

/* ---- bad values ---------------------------------------------------- */

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

		psched_cfg_init(&cfg);
		CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, false),
			 -EINVAL);
		argc = 2;
		psched_cfg_init(&cfg);
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

static void test_options_usage_lists_everything(void)
{
	char *text = NULL;
	size_t size = 0, i;
	FILE *f = open_memstream(&text, &size);

	CHECK(f != NULL);
	psched_cfg_usage(f);
	CHECK_EQ(fclose(f), 0);
	CHECK(text != NULL);
	for (i = 0; i < N_FLAGS; i++)
		if (!strstr(text, flag_names[i])) {
			free(text);
			test_fail_at(__FILE__, __LINE__,
				     "usage does not mention %s",
				     flag_names[i]);
		}
	for (i = 0; i < N_ENV; i++)
		if (!strstr(text, env_names[i])) {
			free(text);
			test_fail_at(__FILE__, __LINE__,
				     "usage does not mention %s", env_names[i]);
		}
	/* A few defaults are shown. */
	CHECK(strstr(text, "9091") != NULL);
	CHECK(strstr(text, "127.0.0.1") != NULL);
	free(text);
}

/* ---- autotune knobs ------------------------------------------------ */

static void test_options_autotune_env(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	CHECK_EQ(cfg.autotune, 0);
	CHECK_EQ(cfg.autotune_warmup_samples, 3);
	CHECK_EQ(cfg.autotune_steps_per_sample, 10);
	CHECK_EQ(cfg.autotune_max_samples, 20);
	CHECK(cfg.autotune_gp_noise == 0.0);
	CHECK(cfg.autotune_retune_threshold == 0.05);
	CHECK_U64(cfg.autotune_partition_min, ==, 4096);
	CHECK_U64(cfg.autotune_partition_max, ==, 64u << 20);
	env_set("PS_AUTOTUNE", "1");
	env_set("PS_AUTOTUNE_WARMUP_SAMPLES", "2");
	env_set("PS_AUTOTUNE_STEPS_PER_SAMPLE", "7");
	env_set("PS_AUTOTUNE_MAX_SAMPLES", "12");
	env_set("PS_AUTOTUNE_RETUNE_MAX_SAMPLES", "8");
	env_set("PS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.08");
	env_set("PS_AUTOTUNE_LOG_FILE", "/tmp/x.csv");
	env_set("PS_AUTOTUNE_RETUNE_THRESHOLD", "0.1");
	env_set("PS_AUTOTUNE_PARTITION_MAX", "1M");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.autotune, 1);
	CHECK_EQ(cfg.autotune_warmup_samples, 2);
	CHECK_EQ(cfg.autotune_steps_per_sample, 7);
	CHECK_EQ(cfg.autotune_max_samples, 12);
	CHECK_EQ(cfg.autotune_retune_max_samples, 8);
	CHECK(cfg.autotune_gp_noise == 0.08);
	CHECK_STR(cfg.autotune_log_file, "/tmp/x.csv");
	CHECK(cfg.autotune_retune_threshold == 0.1);
	CHECK_U64(cfg.autotune_partition_max, ==, 1u << 20);
	env_set("PS_AUTOTUNE", "off");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.autotune, 0);
	env_bad("PS_AUTOTUNE", "maybe");
	env_bad("PS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "-0.1");
	env_bad("PS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "nan");
	env_bad("PS_AUTOTUNE_RETUNE_THRESHOLD", "5%");
	env_bad("PS_AUTOTUNE_MAX_SAMPLES", "-1");
	env_clear();
}

/* A bare --autotune is a switch; --autotune=VALUE sets it. */
static void test_options_autotune_flag(void)
{
	struct psched_cfg cfg;
	char *argv1[] = { arg("prog"), arg("--autotune"), arg("--verbose"),
			  arg("1"), NULL };
	char *argv2[] = { arg("prog"), arg("--autotune=0"), NULL };
	char *argv3[] = { arg("prog"), arg("--autotune=2"), NULL };
	char *argv4[] = { arg("prog"), arg("--autotune-retune-threshold"),
			  arg("0.2"), NULL };
	char *argv5[] = { arg("prog"), arg("--autotune"), arg("0"), arg("rest"),
			  NULL };
	int argc;

	fresh(&cfg);
	argc = 4;
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv1, true), 0);
	CHECK_EQ(cfg.autotune, 1);
	CHECK_EQ(cfg.verbose, 1);
	argc = 2;
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv2, true), 0);
	CHECK_EQ(cfg.autotune, 0);
	argc = 2;
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv3, true), -EINVAL);
	CHECK(strstr(psched_errmsg(), "--autotune") != NULL);
	argc = 3;
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv4, true), 0);
	CHECK(cfg.autotune_retune_threshold == 0.2);
	argc = 4; /* a boolean word after the switch is its value */
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv5, false), 0);
	CHECK_EQ(cfg.autotune, 0);
	CHECK_EQ(argc, 2);
	CHECK_STR(argv5[1], "rest");
	flag_bad("--autotune-gaussian-process-noise", "x");
	flag_bad("--autotune-steps-per-sample", "ten");
}

/* Transport knobs: defaults (the values the RDMA and TCP transports used),
 * "unset" sentinels, environment, flags winning over it. */
static void test_options_transport_knob_defaults(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	CHECK_STR(cfg.job_token, "");
	CHECK_U64(cfg.socket_buf_bytes, ==, 4 << 20);
	CHECK_STR(cfg.rdma_device, "");
	CHECK_EQ(cfg.rdma_port, 1);
	CHECK_EQ(cfg.rdma_gid_index, -1);
	CHECK_EQ(cfg.rdma_recv_depth, 32);
	CHECK_EQ(cfg.rdma_send_depth, 32);
	CHECK_EQ(cfg.rdma_buf_bytes, 16384);
	CHECK_EQ(cfg.rdma_inline, 128);
	CHECK_EQ(cfg.rdma_cq_depth, 8192);
	CHECK_EQ(cfg.rdma_spin_us, -1); /* 20, or 0 on rxe/siw */
	CHECK_U64(cfg.rdma_mr_budget, ==, 1ull << 30);
	CHECK_EQ(cfg.rdma_test_fail_reg, 0);
}

static void test_options_transport_knobs_env(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("PS_JOB_TOKEN", "s3cret");
	env_set("PS_SOCKET_BUF_BYTES", "1M");
	env_set("PS_RDMA_DEVICE", "rxe0");
	env_set("PS_RDMA_PORT", "2");
	env_set("PS_RDMA_GID_INDEX", "0");
	env_set("PS_RDMA_RECV_DEPTH", "4096");
	env_set("PS_RDMA_SEND_DEPTH", "2");
	env_set("PS_RDMA_BUF_BYTES", "64K");
	env_set("PS_RDMA_INLINE", "0");
	env_set("PS_RDMA_CQ_DEPTH", "256");
	env_set("PS_RDMA_SPIN_US", "0");
	env_set("PS_RDMA_MR_BUDGET", "3M");
	env_set("PS_RDMA_TEST_FAIL_REG", "1");
	from_env_ok(&cfg);
	CHECK_STR(cfg.job_token, "s3cret");
	CHECK_U64(cfg.socket_buf_bytes, ==, 1 << 20);
	CHECK_STR(cfg.rdma_device, "rxe0");
	CHECK_EQ(cfg.rdma_port, 2);
	CHECK_EQ(cfg.rdma_gid_index, 0);
	CHECK_EQ(cfg.rdma_recv_depth, 4096);
	CHECK_EQ(cfg.rdma_send_depth, 2);
	CHECK_EQ(cfg.rdma_buf_bytes, 65536);
	CHECK_EQ(cfg.rdma_inline, 0);
	CHECK_EQ(cfg.rdma_cq_depth, 256);
	CHECK_EQ(cfg.rdma_spin_us, 0); /* set: kept on rxe too */
	CHECK_U64(cfg.rdma_mr_budget, ==, 3 << 20);
	CHECK_EQ(cfg.rdma_test_fail_reg, 1);
	env_clear();
}

static void test_options_transport_knobs_flags_win(void)
{
	struct psched_cfg cfg;
	char *argv[] = { arg("prog"),
			 arg("--job-token=flag"),
			 arg("--socket-buf-bytes"),
			 arg("0"),
			 arg("--rdma-device=mlx5_1"),
			 arg("--rdma-spin-us"),
			 arg("50"),
			 arg("--rdma-mr-budget=0"),
			 arg("--rdma-gid-index=3"),
			 NULL };
	int argc = 9;

	fresh(&cfg);
	env_set("PS_JOB_TOKEN", "env");
	env_set("PS_SOCKET_BUF_BYTES", "1M");
	env_set("PS_RDMA_DEVICE", "rxe0");
	env_set("PS_RDMA_SPIN_US", "7");
	env_set("PS_RDMA_MR_BUDGET", "2G");
	env_set("PS_RDMA_RECV_DEPTH", "64");
	from_env_ok(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, true), 0);
	CHECK_EQ(argc, 1);
	CHECK_STR(cfg.job_token, "flag");
	CHECK_U64(cfg.socket_buf_bytes, ==, 0);
	CHECK_STR(cfg.rdma_device, "mlx5_1");
	CHECK_EQ(cfg.rdma_spin_us, 50);
	CHECK_U64(cfg.rdma_mr_budget, ==, 0);
	CHECK_EQ(cfg.rdma_gid_index, 3);
	CHECK_EQ(cfg.rdma_recv_depth, 64); /* no flag: the variable's */
	env_clear();
}

/* Out of the ranges the RDMA transport enforced, or not a number: -EINVAL
 * naming the variable (env) or the flag. */
static void test_options_transport_knobs_bad(void)
{
	env_bad("PS_SOCKET_BUF_BYTES", "-1");
	env_bad("PS_SOCKET_BUF_BYTES", "2G");
	env_bad("PS_SOCKET_BUF_BYTES", "lots");
	env_bad("PS_RDMA_PORT", "0");
	env_bad("PS_RDMA_PORT", "256");
	env_bad("PS_RDMA_GID_INDEX", "65536");
	env_bad("PS_RDMA_GID_INDEX", "x");
	env_bad("PS_RDMA_RECV_DEPTH", "3");
	env_bad("PS_RDMA_RECV_DEPTH", "4097");
	env_bad("PS_RDMA_SEND_DEPTH", "1");
	env_bad("PS_RDMA_SEND_DEPTH", "5K");
	env_bad("PS_RDMA_BUF_BYTES", "1023");
	env_bad("PS_RDMA_BUF_BYTES", "2M");
	env_bad("PS_RDMA_INLINE", "4097");
	env_bad("PS_RDMA_CQ_DEPTH", "255");
	env_bad("PS_RDMA_CQ_DEPTH", "8M");
	env_bad("PS_RDMA_SPIN_US", "1000001");
	env_bad("PS_RDMA_SPIN_US", "-1");
	env_bad("PS_RDMA_MR_BUDGET", "1048577G");
	env_bad("PS_RDMA_MR_BUDGET", "1X");
	env_bad("PS_RDMA_TEST_FAIL_REG", "maybe");
	flag_bad("--socket-buf-bytes", "2G");
	flag_bad("--rdma-port", "0");
	flag_bad("--rdma-recv-depth", "1");
	flag_bad("--rdma-buf-bytes", "100");
	flag_bad("--rdma-spin-us", "2000000");
	flag_bad("--rdma-mr-budget", "-5");
	env_clear();
}

const struct test_case test_list[] = {
	{ "options_defaults", test_options_defaults },
	{ "options_empty_env_keeps_defaults",
	  test_options_empty_env_keeps_defaults },
	{ "options_role_names", test_options_role_names },
	{ "options_env_role", test_options_env_role },
	{ "options_env_cluster", test_options_env_cluster },
	{ "options_env_ports", test_options_env_ports },
	{ "options_env_heartbeat", test_options_env_heartbeat },
	{ "options_env_transport", test_options_env_transport },
	{ "options_env_enable_rdma", test_options_env_enable_rdma },
	{ "options_env_partition_bytes", test_options_env_partition_bytes },
	{ "options_env_partition_alias", test_options_env_partition_alias },
	{ "options_env_other_sizes_and_timeouts",
	  test_options_env_other_sizes_and_timeouts },
	{ "options_flags_win_over_env", test_options_flags_win_over_env },
	{ "options_flags_both_forms", test_options_flags_both_forms },
	{ "options_flags_unknown_kept", test_options_flags_unknown_kept },
	{ "options_flags_unknown_strict", test_options_flags_unknown_strict },
	{ "options_flags_help", test_options_flags_help },
	{ "options_flags_missing_value", test_options_flags_missing_value },
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
	{ "options_flag_bad_values", test_options_flag_bad_values },
	{ "options_flag_bad_range_names_flag",
	  test_options_flag_bad_range_names_flag },
	{ "options_usage_lists_everything",
	  test_options_usage_lists_everything },
	{ "options_autotune_env", test_options_autotune_env },
	{ "options_autotune_flag", test_options_autotune_flag },
	{ "options_transport_knob_defaults",
	  test_options_transport_knob_defaults },
	{ "options_transport_knobs_env", test_options_transport_knobs_env },
	{ "options_transport_knobs_flags_win",
	  test_options_transport_knobs_flags_win },
	{ "options_transport_knobs_bad", test_options_transport_knobs_bad },
	{ NULL, NULL },
};
