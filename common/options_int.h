/* SPDX-License-Identifier: MIT */
/*
 * The option table (options_table.c) and its types, shared by the code
 * that reads it (options.c): one table drives defaults, environment
 * variables, command-line flags and --help.
 */
#ifndef PSCHED_COMMON_OPTIONS_INT_H
#define PSCHED_COMMON_OPTIONS_INT_H
#include <stddef.h>
#include <stdint.h>

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

/* A field of struct psched_cfg. */
#define OFF(f) offsetof(struct psched_cfg, f)
#define SZ(f)  sizeof(((struct psched_cfg *)0)->f)

/* Ranges of the OPT_RANGE* options, by field offset. */
struct opt_range {
	size_t off;
	uint64_t min;
	uint64_t max;
};

/* options.c.  Set @o's field of @cfg from @val: 0 or -EINVAL. */
int psd_opt_set(const struct opt *o, struct psched_cfg *cfg, const char *val);
/* The option whose flag is the @len bytes at @name, or NULL. */
const struct opt *psd_opt_find(const char *name, size_t len);
/* What an error message may show of @val: never the job's secret. */
const char *psd_opt_shown(const struct opt *o, const char *val);

extern const struct opt psd_opts[];
extern const size_t psd_nopts;
extern const struct opt_range psd_opt_ranges[];
extern const size_t psd_nopt_ranges;

#endif
