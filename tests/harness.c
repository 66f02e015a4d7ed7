// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum test_result {
	TEST_PASS,
	TEST_FAIL,
	TEST_SKIP,
};

static jmp_buf test_jump;
static enum test_result test_outcome;
static char test_reason[1024];

void test_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(test_reason, sizeof(test_reason), "%s:%d: ", file, line);
	va_start(ap, fmt);
	vsnprintf(test_reason + n, sizeof(test_reason) - (size_t)n, fmt, ap);
	va_end(ap);
	test_outcome = TEST_FAIL;
	longjmp(test_jump, 1);
}

void test_skip(const char *why)
{
	snprintf(test_reason, sizeof(test_reason), "%s", why);
	test_outcome = TEST_SKIP;
	longjmp(test_jump, 1);
}

static uint64_t test_rng_state;

void test_rng_seed(uint64_t seed)
{
	test_rng_state = seed;
}

uint64_t test_rng_next(void)
{
	uint64_t z = (test_rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t test_rng_below(uint64_t n)
{
	return test_rng_next() % n;
}

int test_timeout_ms(int ms)
{
	const char *m = getenv("PS_TEST_TIMEOUT_MULT");
	double mult = m ? atof(m) : 1.0;

	if (mult < 1.0)
		mult = 1.0;
	return (int)(ms * mult);
}

int main(int argc, char **argv)
{
	/* static: live across setjmp/longjmp */
	static int total, failed, skipped, i;
	static const char *only;

	only = argc > 1 ? argv[1] : NULL;

	for (i = 0; test_list[i].name; i++)
		if (!only || strstr(test_list[i].name, only))
			total++;
	printf("1..%d\n", total);
	fflush(stdout);
	total = 0;
	for (i = 0; test_list[i].name; i++) {
		if (only && !strstr(test_list[i].name, only))
			continue;
		total++;
		test_outcome = TEST_PASS;
		test_reason[0] = '\0';
		if (setjmp(test_jump) == 0)
			test_list[i].fn();
		switch (test_outcome) {
		case TEST_PASS:
			printf("ok %d - %s\n", total, test_list[i].name);
			break;
		case TEST_SKIP:
			skipped++;
			printf("ok %d - %s # SKIP %s\n", total,
			       test_list[i].name, test_reason);
			break;
		case TEST_FAIL:
			failed++;
			printf("not ok %d - %s\n#   %s\n", total,
			       test_list[i].name, test_reason);
			break;
		}
		fflush(stdout);
	}
	if (failed)
		return 1;
	if (total > 0 && skipped == total)
		return 77;
	return 0;
}
