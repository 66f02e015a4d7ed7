/* SPDX-License-Identifier: MIT */
/*
 * The partition rule (docs/architecture.md, "Placement is fixed at
 * init"): how a server's byte range of a tensor is cut into chunks for
 * transfer.  One implementation, called by the worker to cut a request
 * and by the server to validate and count what arrives, so the two can
 * never disagree.  Pure functions.
 */
#ifndef PSCHED_COMMON_PARTITION_H
#define PSCHED_COMMON_PARTITION_H

#include <stdint.h>

/*
 * Partitioner.  A server owns the contiguous bytes [range_off, range_off +
 * range_len) of a tensor; for transfer the range is cut into chunks of c
 * bytes (the last one may be shorter).  Chunk i covers
 * [range_off + i * c, min(range_off + (i + 1) * c, range_off + range_len)).
 * c == 0 is read as "one chunk, the whole range" by every function below.
 */

/*
 * The effective chunk size for a range of @range_len bytes: @part_bytes
 * rounded down to a multiple of @elem_size (1, 2, 4 or 8; 0 is read as 1),
 * at least @elem_size, at most @range_len.  @part_bytes == 0 means no
 * partitioning: the whole range.  Returns 0 only when @range_len is 0.
 */
uint64_t psd_part_chunk_size(uint64_t part_bytes, unsigned int elem_size,
			     uint64_t range_len);

/* Number of chunks of size @c in a range of @range_len bytes (0 if empty). */
uint64_t psd_part_count(uint64_t range_len, uint64_t c);

/*
 * Offset (absolute, in tensor bytes) and length of chunk @idx; @idx must be
 * below psd_part_count(@range_len, @c).
 */
void psd_part_chunk(uint64_t range_off, uint64_t range_len, uint64_t c,
		    uint64_t idx, uint64_t *off, uint64_t *len);

/*
 * The inverse, for validating a chunk that came off the wire: on 0, *@idx is
 * the index of the chunk that is exactly [@off, @off + @len) in this layout.
 * Returns -EPROTO if it is no such chunk (zero length, misaligned, too short
 * or too long, outside the range, or a range that wraps around 2^64); *@idx
 * is then left alone.  Safe for any 64-bit values.
 */
int psd_part_index(uint64_t range_off, uint64_t range_len, uint64_t c,
		   uint64_t off, uint64_t len, uint64_t *idx);

#endif
