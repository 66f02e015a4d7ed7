/* SPDX-License-Identifier: MIT */
/*
 * Big buffers in transparent huge pages.  A fresh 4 KiB page costs about
 * as much to fault in as to copy it (a 120 MB key list: 57 ms to fault in
 * and fill, 11 ms to copy into pages already there); a 2 MiB mapping
 * advised MADV_HUGEPAGE faults once per 2 MiB.  The advice is only that:
 * with transparent huge pages "never", or madvise refused, the mapping
 * is plain 4 KiB pages and everything works the same.
 */
#ifndef PSCHED_COMMON_BIGMEM_H
#define PSCHED_COMMON_BIGMEM_H

#include <stdbool.h>
#include <stdint.h>

#define PSD_HUGE (2ull << 20)
/* psd_big_alloc() maps from here on (smaller: malloc) */
#define PSD_BIG_MIN (4ull << 20)

/* Bytes psd_huge_map() maps for @len: whole huge pages when that wastes
 * at most 1/8, else whole 4 KiB pages. */
uint64_t psd_huge_map_len(uint64_t len);
/* @len zeroed bytes at a 2 MiB-aligned address, advised MADV_HUGEPAGE;
 * NULL when the mapping fails.  Unmap with psd_huge_unmap(p, len). */
void *psd_huge_map(uint64_t len);
void psd_huge_unmap(void *p, uint64_t len);

/*
 * @len bytes (zeroed when @zero) for a buffer freed with psd_big_free():
 * from PSD_BIG_MIN with @huge, psd_huge_map()'d (malloc'd when the
 * mapping fails); else malloc'd.  A 64-byte header before it says which.
 * NULL: no memory.
 */
void *psd_big_alloc(uint64_t len, bool huge, bool zero);
void psd_big_free(void *p); /* NULL is a no-op */
/*
 * Fault in the pages of [@p, @p + @len) that will all be written now, in
 * one call rather than one fault each (MADV_POPULATE_WRITE; nothing when
 * the kernel refuses).
 */
void psd_big_populate(void *p, uint64_t len);
/* Was @p (from psd_big_alloc) mapped? For tests. */
bool psd_big_is_mapped(const void *p);

/* Tests: the next @n psd_huge_map() calls fail as if mmap had (the
 * fallback paths), and whether the last one's madvise was refused. */
void psd_huge_test_fail(unsigned n);
bool psd_huge_advice_refused(void);

#endif
