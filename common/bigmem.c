// SPDX-License-Identifier: MIT
/*
 * Big buffers in transparent huge pages (common/bigmem.h): the server's
 * dense value/merge blocks (PS_SERVER_HUGEPAGES) and key-list arrays,
 * the worker's key-list cache (PS_KEYLIST_HUGEPAGES).
 *
 * A mapping is made PSD_HUGE bytes longer than asked, cut down to the
 * first 2 MiB boundary, and advised MADV_HUGEPAGE: with the kernel's
 * transparent huge pages in "madvise" mode (the usual default) only such
 * ranges get huge pages.  The first touch of each 2 MiB then faults once
 * and the kernel clears a huge page, instead of 512 faults.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bigmem.h"

static atomic_uint huge_fail;	 /* tests: mappings to fail */
static atomic_bool huge_refused; /* the last madvise failed */

void psd_huge_test_fail(unsigned n)
{
	atomic_store(&huge_fail, n);
}

bool psd_huge_advice_refused(void)
{
	return atomic_load(&huge_refused);
}

uint64_t psd_huge_map_len(uint64_t len)
{
	uint64_t huge = (len + PSD_HUGE - 1) & ~(PSD_HUGE - 1);

	if (huge - len <= len / 8)
		return huge;
	return (len + 4095) & ~4095ull;
}

void *psd_huge_map(uint64_t len)
{
	uint64_t mlen = psd_huge_map_len(len);
	unsigned f = atomic_load(&huge_fail);
	uint8_t *p, *a;

	while (f && !atomic_compare_exchange_weak(&huge_fail, &f, f - 1))
		;
	if (f || !len || mlen + PSD_HUGE < mlen)
		return NULL;
	/* fresh anonymous pages read as zero */
	p = mmap(NULL, (size_t)(mlen + PSD_HUGE), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)p + PSD_HUGE - 1) &
			~(uintptr_t)(PSD_HUGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + mlen, (size_t)(p + PSD_HUGE - a));
	/* advice: refused (no THP in this kernel), 4 KiB pages it is */
	atomic_store(&huge_refused,
		     madvise(a, (size_t)mlen, MADV_HUGEPAGE) != 0);
	return a;
}

void psd_huge_unmap(void *p, uint64_t len)
{
	if (p)
		munmap(p, (size_t)psd_huge_map_len(len));
}

/* Before each psd_big_alloc() buffer: how to free it. */
struct big_hdr {
	uint64_t maplen; /* asked of psd_huge_map(); 0: malloc'd */
	char pad[56];
};

void *psd_big_alloc(uint64_t len, bool huge, bool zero)
{
	uint64_t all = len + sizeof(struct big_hdr);
	struct big_hdr *h = NULL;

	if (all < len)
		return NULL;
	if (huge && len >= PSD_BIG_MIN) {
		h = psd_huge_map(all);
		if (h)
			h->maplen = all;
	}
	if (!h) {
		h = zero ? calloc(1, (size_t)all) : malloc((size_t)all);
		if (!h)
			return NULL;
		h->maplen = 0;
	}
	return h + 1;
}

void psd_big_free(void *p)
{
	struct big_hdr *h;

	if (!p)
		return;
	h = (struct big_hdr *)p - 1;
	if (h->maplen)
		psd_huge_unmap(h, h->maplen);
	else
		free(h);
}

bool psd_big_is_mapped(const void *p)
{
	return p && ((const struct big_hdr *)p - 1)->maplen;
}

void psd_big_populate(void *p, uint64_t len)
{
	uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	uintptr_t e = ((uintptr_t)p + len) & ~(uintptr_t)4095;

	/* advice only: refused (before Linux 5.14) the pages fault in as
	 * they are written */
	if (e > a)
		(void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}
