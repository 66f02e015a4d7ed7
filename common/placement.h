/* SPDX-License-Identifier: MIT */
/*
 * Placement: which contiguous byte range of a tensor each server owns.
 * Pure function of (key, total, element size, server count), so every
 * worker and server computes the same answer without talking; fixed for
 * the key's life.  Tensors below PSD_PLACE_SPLIT_MIN go whole to one
 * server chosen by a hash of the key; larger ones are split in equal
 * element counts over all servers.
 */
#ifndef PSCHED_COMMON_PLACEMENT_H
#define PSCHED_COMMON_PLACEMENT_H

#include <stdint.h>

#define PSD_PLACE_SPLIT_MIN (64u * 1024u)

/* Range [*off, *off + *len) of server @rank; *len may be 0. */
void psd_place(uint64_t key, uint64_t total, unsigned esize, unsigned nserv,
	       unsigned rank, uint64_t *off, uint64_t *len);
/* Server that holds a tiny (unsplit) tensor. */
unsigned psd_place_home(uint64_t key, unsigned nserv);

#endif
