// SPDX-License-Identifier: MIT
/*
 * Node options: the transport knobs (socket buffers, RDMA, job token):
 * defaults, environment, flags winning, bad values.
 */
#include "options_util.h"

/* Transport knobs: defaults (the values the RDMA and TCP transports used),
 * "unset" sentinels, environment, flags winning over it. */
static void test_options_transport_knob_defaults(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	CHECK_STR(cfg.job_token, "");
	CHECK_U64(cfg.socket_buf_bytes, ==, 0);
	CHECK_EQ(cfg.poll_us, 0);
	CHECK_EQ(cfg.caller_rx, 1);
	CHECK_EQ(cfg.sender_nice, 0);
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
	CHECK_EQ(cfg.rdma_lane_min, -1); /* 256K on rxe, else 0 */
	CHECK_EQ(cfg.rdma_test_fail_reg, 0);
}

static void test_options_transport_knobs_env(void)
{
	struct psched_cfg cfg;

	fresh(&cfg);
	env_set("PS_JOB_TOKEN", "s3cret");
	env_set("PS_SOCKET_BUF_BYTES", "1M");
	env_set("PS_POLL_US", "1000");
	env_set("PS_CALLER_RX", "0");
	env_set("PS_SENDER_NICE", "-20");
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
	env_set("PS_RDMA_LANE_MIN", "1M");
	env_set("PS_RDMA_TEST_FAIL_REG", "1");
	from_env_ok(&cfg);
	CHECK_STR(cfg.job_token, "s3cret");
	CHECK_U64(cfg.socket_buf_bytes, ==, 1 << 20);
	CHECK_EQ(cfg.poll_us, 1000);
	CHECK_EQ(cfg.caller_rx, 0);
	CHECK_EQ(cfg.sender_nice, -20);
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
	CHECK_EQ(cfg.rdma_lane_min, 1 << 20);
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
			 arg("--rdma-lane-min=0"),
			 arg("--sender-nice=19"),
			 NULL };
	int argc = 11;

	fresh(&cfg);
	env_set("PS_JOB_TOKEN", "env");
	env_set("PS_SOCKET_BUF_BYTES", "1M");
	env_set("PS_RDMA_DEVICE", "rxe0");
	env_set("PS_RDMA_SPIN_US", "7");
	env_set("PS_RDMA_MR_BUDGET", "2G");
	env_set("PS_RDMA_RECV_DEPTH", "64");
	env_set("PS_RDMA_LANE_MIN", "64K");
	env_set("PS_SENDER_NICE", "-5");
	from_env_ok(&cfg);
	CHECK_EQ(psched_cfg_parse_args(&cfg, &argc, argv, true), 0);
	CHECK_EQ(argc, 1);
	CHECK_STR(cfg.job_token, "flag");
	CHECK_U64(cfg.socket_buf_bytes, ==, 0);
	CHECK_STR(cfg.rdma_device, "mlx5_1");
	CHECK_EQ(cfg.rdma_spin_us, 50);
	CHECK_U64(cfg.rdma_mr_budget, ==, 0);
	CHECK_EQ(cfg.rdma_gid_index, 3);
	CHECK_EQ(cfg.rdma_lane_min, 0); /* given: no lane, even on rxe */
	CHECK_EQ(cfg.sender_nice, 19);
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
	env_bad("PS_POLL_US", "1001");
	env_bad("PS_POLL_US", "-1");
	env_bad("PS_POLL_US", "fast");
	env_bad("PS_SENDER_NICE", "-21");
	env_bad("PS_SENDER_NICE", "20");
	env_bad("PS_SENDER_NICE", "high");
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
	env_bad("PS_RDMA_LANE_MIN", "-1");
	env_bad("PS_RDMA_LANE_MIN", "2G");
	env_bad("PS_RDMA_LANE_MIN", "half");
	env_bad("PS_RDMA_TEST_FAIL_REG", "maybe");
	env_bad("PS_CALLER_RX", "2");
	flag_bad("--socket-buf-bytes", "2G");
	flag_bad("--poll-us", "5000");
	flag_bad("--rdma-port", "0");
	flag_bad("--rdma-recv-depth", "1");
	flag_bad("--rdma-buf-bytes", "100");
	flag_bad("--rdma-spin-us", "2000000");
	flag_bad("--rdma-mr-budget", "-5");
	env_clear();
}

const struct test_case test_list[] = {
	{ "options_transport_knob_defaults",
	  test_options_transport_knob_defaults },
	{ "options_transport_knobs_env", test_options_transport_knobs_env },
	{ "options_transport_knobs_flags_win",
	  test_options_transport_knobs_flags_win },
	{ "options_transport_knobs_bad", test_options_transport_knobs_bad },
	{ NULL, NULL },
};
