/* SPDX-License-Identifier: MIT */
/* Helpers of the option tests (test_options*.c). */
#ifndef PSCHED_TESTS_UNIT_OPTIONS_UTIL_H
#define PSCHED_TESTS_UNIT_OPTIONS_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "cfg.h"
#include "../../common/internal.h"
#include "psched.h"

/* Every variable psched reads; cleared before and after each test. */
static const char *const env_names[] __attribute__((unused)) = {
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
	"PS_MAX_STEPS_AHEAD",
	"PS_MAX_PARKED_BYTES",
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
	"PS_JOB_TOKEN_FILE",
	"PS_ALLOW_UNAUTHENTICATED",
	"PS_AUTH_TIMEOUT",
	"PS_PREAUTH_MAX_FRAME",
	"PS_MAX_PENDING_AUTH",
	"PS_SOCKET_BUF_BYTES",
	"PS_POLL_US",
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
	"PS_RDMA_LANE_MIN",
	"PS_RDMA_TEST_FAIL_REG",
};

static const char *const flag_names[] __attribute__((unused)) = {
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
static inline char *arg(const char *s)
{
	return (char *)(uintptr_t)s;
}

static inline void env_clear(void)
{
	size_t i;

	for (i = 0; i < N_ENV; i++)
		unsetenv(env_names[i]);
}

static inline void env_set(const char *name, const char *val)
{
	CHECK_EQ(setenv(name, val, 1), 0);
}

/* Start of every test: no stray variable from the caller or a failed
 * earlier test, and a fresh config. */
static inline void fresh(struct psched_cfg *cfg)
{
	env_clear();
	psd_cfg_defaults(cfg);
	psd_set_errmsg(0, "%s", "");
}

/* Config from defaults + environment, expecting success. */
static inline void from_env_ok_at(const char *file, int line,
				  struct psched_cfg *cfg)
{
	int ret;

	psd_cfg_defaults(cfg);
	ret = psched_cfg_from_env(cfg);
	if (ret)
		test_fail_at(file, line, "psched_cfg_from_env: %d (%s)", ret,
			     psched_errmsg());
}

#define from_env_ok(cfg) from_env_ok_at(__FILE__, __LINE__, (cfg))

/* One variable with a bad value: -EINVAL and a message naming it. */
static inline void env_bad_at(const char *file, int line, const char *name,
			      const char *val)
{
	struct psched_cfg cfg;
	int ret;

	env_clear();
	env_set(name, val);
	psd_cfg_defaults(&cfg);
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
static inline int env_try(const char *name, const char *val)
{
	struct psched_cfg cfg;
	int ret;

	env_clear();
	env_set(name, val);
	psd_cfg_defaults(&cfg);
	ret = psched_cfg_from_env(&cfg);
	unsetenv(name);
	return ret;
}

/* One flag with a bad value, in both forms: -EINVAL naming the flag. */
static inline void flag_bad_at(const char *file, int line, const char *flag,
			       const char *val)
{
	struct psched_cfg cfg;
	char joined[512];
	char *argv1[] = { arg("prog"), arg(flag), arg(val), NULL };
	char *argv2[] = { arg("prog"), joined, NULL };
	int argc, ret;

	snprintf(joined, sizeof(joined), "%s=%s", flag, val);
	psd_cfg_defaults(&cfg);
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

	psd_cfg_defaults(&cfg);
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

#endif
