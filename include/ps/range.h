/* SPDX-License-Identifier: MIT */
/* A half-open range [begin, end) of keys or indices. */
#ifndef PS_RANGE_H_
#define PS_RANGE_H_

#include <cstdint>

#include "ps/internal/utils.h"

namespace ps
{

class Range
{
public:
	Range() : begin_(0), end_(0)
	{
	}
	Range(uint64_t begin, uint64_t end) : begin_(begin), end_(end)
	{
	}
	uint64_t begin() const
	{
		return begin_;
	}
	uint64_t end() const
	{
		return end_;
	}
	uint64_t size() const
	{
		return end_ - begin_;
	}

private:
	uint64_t begin_;
	uint64_t end_;
};

} // namespace ps

#endif
