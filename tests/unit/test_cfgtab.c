// SPDX-License-Identifier: MIT
/* Config epochs: which config a step uses, and what the table refuses. */
#include <errno.h>

#include "../harness.h"
#include "../../common/cfgtab.h"

static void test_cfgtab_step_mapping(void)
{
	struct psd_cfgtab t;
	struct psd_cfg_entry e1 = { 1, 4096, 16384, 10, 0, NULL, 0 };
	struct psd_cfg_entry e2 = { 2, 65536, 0, 25, 0, NULL, 0 };

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
	struct psd_cfg_entry e = { 5, 4096, 0, 3, 0, NULL, 0 };
	struct psd_cfg_entry old = { 4, 8192, 0, 9, 0, NULL, 0 };

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
	struct psd_cfg_entry e = { 0 };
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

/* A membership is part of its config: copied in, asked per step. */
static void test_cfgtab_members(void)
{
	uint8_t bm[2] = { 0x0b, 0x01 }; /* ranks 0, 1, 3, 8 */
	struct psd_cfg_entry e = { 1, 4096, 0, 7, 4, bm, sizeof(bm) };
	const struct psd_cfg_entry *got;
	struct psd_cfgtab t;

	CHECK_EQ(psd_cfgtab_init(&t, 4096, 0), 0);
	CHECK_EQ(psd_cfg_members_check(&e, 9), 0);
	CHECK_EQ(psd_cfgtab_add(&t, &e), 0);
	bm[0] = 0; /* the table has its own copy */
	got = psd_cfgtab_for_step(&t, 6);
	CHECK(psd_cfg_is_member(got, 2));
	CHECK_EQ(psd_cfg_nmembers(got, 9), 9);
	got = psd_cfgtab_for_step(&t, 7);
	CHECK_EQ(psd_cfg_nmembers(got, 9), 4);
	CHECK(psd_cfg_is_member(got, 0));
	CHECK(psd_cfg_is_member(got, 3));
	CHECK(psd_cfg_is_member(got, 8));
	CHECK(!psd_cfg_is_member(got, 2));
	CHECK(!psd_cfg_is_member(got, 9));
	CHECK(!psd_cfg_is_member(got, 1000));
	psd_cfgtab_fini(&t);
}

/* Memberships from the wire that do not fit the job are refused. */
static void test_cfgtab_members_malformed(void)
{
	uint8_t bm[3] = { 0x03, 0x00, 0x00 };
	struct psd_cfg_entry e = { 1, 0, 0, 1, 2, bm, 1 };

	CHECK_EQ(psd_cfg_members_check(&e, 4), 0);
	e.nmembers = 3; /* count disagrees with the bits */
	CHECK_EQ(psd_cfg_members_check(&e, 4), -EPROTO);
	e.nmembers = 2;
	CHECK_EQ(psd_cfg_members_check(&e, 1), -EPROTO); /* rank 1 of 1 */
	e.members_len = 3; /* longer than 4 slots need */
	CHECK_EQ(psd_cfg_members_check(&e, 4), -EPROTO);
	e.members = NULL;
	e.members_len = 0;
	CHECK_EQ(psd_cfg_members_check(&e, 4), -EPROTO); /* count, no map */
	e.nmembers = 0;
	CHECK_EQ(psd_cfg_members_check(&e, 4), 0); /* every worker */
	bm[0] = 0;
	e.members = bm;
	e.members_len = 1;
	CHECK_EQ(psd_cfg_members_check(&e, 4), 0); /* nobody is left */
}

const struct test_case test_list[] = {
	{ "cfgtab_step_mapping", test_cfgtab_step_mapping },
	{ "cfgtab_refuses_duplicates_and_old_epochs",
	  test_cfgtab_refuses_duplicates_and_old_epochs },
	{ "cfgtab_many_epochs", test_cfgtab_many_epochs },
	{ "cfgtab_members", test_cfgtab_members },
	{ "cfgtab_members_malformed", test_cfgtab_members_malformed },
	{ NULL, NULL },
};
