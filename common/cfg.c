// SPDX-License-Identifier: MIT
/*
 * The opaque configuration of include/psched.h: create, destroy, and get
 * or set an option by name, through the option table (options_table.c)
 * that also drives defaults, environment variables and flags.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "options_int.h"

int psched_cfg_create(struct psched_cfg **out)
{
	struct psched_cfg *cfg;

	if (!out)
		return psd_set_errmsg(-EINVAL, "psched_cfg_create: no out");
	cfg = malloc(sizeof(*cfg));
	if (!cfg)
		return psd_set_errmsg(-ENOMEM, "no memory for a configuration");
	psd_cfg_defaults(cfg);
	*out = cfg;
	return 0;
}

void psched_cfg_destroy(struct psched_cfg *cfg)
{
	free(cfg);
}

/* The option named @name (its flag, or one of its variables) into *@out,
 * or -ENOENT with psched_errmsg() saying so. */
static int cfg_opt(const char *name, const struct opt **out)
{
	const struct opt *o = psd_opt_find(name, strlen(name));
	size_t i, j;

	for (i = 0; !o && i < psd_nopts; i++)
		for (j = 0; j < 3 && psd_opts[i].env[j]; j++)
			if (!strcmp(psd_opts[i].env[j], name))
				o = &psd_opts[i];
	*out = o;
	if (!o)
		return psd_set_errmsg(-ENOENT,
				      "no option '%s' (docs/configuration.md "
				      "lists them)",
				      name);
	return 0;
}

int psched_cfg_set(struct psched_cfg *cfg, const char *name, const char *value)
{
	const struct opt *o;
	int ret;

	if (!cfg || !name || !value)
		return psd_set_errmsg(-EINVAL, "psched_cfg_set: no %s",
				      !cfg    ? "cfg"
				      : !name ? "name"
					      : "value");
	ret = cfg_opt(name, &o);
	if (ret)
		return ret;
	if (psd_opt_set(o, cfg, value))
		return psd_set_errmsg(-EINVAL, "bad value '%s' for %s (%s)",
				      psd_opt_shown(o, value), o->flag,
				      o->help);
	return 0;
}

/* Print field @o of @cfg into @buf as psd_opt_set() reads it back. */
static int cfg_format(const struct opt *o, const struct psched_cfg *cfg,
		      char *buf, size_t size)
{
	const char *field = (const char *)cfg + o->off;
	int i;

	switch (o->type) {
	case OPT_STR:
	case OPT_TRANSPORT:
		return snprintf(buf, size, "%s", field);
	case OPT_ROLE:
		return snprintf(buf, size, "%s", psched_role_name(cfg->role));
	case OPT_INT:
	case OPT_BOOL:
		return snprintf(buf, size, "%d",
				*(const int *)(const void *)field);
	case OPT_UINT:
		return snprintf(buf, size, "%u",
				*(const unsigned *)(const void *)field);
	case OPT_BYTES:
		return snprintf(buf, size, "%llu",
				(unsigned long long)*(
					const uint64_t *)(const void *)field);
	case OPT_SECONDS:
		return snprintf(buf, size, "%.10g",
				*(const unsigned *)(const void *)field /
					1000.0);
	case OPT_DOUBLE:
		return snprintf(buf, size, "%.17g",
				*(const double *)(const void *)field);
	case OPT_RANGE_UNSET:
		i = *(const int *)(const void *)field;
		return i < 0 ? snprintf(buf, size, "%s", "")
			     : snprintf(buf, size, "%d", i);
	case OPT_RANGE:
		break;
	}
	if (o->size == sizeof(uint64_t))
		return snprintf(buf, size, "%llu",
				(unsigned long long)*(
					const uint64_t *)(const void *)field);
	return snprintf(buf, size, "%u",
			*(const unsigned *)(const void *)field);
}

int psched_cfg_get(const struct psched_cfg *cfg, const char *name, char *buf,
		   size_t size)
{
	const struct opt *o;
	int n, ret;

	if (!cfg || !name || !buf || !size)
		return psd_set_errmsg(-EINVAL, "psched_cfg_get: no %s",
				      !cfg    ? "cfg"
				      : !name ? "name"
					      : "buffer");
	ret = cfg_opt(name, &o);
	if (ret)
		return ret;
	n = cfg_format(o, cfg, buf, size);
	if (n < 0 || (size_t)n >= size)
		return psd_set_errmsg(-ERANGE,
				      "option %s: its value needs %d bytes, "
				      "the buffer has %zu",
				      o->flag, n + 1, size);
	return 0;
}
