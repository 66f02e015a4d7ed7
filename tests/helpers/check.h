/* SPDX-License-Identifier: MIT */
/*
 * CHECK(cond, fmt, ...) for the test helper programs: on failure print
 * "<who>: FAIL <cond>: <message>" on stderr and exit 1.  The includer
 * defines CHECK_WHO first as printf arguments naming itself, e.g.
 *   #define CHECK_WHO "misuse rank %d", rank
 */
#ifndef PSCHED_TESTS_HELPERS_CHECK_H
#define PSCHED_TESTS_HELPERS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef CHECK_WHO
#error "define CHECK_WHO before including check.h"
#endif

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, CHECK_WHO);                            \
			fprintf(stderr, ": FAIL %s: ", #c);                    \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			exit(1);                                               \
		}                                                              \
	} while (0)

#endif
