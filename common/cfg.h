/* SPDX-License-Identifier: MIT */
/*
 * struct psched_cfg: a node's configuration, opaque to users
 * (include/psched.h: psched_cfg_create(), _set(), _get() by option name).
 * Every field is an option of common/options_table.c, which drives its
 * defaults, environment variables, flags and get/set by name.
 */
#ifndef PSCHED_COMMON_CFG_H
#define PSCHED_COMMON_CFG_H

#include "psched.h"

struct psched_cfg {
	enum psched_role role;
	char root_uri[256];  /* DMLC_PS_ROOT_URI: scheduler host */
	unsigned root_port;  /* DMLC_PS_ROOT_PORT */
	unsigned num_server; /* DMLC_NUM_SERVER */
	unsigned num_worker; /* DMLC_NUM_WORKER */
	char node_host[256]; /* DMLC_NODE_HOST: address others dial */
	char interface[64];  /* DMLC_INTERFACE: take node_host from it */
	unsigned port;	     /* DMLC_PORT / PORT: listen port, 0 = any */
	int verbose;	     /* PS_VERBOSE 0..2 */
	unsigned heartbeat_interval_ms; /* PS_HEARTBEAT_INTERVAL (s) */
	unsigned heartbeat_timeout_ms;	/* PS_HEARTBEAT_TIMEOUT (s) */
	unsigned connect_timeout_ms;	/* PS_CONNECT_TIMEOUT (s) */
	unsigned request_timeout_ms;	/* PS_REQUEST_TIMEOUT (s) */
	char transport[16];		/* PS_TRANSPORT: auto|tcp|rdma */
	char server_mode[16];		/* PS_SERVER_MODE: sync|async */
	uint64_t max_tensor_bytes;	/* PS_MAX_TENSOR_BYTES */
	unsigned max_steps_ahead;	/* PS_MAX_STEPS_AHEAD (server) */
	uint64_t max_parked_bytes;	/* PS_MAX_PARKED_BYTES, 0 = auto */
	char snapshot_dir[1024];	/* PS_SNAPSHOT_DIR (server) */
	unsigned snapshot_steps;	/* PS_SNAPSHOT_STEPS, 0 = never */
	char restore[1024];		/* PS_RESTORE: snapshot to load */
	uint64_t partition_bytes;	/* PS_PARTITION_BYTES, 0 = none */
	uint64_t credit_bytes;		/* PS_CREDIT_BYTES, 0 = unlimited */
	char scheduling[16];		/* PS_SCHEDULING: priority|fifo */
	char config_cycle[256];		/* PS_CONFIG_CYCLE (scheduler) */
	unsigned config_interval_ms;	/* PS_CONFIG_INTERVAL (scheduler) */
	/* Online autotuner (scheduler only; docs/tuner.md). */
	int autotune;			      /* PS_AUTOTUNE: 0 | 1 */
	unsigned autotune_warmup_samples;     /* PS_AUTOTUNE_WARMUP_SAMPLES */
	unsigned autotune_steps_per_sample;   /* PS_AUTOTUNE_STEPS_PER_SAMPLE */
	unsigned autotune_max_samples;	      /* PS_AUTOTUNE_MAX_SAMPLES */
	unsigned autotune_retune_max_samples; /* ..._RETUNE_MAX_SAMPLES */
	double autotune_gp_noise;	      /* ..._GAUSSIAN_PROCESS_NOISE */
	char autotune_log_file[256];	      /* PS_AUTOTUNE_LOG_FILE */
	double autotune_retune_threshold;     /* PS_AUTOTUNE_RETUNE_THRESHOLD */
	uint64_t autotune_partition_min;      /* PS_AUTOTUNE_PARTITION_MIN */
	uint64_t autotune_partition_max;      /* PS_AUTOTUNE_PARTITION_MAX */
	uint64_t autotune_seed;		      /* PS_AUTOTUNE_SEED */
	int autotune_conditions;	      /* PS_AUTOTUNE_CONDITIONS */
	char job_token[256];		      /* PS_JOB_TOKEN: job's secret */
	/* Authentication (docs/security.md "The job secret"). */
	char job_token_file[256];   /* PS_JOB_TOKEN_FILE: file holding it */
	int allow_unauthenticated;  /* PS_ALLOW_UNAUTHENTICATED: 0 | 1 */
	unsigned auth_timeout_ms;   /* PS_AUTH_TIMEOUT (s) to authenticate */
	unsigned preauth_max_frame; /* PS_PREAUTH_MAX_FRAME: bytes until then */
	unsigned max_pending_auth;  /* PS_MAX_PENDING_AUTH per listener */
	uint64_t socket_buf_bytes;  /* PS_SOCKET_BUF_BYTES, 0 = kernel's */
	/* RDMA transport knobs (docs/transports.md "RDMA"). */
	char rdma_device[64];	  /* PS_RDMA_DEVICE, "" = any */
	unsigned rdma_port;	  /* PS_RDMA_PORT 1..255 */
	int rdma_gid_index;	  /* PS_RDMA_GID_INDEX 0..65535, -1 unset */
	unsigned rdma_recv_depth; /* PS_RDMA_RECV_DEPTH 4..4096 */
	unsigned rdma_send_depth; /* PS_RDMA_SEND_DEPTH 2..4096 */
	unsigned rdma_buf_bytes;  /* PS_RDMA_BUF_BYTES 1K..1M */
	unsigned rdma_inline;	  /* PS_RDMA_INLINE 0..4096 */
	unsigned rdma_cq_depth;	  /* PS_RDMA_CQ_DEPTH 256..4M */
	int rdma_spin_us;	  /* PS_RDMA_SPIN_US 0..1e6, -1 unset */
	uint64_t rdma_mr_budget;  /* PS_RDMA_MR_BUDGET 0..2^50 */
	int rdma_lane_min;	  /* PS_RDMA_LANE_MIN 0..1G, -1 unset */
	int rdma_test_fail_reg;	  /* PS_RDMA_TEST_FAIL_REG (test hook) */
	/* GPU tensors (docs/gpu.md). */
	uint64_t gpu_stage_bytes; /* PS_GPU_STAGE_BYTES: pinned slot size */
	unsigned gpu_stage_bufs;  /* PS_GPU_STAGE_BUFS 1..64 slots */
	unsigned gpu_streams;	  /* PS_GPU_STREAMS 1..16 */
	int server_gpu_sum;	  /* PS_SERVER_GPU_SUM: 0 | 1 */
	char gpu_direct[8];	  /* PS_GPU_DIRECT: auto | 0 | 1 */
	int keylist_cache;	  /* PS_KEYLIST_CACHE: 0 | 1 (worker) */
	int server_hugepages;	  /* PS_SERVER_HUGEPAGES: 0 | 1 (server) */
	int keylist_hugepages;	  /* PS_KEYLIST_HUGEPAGES: 0 | 1 */
	int keylist_pack;	  /* PS_KEYLIST_PACK: 0 | 1 (worker) */
	int tcp_split;		  /* PS_TCP_SPLIT: 0 | 1 (worker) */
	unsigned poll_us;	  /* PS_POLL_US 0..1000 us busy-poll, 0 = off */
	int caller_rx;		  /* PS_CALLER_RX: 0 | 1 (worker) */
	int sender_nice; /* PS_SENDER_NICE -20..19 (worker), 0 = inherited */
	/* Metrics (docs/metrics.md), read by the scheduler. */
	unsigned metrics_port;	      /* PS_METRICS_PORT 0..65535, 0 = off */
	char metrics_addr[64];	      /* PS_METRICS_ADDR: address to bind */
	char metrics_file[256];	      /* PS_METRICS_FILE: JSON lines, "" off */
	unsigned metrics_interval_ms; /* PS_METRICS_INTERVAL (s) */
};

/* Fill @cfg (caller storage) with the defaults of every option. */
void psd_cfg_defaults(struct psched_cfg *cfg);

#endif
