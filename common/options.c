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
#include "options_int.h"
#include "transport/transport.h"

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

	for (i = 0; i < psd_nopt_ranges; i++)
		if (psd_opt_ranges[i].off == o->off)
			r = &psd_opt_ranges[i];
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

const char *psd_opt_shown(const struct opt *o, const char *val)
{
	return o->off == offsetof(struct psched_cfg, job_token) ? "(not shown)"
								: val;
}

int psd_opt_set(const struct opt *o, struct psched_cfg *cfg, const char *val)
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
		if (o->off == OFF(sender_nice) && (d < -20 || d > 19))
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

void psd_cfg_defaults(struct psched_cfg *cfg)
{
	size_t i;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < psd_nopts; i++) {
		ret = psd_opt_set(&psd_opts[i], cfg, psd_opts[i].def);
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

	for (i = 0; i < psd_nopts; i++) {
		for (j = 0; j < 3 && psd_opts[i].env[j]; j++) {
			v = getenv(psd_opts[i].env[j]);
			if (!v || !*v)
				continue;
			if (psd_opt_set(&psd_opts[i], cfg, v))
				return psd_set_errmsg(
					-EINVAL,
					"bad value '%s' for %s "
					"(%s)",
					psd_opt_shown(&psd_opts[i], v),
					psd_opts[i].env[j], psd_opts[i].help);
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

const struct opt *psd_opt_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < psd_nopts; i++)
		if (strlen(psd_opts[i].flag) == len &&
		    !strncmp(psd_opts[i].flag, name, len))
			return &psd_opts[i];
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
		o = psd_opt_find(name, len);
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
		if (psd_opt_set(o, cfg, val))
			return psd_set_errmsg(
				-EINVAL, "bad value '%s' for --%s (%s)",
				psd_opt_shown(o, val), o->flag, o->help);
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
		{ "sender-nice", R_W },
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
	for (i = 0; i < psd_nopts; i++) {
		if (roles && !(opt_roles(&psd_opts[i]) & roles))
			continue;
		snprintf(env, sizeof(env), "%s%s%s", psd_opts[i].env[0],
			 psd_opts[i].env[1] ? ", " : "",
			 psd_opts[i].env[1] ? psd_opts[i].env[1] : "");
		fprintf(out, "  --%-20s %-26s [%s]\n      %s\n",
			psd_opts[i].flag, env,
			psd_opts[i].type == OPT_RANGE_UNSET ? "unset"
							    : psd_opts[i].def,
			psd_opts[i].help);
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
