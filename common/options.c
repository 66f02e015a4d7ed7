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

enum opt_type {
	OPT_STR,
	OPT_UINT,
	OPT_INT,
	OPT_BYTES,   /* uint64 with optional K/M/G suffix (binary) */
	OPT_SECONDS, /* seconds (decimal allowed) stored as ms */
	OPT_ROLE,
	OPT_TRANSPORT,
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
	  "auto | tcp | rdma (DMLC_ENABLE_RDMA=1 also selects rdma)" },
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
		    strcmp(val, "tcp") && strcmp(val, "rdma"))
			return -EINVAL;
		if (o->off == OFF(server_mode) && strcmp(val, "sync") &&
		    strcmp(val, "async"))
			return -EINVAL;
		if (o->off == OFF(scheduling) && strcmp(val, "priority") &&
		    strcmp(val, "fifo"))
			return -EINVAL;
		if (o->off == OFF(config_cycle) && !opt_cycle_valid(val))
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

void psched_cfg_usage(FILE *out)
{
	char env[64];
	size_t i;

	fprintf(out, "Cluster options (flag, environment variable, default):"
		     "\n");
	for (i = 0; i < PSD_ARRAY_SIZE(opts); i++) {
		snprintf(env, sizeof(env), "%s%s%s", opts[i].env[0],
			 opts[i].env[1] ? ", " : "",
			 opts[i].env[1] ? opts[i].env[1] : "");
		fprintf(out, "  --%-20s %-26s [%s]\n      %s\n", opts[i].flag,
			env, opts[i].def, opts[i].help);
	}
	fprintf(out, "  Flags win over the environment.\n");
}
