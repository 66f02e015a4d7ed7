/* SPDX-License-Identifier: MIT */
/*
 * Minimal TAP test harness.  Each tests/unit/test_<module>.c defines
 * test_list[] (terminated by an entry with a NULL name); harness.c owns
 * main(), runs every test, prints TAP and both sides of a failed check.
 * Exit status: 0 all passed, 1 a failure, 77 everything skipped.
 */
#ifndef PSCHED_TESTS_HARNESS_H
#define PSCHED_TESTS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

/* A sanitizer build (make asan, make tsan): tests that drive the tuner
 * over many seeds run a few there and keep their bars for the plain
 * build (test_tuner_synth, test_tuner_search). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED true
#else
#define TEST_SANITIZED false
#endif

struct test_case {
	const char *name;
	void (*fn)(void);
};

extern const struct test_case test_list[];

/* Abort the current test as failed (does not return). */
void test_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
/* Abort the current test as skipped (does not return). */
void test_skip(const char *why) __attribute__((noreturn));
/* splitmix64 with a fixed seed: the same sequence on every run. */
void test_rng_seed(uint64_t seed);
uint64_t test_rng_next(void);
/* In [0, n); n > 0. */
uint64_t test_rng_below(uint64_t n);
/* Scale a timeout by PS_TEST_TIMEOUT_MULT (default 1). */
int test_timeout_ms(int ms);

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond))                                                   \
			test_fail_at(__FILE__, __LINE__, "CHECK(%s)", #cond);  \
	} while (0)

#define CHECK_INT(a, op, b)                                                    \
	do {                                                                   \
		long long check_a_ = (long long)(a);                           \
		long long check_b_ = (long long)(b);                           \
		if (!(check_a_ op check_b_))                                   \
			test_fail_at(__FILE__, __LINE__,                       \
				     "%s %s %s: left %lld, right %lld", #a,    \
				     #op, #b, check_a_, check_b_);             \
	} while (0)

#define CHECK_EQ(a, b) CHECK_INT(a, ==, b)

#define CHECK_U64(a, op, b)                                                    \
	do {                                                                   \
		unsigned long long check_a_ = (unsigned long long)(a);         \
		unsigned long long check_b_ = (unsigned long long)(b);         \
		if (!(check_a_ op check_b_))                                   \
			test_fail_at(__FILE__, __LINE__,                       \
				     "%s %s %s: left %llu, right %llu", #a,    \
				     #op, #b, check_a_, check_b_);             \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                  \
	do {                                                                   \
		double check_a_ = (double)(a);                                 \
		double check_b_ = (double)(b);                                 \
		double check_t_ = (double)(tol);                               \
		if (!(check_a_ - check_b_ <= check_t_ &&                       \
		      check_b_ - check_a_ <= check_t_))                        \
			test_fail_at(__FILE__, __LINE__,                       \
				     "|%s - %s| <= %s: left %.17g, right "     \
				     "%.17g, tol %g",                          \
				     #a, #b, #tol, check_a_, check_b_,         \
				     check_t_);                                \
	} while (0)

#define CHECK_STR(a, b)                                                        \
	do {                                                                   \
		const char *check_a_ = (a);                                    \
		const char *check_b_ = (b);                                    \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_))      \
			test_fail_at(__FILE__, __LINE__,                       \
				     "%s == %s: left \"%s\", right \"%s\"",    \
				     #a, #b, check_a_ ? check_a_ : "(null)",   \
				     check_b_ ? check_b_ : "(null)");          \
	} while (0)

#endif
