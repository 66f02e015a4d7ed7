// SPDX-License-Identifier: MIT
/*
 * Node options (include/psched.h psched_cfg_*): defaults, every DMLC_* /
 * PS_* variable, flags and their precedence, argv handling and --help
 * text (test_options_bad.c: rejections; test_options_knobs.c: the
 * transport knobs).
 */
#include "options_util.h"

static void test_options_defaults(void)
{
	struct psched_cfg cfg;

	env_clear();
	memset(&cfg, 0xff, sizeof(cfg)); /* init must set every field */
	psd_cfg_defaults(&cfg);
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
	CHECK_EQ(cfg.max_steps_ahead, 64);
	CHECK_U64(cfg.max_parked_bytes, ==, 0);
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
	env_set("PS_MAX_STEPS_AHEAD", "3");
	env_set("PS_MAX_PARKED_BYTES", "64M");
	from_env_ok(&cfg);
	CHECK_EQ(cfg.max_steps_ahead, 3);
	CHECK_U64(cfg.max_parked_bytes, ==, 64ull << 20);
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
		psd_cfg_defaults(&cfg);
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

static char *usage_text(int role) /* -1: every option */
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return NULL;
	if (role < 0)
		psched_cfg_usage(f);
	else
		psched_cfg_usage_role(f, (enum psched_role)role);
	fclose(f);
	return text;
}

/* Each program's --help lists its role's options: every option is listed
 * for some role (--role only in the full list), and the role-specific
 * ones only where they apply. */
static void test_options_usage_per_role(void)
{
	char *all = usage_text(-1), *r[3], *line, *save = NULL, flag[64];
	int i, found;

	CHECK(all != NULL);
	for (i = 0; i < 3; i++) {
		r[i] = usage_text(i);
		CHECK(r[i] != NULL);
		CHECK(strstr(r[i], "  --root-port ") != NULL);
		CHECK(strstr(r[i], "  --role ") == NULL);
	}
	for (line = strtok_r(all, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "  --%63s", flag) != 1)
			continue;
		found = 0;
		for (i = 0; i < 3; i++) {
			char pat[80];

			snprintf(pat, sizeof(pat), "  --%s ", flag);
			found += strstr(r[i], pat) != NULL;
		}
		if (!found && strcmp(flag, "role"))
			test_fail_at(__FILE__, __LINE__,
				     "--%s is in no program's --help", flag);
	}
	CHECK(strstr(r[PSCHED_ROLE_SCHEDULER], "  --autotune ") != NULL);
	CHECK(strstr(r[PSCHED_ROLE_SERVER], "  --autotune ") == NULL);
	CHECK(strstr(r[PSCHED_ROLE_WORKER], "  --config-cycle ") == NULL);
	CHECK(strstr(r[PSCHED_ROLE_SERVER], "  --server-mode ") != NULL);
	CHECK(strstr(r[PSCHED_ROLE_SCHEDULER], "  --rdma-device ") == NULL);
	CHECK(strstr(r[PSCHED_ROLE_WORKER], "  --rdma-device ") != NULL);
	for (i = 0; i < 3; i++)
		free(r[i]);
	free(all);
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
	{ "options_usage_lists_everything",
	  test_options_usage_lists_everything },
	{ "options_usage_per_role", test_options_usage_per_role },
	{ "options_autotune_env", test_options_autotune_env },
	{ "options_autotune_flag", test_options_autotune_flag },
	{ NULL, NULL },
};
