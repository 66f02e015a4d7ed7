// SPDX-License-Identifier: MIT
/*
 * Node options: one table drives defaults, environment variables,
 * command-line flags and --help, so the three never disagree.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport/transport.h"

enum opt_type {
	OPT_STR,
	OPT_UINT,
	OPT_INT,
	OPT_BYTES,   /* uint64 with optional K/M/G suffix (binary) */
	OPT_SECONDS, /* seconds (decimal allowed) stored as ms */
	OPT_ROLE,
	OPT_TRANSPORT,
	OPT_BOOL,   /* int 0/1; a bare --flag means 1 */
	OPT_DOUBLE, /* finite, >= 0 */
	/* Integer in [min, max], K/M/G suffix allowed, stored in a field of
	 * size bytes (unsigned / int or uint64_t). */
	OPT_RANGE,
	/* OPT_RANGE into an int, or -1 ("unset") for an empty value. */
	OPT_RANGE_UNSET,
};

struct opt {
	const char *flag;
	const char *env[3];
	enum opt_type type;
	size_t off;
	size_t size; /* OPT_STR buffer size */
	const char *def;
	const char *help;
};

#define OFF(f) offsetof(struct psched_cfg, f)
#define SZ(f)  sizeof(((struct psched_cfg *)0)->f)

static const struct opt opts[] = {
	{ "role",
	  { "DMLC_ROLE" },
	  OPT_ROLE,
	  OFF(role),
	  0,
	  "worker",
	  "scheduler | server | worker" },
	{ "root-uri",
	  { "DMLC_PS_ROOT_URI" },
	  OPT_STR,
	  OFF(root_uri),
	  SZ(root_uri),
	  "127.0.0.1",
	  "scheduler host name or address" },
	{ "root-port",
	  { "DMLC_PS_ROOT_PORT" },
	  OPT_UINT,
	  OFF(root_port),
	  0,
	  "9091",
	  "scheduler port (scheduler: 0 picks a free one)" },
	{ "num-server",
	  { "DMLC_NUM_SERVER" },
	  OPT_UINT,
	  OFF(num_server),
	  0,
	  "1",
	  "number of servers in the job" },
	{ "num-worker",
	  { "DMLC_NUM_WORKER" },
	  OPT_UINT,
	  OFF(num_worker),
	  0,
	  "1",
	  "number of workers in the job" },
	{ "node-host",
	  { "DMLC_NODE_HOST" },
	  OPT_STR,
	  OFF(node_host),
	  SZ(node_host),
	  "",
	  "address other nodes dial for this one (default: the local "
	  "address of the connection to the scheduler)" },
	{ "interface",
	  { "DMLC_INTERFACE" },
	  OPT_STR,
	  OFF(interface),
	  SZ(interface),
	  "",
	  "take node-host from this network interface" },
	{ "port",
	  { "DMLC_PORT", "PORT" },
	  OPT_UINT,
	  OFF(port),
	  0,
	  "0",
	  "port this node listens on (0 = any free port)" },
	{ "verbose",
	  { "PS_VERBOSE" },
	  OPT_INT,
	  OFF(verbose),
	  0,
	  "0",
	  "log level: 0 warnings, 1 info, 2 debug" },
	{ "heartbeat-interval",
	  { "PS_HEARTBEAT_INTERVAL" },
	  OPT_SECONDS,
	  OFF(heartbeat_interval_ms),
	  0,
	  "1",
	  "seconds between heartbeats" },
	{ "heartbeat-timeout",
	  { "PS_HEARTBEAT_TIMEOUT" },
	  OPT_SECONDS,
	  OFF(heartbeat_timeout_ms),
	  0,
	  "10",
	  "seconds of silence before a node is declared dead" },
	{ "connect-timeout",
	  { "PS_CONNECT_TIMEOUT" },
	  OPT_SECONDS,
	  OFF(connect_timeout_ms),
	  0,
	  "60",
	  "seconds to wait for the whole cluster to come up" },
	{ "request-timeout",
	  { "PS_REQUEST_TIMEOUT" },
	  OPT_SECONDS,
	  OFF(request_timeout_ms),
	  0,
	  "120",
	  "default seconds a push/pull/barrier may take" },
	{ "transport",
	  { "PS_TRANSPORT" },
	  OPT_TRANSPORT,
	  OFF(transport),
	  SZ(transport),
	  "auto",
	  "auto | tcp | shm (processes of one host) | rdma (DMLC_ENABLE_RDMA=1 "
	  "also selects rdma) | loop (in-process, for tests)" },
	{ "server-mode",
	  { "PS_SERVER_MODE" },
	  OPT_STR,
	  OFF(server_mode),
	  SZ(server_mode),
	  "sync",
	  "sync (sum W pushes per step) | async (apply each push)" },
	{ "max-tensor-bytes",
	  { "PS_MAX_TENSOR_BYTES" },
	  OPT_BYTES,
	  OFF(max_tensor_bytes),
	  0,
	  "4G",
	  "largest tensor a server accepts (bytes, K/M/G suffix)" },
	{ "max-steps-ahead",
	  { "PS_MAX_STEPS_AHEAD" },
	  OPT_UINT,
	  OFF(max_steps_ahead),
	  0,
	  "64",
	  "server: a push may be at most this many steps beyond its key's "
	  "open step (held until that step opens); further ones are refused" },
	{ "max-parked-bytes",
	  { "PS_MAX_PARKED_BYTES" },
	  OPT_BYTES,
	  OFF(max_parked_bytes),
	  0,
	  "0",
	  "server: bytes of early pushes held for later steps; beyond, a push "
	  "is refused (0 = twice the bytes stored, at least 256M)" },
	{ "partition-bytes",
	  { "PS_PARTITION_BYTES", "BYTEPS_PARTITION_BYTES" },
	  OPT_BYTES,
	  OFF(partition_bytes),
	  0,
	  "0",
	  "bytes per transfer chunk (0 = whole server range)" },
	{ "credit-bytes",
	  { "PS_CREDIT_BYTES" },
	  OPT_BYTES,
	  OFF(credit_bytes),
	  0,
	  "0",
	  "bytes in flight per worker (0 = unlimited)" },
	{ "scheduling",
	  { "PS_SCHEDULING" },
	  OPT_STR,
	  OFF(scheduling),
	  SZ(scheduling),
	  "priority",
	  "priority (priority queue + credit + partitions) | fifo "
	  "(arrival order, unlimited credit, no partitioning: the baseline)" },
	{ "config-cycle",
	  { "PS_CONFIG_CYCLE" },
	  OPT_STR,
	  OFF(config_cycle),
	  SZ(config_cycle),
	  "",
	  "scheduler: PART:CREDIT[,PART:CREDIT...] configs switched to in "
	  "turn, one every --config-interval (bytes, K/M/G)" },
	{ "config-interval",
	  { "PS_CONFIG_INTERVAL" },
	  OPT_SECONDS,
	  OFF(config_interval_ms),
	  0,
	  "1",
	  "scheduler: seconds between --config-cycle switches" },
	{ "autotune",
	  { "PS_AUTOTUNE" },
	  OPT_BOOL,
	  OFF(autotune),
	  0,
	  "0",
	  "scheduler: tune partition and credit online (1|0; a bare "
	  "--autotune means 1); a non-zero PS_PARTITION_BYTES or "
	  "PS_CREDIT_BYTES given to the scheduler fixes that knob" },
	{ "autotune-warmup-samples",
	  { "PS_AUTOTUNE_WARMUP_SAMPLES" },
	  OPT_UINT,
	  OFF(autotune_warmup_samples),
	  0,
	  "3",
	  "scheduler: samples discarded before tuning starts" },
	{ "autotune-steps-per-sample",
	  { "PS_AUTOTUNE_STEPS_PER_SAMPLE" },
	  OPT_UINT,
	  OFF(autotune_steps_per_sample),
	  0,
	  "10",
	  "scheduler: worker reports per sample (their median is the "
	  "sample)" },
	{ "autotune-max-samples",
	  { "PS_AUTOTUNE_MAX_SAMPLES" },
	  OPT_UINT,
	  OFF(autotune_max_samples),
	  0,
	  "20",
	  "scheduler: samples per search before the best config is locked "
	  "in" },
	{ "autotune-retune-max-samples",
	  { "PS_AUTOTUNE_RETUNE_MAX_SAMPLES" },
	  OPT_UINT,
	  OFF(autotune_retune_max_samples),
	  0,
	  "0",
	  "scheduler: samples per reopened search, the drift samples "
	  "included (0 = --autotune-max-samples)" },
	{ "autotune-gaussian-process-noise",
	  { "PS_AUTOTUNE_GAUSSIAN_PROCESS_NOISE" },
	  OPT_DOUBLE,
	  OFF(autotune_gp_noise),
	  0,
	  "0",
	  "scheduler: sd of a sample relative to its score (0 = learn it)" },
	{ "autotune-log-file",
	  { "PS_AUTOTUNE_LOG_FILE" },
	  OPT_STR,
	  OFF(autotune_log_file),
	  SZ(autotune_log_file),
	  "",
	  "scheduler: CSV log of the tuner, one row per sample" },
	{ "autotune-retune-threshold",
	  { "PS_AUTOTUNE_RETUNE_THRESHOLD" },
	  OPT_DOUBLE,
	  OFF(autotune_retune_threshold),
	  0,
	  "0.05",
	  "scheduler: relative score change that, held for 3 samples, "
	  "reopens the search" },
	{ "autotune-partition-min",
	  { "PS_AUTOTUNE_PARTITION_MIN" },
	  OPT_BYTES,
	  OFF(autotune_partition_min),
	  0,
	  "4K",
	  "scheduler: smallest partition searched (power of two >= 4K)" },
	{ "autotune-partition-max",
	  { "PS_AUTOTUNE_PARTITION_MAX" },
	  OPT_BYTES,
	  OFF(autotune_partition_max),
	  0,
	  "64M",
	  "scheduler: largest partition searched (power of two)" },
	{ "autotune-seed",
	  { "PS_AUTOTUNE_SEED" },
	  OPT_BYTES,
	  OFF(autotune_seed),
	  0,
	  "0",
	  "scheduler: seed of the tuner's random design" },
	{ "autotune-conditions",
	  { "PS_AUTOTUNE_CONDITIONS" },
	  OPT_BOOL,
	  OFF(autotune_conditions),
	  0,
	  "0",
	  "scheduler: the workers' measured link bandwidth, compute time "
	  "and the worker count are inputs of the tuner's model (1|0)" },
	{ "job-token",
	  { "PS_JOB_TOKEN" },
	  OPT_STR,
	  OFF(job_token),
	  SZ(job_token),
	  "",
	  "shared secret of the job, the same on every node: nodes and "
	  "connections that cannot prove they know it are refused (prefer "
	  "the variable: flags are visible in ps)" },
	{ "job-token-file",
	  { "PS_JOB_TOKEN_FILE" },
	  OPT_STR,
	  OFF(job_token_file),
	  SZ(job_token_file),
	  "",
	  "file holding the job's secret (a trailing newline is dropped; "
	  "refused if others may write it)" },
	{ "allow-unauthenticated",
	  { "PS_ALLOW_UNAUTHENTICATED" },
	  OPT_BOOL,
	  OFF(allow_unauthenticated),
	  0,
	  "0",
	  "run without a job secret: anyone who reaches the ports can join "
	  "the job and change its tensors" },
	{ "auth-timeout",
	  { "PS_AUTH_TIMEOUT" },
	  OPT_SECONDS,
	  OFF(auth_timeout_ms),
	  0,
	  "5",
	  "seconds an accepted connection has to authenticate" },
	{ "preauth-max-frame",
	  { "PS_PREAUTH_MAX_FRAME" },
	  OPT_RANGE,
	  OFF(preauth_max_frame),
	  SZ(preauth_max_frame),
	  "4K",
	  "largest control message taken before authentication" },
	{ "max-pending-auth",
	  { "PS_MAX_PENDING_AUTH" },
	  OPT_RANGE,
	  OFF(max_pending_auth),
	  SZ(max_pending_auth),
	  "128",
	  "connections a listener holds while they authenticate; more wait "
	  "in the kernel's backlog" },
	{ "socket-buf-bytes",
	  { "PS_SOCKET_BUF_BYTES" },
	  OPT_RANGE,
	  OFF(socket_buf_bytes),
	  SZ(socket_buf_bytes),
	  "4M",
	  "tcp: socket send and receive buffers (0 = the kernel's)" },
	{ "rdma-device",
	  { "PS_RDMA_DEVICE" },
	  OPT_STR,
	  OFF(rdma_device),
	  SZ(rdma_device),
	  "",
	  "rdma: device name (mlx5_0, rxe0; empty = any)" },
	{ "rdma-port",
	  { "PS_RDMA_PORT" },
	  OPT_RANGE,
	  OFF(rdma_port),
	  SZ(rdma_port),
	  "1",
	  "rdma: device port (1..255), checked by auto" },
	{ "rdma-gid-index",
	  { "PS_RDMA_GID_INDEX" },
	  OPT_RANGE_UNSET,
	  OFF(rdma_gid_index),
	  SZ(rdma_gid_index),
	  "",
	  "rdma: auto also requires this GID index (0..65535; empty = "
	  "unset)" },
	{ "rdma-recv-depth",
	  { "PS_RDMA_RECV_DEPTH" },
	  OPT_RANGE,
	  OFF(rdma_recv_depth),
	  SZ(rdma_recv_depth),
	  "32",
	  "rdma: pre-posted receive buffers per connection (4..4096)" },
	{ "rdma-send-depth",
	  { "PS_RDMA_SEND_DEPTH" },
	  OPT_RANGE,
	  OFF(rdma_send_depth),
	  SZ(rdma_send_depth),
	  "32",
	  "rdma: send buffers per connection (2..4096)" },
	{ "rdma-buf-bytes",
	  { "PS_RDMA_BUF_BYTES" },
	  OPT_RANGE,
	  OFF(rdma_buf_bytes),
	  SZ(rdma_buf_bytes),
	  "16K",
	  "rdma: size of each send/receive buffer (1K..1M; same on every "
	  "node)" },
	{ "rdma-inline",
	  { "PS_RDMA_INLINE" },
	  OPT_RANGE,
	  OFF(rdma_inline),
	  SZ(rdma_inline),
	  "128",
	  "rdma: inline data size asked for (0..4096)" },
	{ "rdma-cq-depth",
	  { "PS_RDMA_CQ_DEPTH" },
	  OPT_RANGE,
	  OFF(rdma_cq_depth),
	  SZ(rdma_cq_depth),
	  "8192",
	  "rdma: entries of the shared completion queue (256..4M)" },
	{ "rdma-spin-us",
	  { "PS_RDMA_SPIN_US" },
	  OPT_RANGE_UNSET,
	  OFF(rdma_spin_us),
	  SZ(rdma_spin_us),
	  "",
	  "rdma: microseconds to busy-poll the CQ before sleeping "
	  "(0..1000000; empty = 20, 0 on rxe/siw)" },
	{ "rdma-mr-budget",
	  { "PS_RDMA_MR_BUDGET" },
	  OPT_RANGE,
	  OFF(rdma_mr_budget),
	  SZ(rdma_mr_budget),
	  "1G",
	  "rdma: bytes the registration cache keeps registered (0 = "
	  "register per message)" },
	{ "rdma-test-fail-reg",
	  { "PS_RDMA_TEST_FAIL_REG" },
	  OPT_BOOL,
	  OFF(rdma_test_fail_reg),
	  0,
	  "0",
	  "rdma test hook: every payload registration fails (1|0)" },
	{ "gpu-stage-bytes",
	  { "PS_GPU_STAGE_BYTES" },
	  OPT_RANGE,
	  OFF(gpu_stage_bytes),
	  SZ(gpu_stage_bytes),
	  "4M",
	  "gpu: bytes of one pinned staging slot (4K..1G)" },
	{ "gpu-stage-bufs",
	  { "PS_GPU_STAGE_BUFS" },
	  OPT_RANGE,
	  OFF(gpu_stage_bufs),
	  SZ(gpu_stage_bufs),
	  "8",
	  "gpu: pinned staging slots per worker (1..64); a chunk takes a "
	  "run of them" },
	{ "gpu-streams",
	  { "PS_GPU_STREAMS" },
	  OPT_RANGE,
	  OFF(gpu_streams),
	  SZ(gpu_streams),
	  "2",
	  "gpu: CUDA streams for staging copies (1..16)" },
	{ "server-gpu-sum",
	  { "PS_SERVER_GPU_SUM" },
	  OPT_BOOL,
	  OFF(server_gpu_sum),
	  0,
	  "0",
	  "server: sum float32/float16 pushes on CUDA device 0 (1|0)" },
	{ "gpu-direct",
	  { "PS_GPU_DIRECT" },
	  OPT_STR,
	  OFF(gpu_direct),
	  SZ(gpu_direct),
	  "auto",
	  "gpu: GPUDirect RDMA for device buffers: auto (when the transport "
	  "is rdma and the probe succeeds), 0 (always stage), 1 (require "
	  "it: device buffers refused otherwise)" },
};

/* Ranges of the OPT_RANGE* options (the ones the RDMA transport enforced when
 * it read PS_RDMA_* itself). */
static const struct opt_range {
	size_t off;
	uint64_t min;
	uint64_t max;
} opt_ranges[] = {
	{ OFF(socket_buf_bytes), 0, 1ull << 30 },
	{ OFF(preauth_max_frame), 256, 64u << 10 },
	{ OFF(max_pending_auth), 1, 65536 },
	{ OFF(rdma_port), 1, 255 },
	{ OFF(rdma_gid_index), 0, 65535 },
	{ OFF(rdma_recv_depth), 4, 4096 },
	{ OFF(rdma_send_depth), 2, 4096 },
	{ OFF(rdma_buf_bytes), 1024, 1u << 20 },
	{ OFF(rdma_inline), 0, 4096 },
	{ OFF(rdma_cq_depth), 256, 1u << 22 },
	{ OFF(rdma_spin_us), 0, 1000000 },
	{ OFF(rdma_mr_budget), 0, 1ull << 50 },
	{ OFF(gpu_stage_bytes), 4096, 1ull << 30 },
	{ OFF(gpu_stage_bufs), 1, 64 },
	{ OFF(gpu_streams), 1, 16 },
};

const char *psched_role_name(enum psched_role role)
{
	switch (role) {
	case PSCHED_ROLE_SCHEDULER:
		return "scheduler";
	case PSCHED_ROLE_SERVER:
		return "server";
	default:
		return "worker";
	}
}

static int opt_parse_u64(const char *s, bool bytes, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || *s == '-' || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10); /* decimal, as ps-lite's atoi */
	if (errno || end == s)
		return -EINVAL;
	if (bytes && *end) {
		unsigned shift = 0;

		switch (toupper((unsigned char)*end)) {
		case 'K':
			shift = 10;
			break;
		case 'M':
			shift = 20;
			break;
		case 'G':
			shift = 30;
			break;
		default:
			return -EINVAL;
		}
		end++;
		if (*end == 'i') /* K, KB, KiB */
			end++;
		if (*end == 'B')
			end++;
		if (v > (~0ull >> shift))
			return -EINVAL;
		v <<= shift;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int psched_parse_bytes(const char *s, uint64_t *out)
{
	return s && out ? opt_parse_u64(s, true, out) : -EINVAL;
}

/* "PART:CREDIT[,PART:CREDIT...]", each a byte count. */
static bool opt_cycle_valid(const char *val)
{
	char buf[256], *save = NULL, *tok, *colon;
	uint64_t u;

	if (!*val)
		return true;
	snprintf(buf, sizeof(buf), "%s", val);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		colon = strchr(tok, ':');
		if (!colon)
			return false;
		*colon = '\0';
		if (opt_parse_u64(tok, true, &u) ||
		    opt_parse_u64(colon + 1, true, &u))
			return false;
	}
	return true;
}

static int opt_set_range(const struct opt *o, char *field, const char *val)
{
	const struct opt_range *r = NULL;
	uint64_t u;
	size_t i;

	for (i = 0; i < PSD_ARRAY_SIZE(opt_ranges); i++)
		if (opt_ranges[i].off == o->off)
			r = &opt_ranges[i];
	if (!r)
		return -EINVAL; /* an OPT_RANGE option without a range */
	if (o->type == OPT_RANGE_UNSET && !*val) {
		*(int *)(void *)field = -1;
		return 0;
	}
	if (opt_parse_u64(val, true, &u) || u < r->min || u > r->max)
		return -EINVAL;
	if (o->size == sizeof(uint64_t))
		*(uint64_t *)(void *)field = u;
	else if (o->type == OPT_RANGE_UNSET)
		*(int *)(void *)field = (int)u;
	else
		*(unsigned *)(void *)field = (unsigned)u;
	return 0;
}

static int opt_set(const struct opt *o, struct psched_cfg *cfg, const char *val)
{
	char *field = (char *)cfg + o->off;
	uint64_t u;
	double d;
	char *end;

	switch (o->type) {
	case OPT_STR:
	case OPT_TRANSPORT:
		if (strlen(val) >= o->size)
			return -EINVAL;
		if (o->type == OPT_TRANSPORT && !strcmp(val, "ibverbs"))
			val = "rdma";
		if (o->type == OPT_TRANSPORT && strcmp(val, "auto") &&
		    !psd_transport_is_known(val))
			return -EINVAL;
		if (o->off == OFF(server_mode) && strcmp(val, "sync") &&
		    strcmp(val, "async"))
			return -EINVAL;
		if (o->off == OFF(scheduling) && strcmp(val, "priority") &&
		    strcmp(val, "fifo"))
			return -EINVAL;
		if (o->off == OFF(config_cycle) && !opt_cycle_valid(val))
			return -EINVAL;
		if (o->off == OFF(gpu_direct) && strcmp(val, "auto") &&
		    strcmp(val, "0") && strcmp(val, "1"))
			return -EINVAL;
		strcpy(field, val);
		return 0;
	case OPT_ROLE:
		if (!strcmp(val, "scheduler"))
			cfg->role = PSCHED_ROLE_SCHEDULER;
		else if (!strcmp(val, "server"))
			cfg->role = PSCHED_ROLE_SERVER;
		else if (!strcmp(val, "worker"))
			cfg->role = PSCHED_ROLE_WORKER;
		else
			return -EINVAL;
		return 0;
	case OPT_INT:
		errno = 0;
		d = (double)strtol(val, &end, 10);
		if (errno || !*val || *end || d < -1000 || d > 1000)
			return -EINVAL;
		*(int *)(void *)field = (int)d;
		return 0;
	case OPT_UINT:
		if (opt_parse_u64(val, false, &u) || u > 0xffffffffu)
			return -EINVAL;
		if ((o->off == OFF(port) || o->off == OFF(root_port)) &&
		    u > 65535)
			return -EINVAL;
		if ((o->off == OFF(num_server) || o->off == OFF(num_worker)) &&
		    u == 0)
			return -EINVAL;
		*(unsigned *)(void *)field = (unsigned)u;
		return 0;
	case OPT_BYTES:
		if (opt_parse_u64(val, true, &u))
			return -EINVAL;
		*(uint64_t *)(void *)field = u;
		return 0;
	case OPT_SECONDS:
		errno = 0;
		d = strtod(val, &end);
		if (errno || !*val || *end || !(d > 0) || d > 86400.0 * 30)
			return -EINVAL;
		if (d * 1000.0 + 0.5 < 1.0)
			return -EINVAL; /* would round to 0 ms */
		*(unsigned *)(void *)field = (unsigned)(d * 1000.0 + 0.5);
		return 0;
	case OPT_BOOL:
		if (!strcmp(val, "1") || !strcmp(val, "true") ||
		    !strcmp(val, "yes") || !strcmp(val, "on"))
			*(int *)(void *)field = 1;
		else if (!strcmp(val, "0") || !strcmp(val, "false") ||
			 !strcmp(val, "no") || !strcmp(val, "off"))
			*(int *)(void *)field = 0;
		else
			return -EINVAL;
		return 0;
	case OPT_RANGE:
	case OPT_RANGE_UNSET:
		return opt_set_range(o, field, val);
	case OPT_DOUBLE:
		errno = 0;
		d = strtod(val, &end);
		if (errno || !*val || *end || !(d >= 0) || d > 1e6)
			return -EINVAL;
		*(double *)(void *)field = d;
		return 0;
	}
	return -EINVAL;
}

void psched_cfg_init(struct psched_cfg *cfg)
{
	size_t i;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < PSD_ARRAY_SIZE(opts); i++) {
		ret = opt_set(&opts[i], cfg, opts[i].def);
		(void)ret; /* defaults are ours and valid */
	}
}

/* Port and role ranges checked after every source is applied. */
static int cfg_check(const struct psched_cfg *cfg, const char *src)
{
	if (cfg->port > 65535 || cfg->root_port > 65535)
		return psd_set_errmsg(-EINVAL, "%s: port above 65535", src);
	if (cfg->num_server == 0 || cfg->num_worker == 0)
		return psd_set_errmsg(-EINVAL,
				      "%s: the job needs at least one server "
				      "and one worker",
				      src);
	return 0;
}

int psched_cfg_from_env(struct psched_cfg *cfg)
{
	const char *v;
	size_t i, j;

	for (i = 0; i < PSD_ARRAY_SIZE(opts); i++) {
		for (j = 0; j < 3 && opts[i].env[j]; j++) {
			v = getenv(opts[i].env[j]);
			if (!v || !*v)
				continue;
			if (opt_set(&opts[i], cfg, v))
				return psd_set_errmsg(-EINVAL,
						      "bad value '%s' for %s "
						      "(%s)",
						      v, opts[i].env[j],
						      opts[i].help);
			break;
		}
	}
	v = getenv("DMLC_ENABLE_RDMA");
	if (v && (!strcmp(v, "1") || !strcmp(v, "ibverbs")) &&
	    !getenv("PS_TRANSPORT"))
		strcpy(cfg->transport, "rdma");
	return cfg_check(cfg, "environment");
}

static bool opt_is_bool_word(const char *v)
{
	static const char *const words[] = { "0",   "1",  "true", "false",
					     "yes", "no", "on",	  "off" };
	size_t i;

	for (i = 0; i < PSD_ARRAY_SIZE(words); i++)
		if (!strcmp(v, words[i]))
			return true;
	return false;
}

static const struct opt *opt_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < PSD_ARRAY_SIZE(opts); i++)
		if (strlen(opts[i].flag) == len &&
		    !strncmp(opts[i].flag, name, len))
			return &opts[i];
	return NULL;
}

int psched_cfg_parse_args(struct psched_cfg *cfg, int *argc, char **argv,
			  bool strict)
{
	int i, out = 1, help = 0;
	const struct opt *o;
	const char *name, *eq, *val;
	size_t len;

	for (i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			help = 1;
			continue;
		}
		if (strncmp(argv[i], "--", 2)) {
			argv[out++] = argv[i];
			continue;
		}
		name = argv[i] + 2;
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		o = opt_find(name, len);
		if (!o) {
			if (strict)
				return psd_set_errmsg(
					-EINVAL, "unknown option %s", argv[i]);
			argv[out++] = argv[i];
			continue;
		}
		if (eq) {
			val = eq + 1;
		} else if (o->type == OPT_BOOL) {
			/* "--autotune 0" must not turn it on: take a boolean
			 * word that follows, else it is a bare switch. */
			val = "1";
			if (i + 1 < *argc && opt_is_bool_word(argv[i + 1]))
				val = argv[++i];
		} else if (i + 1 < *argc) {
			val = argv[++i];
		} else {
			return psd_set_errmsg(-EINVAL,
					      "option --%s needs a "
					      "value",
					      o->flag);
		}
		if (opt_set(o, cfg, val))
			return psd_set_errmsg(-EINVAL,
					      "bad value '%s' for --%s (%s)",
					      val, o->flag, o->help);
	}
	*argc = out;
	argv[out] = NULL;
	if (help)
		return 1;
	return cfg_check(cfg, "command line");
}

/* Which programs read an option, for --help: a bit per enum psched_role.
 * Options not named here apply to every role. */
#define R_S (1u << PSCHED_ROLE_SCHEDULER)
#define R_V (1u << PSCHED_ROLE_SERVER)
#define R_W (1u << PSCHED_ROLE_WORKER)

static unsigned opt_roles(const struct opt *o)
{
	static const struct {
		const char *flag; /* a trailing '*' matches a prefix */
		unsigned roles;
	} only[] = {
		{ "role", 0 }, /* each program has its role */
		{ "node-host", R_V | R_W },
		{ "interface", R_V | R_W },
		{ "port", R_V | R_W },
		{ "server-mode", R_V },
		{ "scheduling", R_W },
		{ "config-*", R_S },
		{ "autotune*", R_S },
		{ "socket-buf-bytes", R_V | R_W },
		{ "rdma-*", R_V | R_W },
	};
	size_t i, len;

	for (i = 0; i < PSD_ARRAY_SIZE(only); i++) {
		len = strlen(only[i].flag);
		if (only[i].flag[len - 1] == '*'
			    ? !strncmp(o->flag, only[i].flag, len - 1)
			    : !strcmp(o->flag, only[i].flag))
			return only[i].roles;
	}
	return R_S | R_V | R_W;
}

static void cfg_usage(FILE *out, unsigned roles)
{
	char env[64];
	size_t i;

	fprintf(out, "Cluster options (flag, environment variable, default):"
		     "\n");
	for (i = 0; i < PSD_ARRAY_SIZE(opts); i++) {
		if (roles && !(opt_roles(&opts[i]) & roles))
			continue;
		snprintf(env, sizeof(env), "%s%s%s", opts[i].env[0],
			 opts[i].env[1] ? ", " : "",
			 opts[i].env[1] ? opts[i].env[1] : "");
		fprintf(out, "  --%-20s %-26s [%s]\n      %s\n", opts[i].flag,
			env,
			opts[i].type == OPT_RANGE_UNSET ? "unset" : opts[i].def,
			opts[i].help);
	}
	fprintf(out, "  Flags win over the environment.\n");
}

void psched_cfg_usage(FILE *out)
{
	cfg_usage(out, 0);
}

void psched_cfg_usage_role(FILE *out, enum psched_role role)
{
	cfg_usage(out, role <= PSCHED_ROLE_WORKER ? 1u << role : 0);
}
