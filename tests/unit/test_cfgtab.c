// SPDX-License-Identifier: MIT
/* Config epochs: which config a step uses, and what the table refuses. */
#include <errno.h>

#include "../harness.h"
#include "../../common/cfgtab.h"

static void test_cfgtab_step_mapping(void)
{
	struct psd_cfgtab t;
	struct psd_cfg_entry e1 = { 1, 4096, 16384, 10 };
	struct psd_cfg_entry e2 = { 2, 65536, 0, 25 };

	CHECK_EQ(psd_cfgtab_init(&t, 1024, 8192), 0);
	CHECK_EQ(psd_cfgtab_for_step(&t, 0)->epoch, 0);
	CHECK_U64(psd_cfgtab_for_step(&t, 1000)->partition_bytes, ==, 1024);
	CHECK_EQ(psd_cfgtab_add(&t, &e1), 0);
	CHECK_EQ(psd_cfgtab_add(&t, &e2), 0);
	/* Exactly at apply_from_step, not one step early or late. */
	CHECK_EQ(psd_cfgtab_for_step(&t, 9)->epoch, 0);
	CHECK_EQ(psd_cfgtab_for_step(&t, 10)->epoch, 1);
	CHECK_EQ(psd_cfgtab_for_step(&t, 24)->epoch, 1);
	CHECK_EQ(psd_cfgtab_for_step(&t, 25)->epoch, 2);
	CHECK_U64(psd_cfgtab_for_step(&t, 1u << 30)->partition_bytes, ==,
		  65536);
	CHECK_EQ(psd_cfgtab_last(&t)->epoch, 2);
	CHECK(psd_cfgtab_find(&t, 1) != NULL);
	CHECK(psd_cfgtab_find(&t, 3) == NULL);
	psd_cfgtab_fini(&t);
}

static void test_cfgtab_refuses_duplicates_and_old_epochs(void)
{
	struct psd_cfgtab t;
	struct psd_cfg_entry e = { 5, 4096, 0, 3 };
	struct psd_cfg_entry old = { 4, 8192, 0, 9 };

	CHECK_EQ(psd_cfgtab_init(&t, 0, 0), 0);
	CHECK_EQ(psd_cfgtab_add(&t, &e), 0);
	CHECK_EQ(psd_cfgtab_add(&t, &e), -EALREADY);
	CHECK_EQ(psd_cfgtab_add(&t, &old), -EINVAL);
	CHECK_EQ(psd_cfgtab_for_step(&t, 9)->epoch, 5);
	psd_cfgtab_fini(&t);
	psd_cfgtab_fini(&t); /* twice is safe */
}

/* Many epochs: the table grows and still maps every step right. */
static void test_cfgtab_many_epochs(void)
{
	struct psd_cfgtab t;
	struct psd_cfg_entry e;
	uint32_t i;
	uint64_t s;

	CHECK_EQ(psd_cfgtab_init(&t, 0, 0), 0);
	for (i = 1; i <= 500; i++) {
		e.epoch = i;
		e.partition_bytes = 4096u * i;
		e.credit_bytes = 0;
		e.apply_from_step = 7u * i;
		CHECK_EQ(psd_cfgtab_add(&t, &e), 0);
	}
	for (s = 0; s < 3600; s++) {
		uint32_t want = s / 7 > 500 ? 500 : (uint32_t)(s / 7);

		CHECK_EQ(psd_cfgtab_for_step(&t, s)->epoch, want);
	}
	for (i = 0; i <= 500; i++)
		CHECK_EQ(psd_cfgtab_find(&t, i)->epoch, i);
	psd_cfgtab_fini(&t);
}

const struct test_case test_list[] = {
	{ "cfgtab_step_mapping", test_cfgtab_step_mapping },
	{ "cfgtab_refuses_duplicates_and_old_epochs",
	  test_cfgtab_refuses_duplicates_and_old_epochs },
	{ "cfgtab_many_epochs", test_cfgtab_many_epochs },
	{ NULL, NULL },
};
