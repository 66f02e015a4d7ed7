// SPDX-License-Identifier: MIT
#include "internal.h"
#include "placement.h"

/* splitmix64 finalizer: consecutive keys spread over servers. */
static uint64_t place_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

unsigned psd_place_home(uint64_t key, unsigned nserv)
{
	return (unsigned)(place_mix(key) % nserv);
}

void psd_place(uint64_t key, uint64_t total, unsigned esize, unsigned nserv,
	       unsigned rank, uint64_t *off, uint64_t *len)
{
	uint64_t n, lo, hi;

	if (nserv <= 1 || total < PSD_PLACE_SPLIT_MIN) {
		bool mine = nserv <= 1 || psd_place_home(key, nserv) == rank;

		*off = 0;
		*len = mine ? total : 0;
		return;
	}
	n = total / esize;
	/* n < 2^61 here, so n * rank cannot overflow for nserv < 8. */
	lo = (uint64_t)((unsigned __int128)n * rank / nserv);
	hi = (uint64_t)((unsigned __int128)n * (rank + 1) / nserv);
	*off = lo * esize;
	*len = (hi - lo) * esize;
}
