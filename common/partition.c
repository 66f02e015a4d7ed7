// SPDX-License-Identifier: MIT
/* The partition rule (see partition.h). */
#include <assert.h>
#include <errno.h>

#include "partition.h"

uint64_t psd_part_chunk_size(uint64_t part_bytes, unsigned int elem_size,
			     uint64_t range_len)
{
	uint64_t c;

	if (!elem_size)
		elem_size = 1;
	if (!part_bytes)
		return range_len;
	c = part_bytes - part_bytes % elem_size;
	if (c < elem_size)
		c = elem_size;
	return c < range_len ? c : range_len;
}

uint64_t psd_part_count(uint64_t range_len, uint64_t c)
{
	if (!range_len)
		return 0;
	if (!c)
		return 1;
	/* Not (range_len + c - 1) / c: that overflows for huge values. */
	return range_len / c + (range_len % c != 0);
}

void psd_part_chunk(uint64_t range_off, uint64_t range_len, uint64_t c,
		    uint64_t idx, uint64_t *off, uint64_t *len)
{
	uint64_t rel;

	if (!c)
		c = range_len;
	assert(idx < psd_part_count(range_len, c));
	rel = idx * c; /* < range_len for a valid @idx: no overflow */
	*off = range_off + rel;
	*len = range_len - rel < c ? range_len - rel : c;
}

int psd_part_index(uint64_t range_off, uint64_t range_len, uint64_t c,
		   uint64_t off, uint64_t len, uint64_t *idx)
{
	uint64_t rel;
	uint64_t want;

	if (!len || !range_len || range_len > UINT64_MAX - range_off)
		return -EPROTO;
	if (off < range_off)
		return -EPROTO;
	rel = off - range_off;
	if (rel >= range_len)
		return -EPROTO;
	if (!c)
		c = range_len;
	if (rel % c)
		return -EPROTO;
	want = range_len - rel < c ? range_len - rel : c;
	if (len != want)
		return -EPROTO;
	*idx = rel / c;
	return 0;
}
