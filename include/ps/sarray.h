/* SPDX-License-Identifier: MIT */
/*
 * SArray<V>: ps-lite's shared array.  Copies share the memory (a
 * reference-counted pointer), so passing one around never copies the
 * values; segment() is a view into the same memory, and an SArray of
 * another element type can be seen as this one (its bytes reinterpreted).
 */
#ifndef PS_SARRAY_H_
#define PS_SARRAY_H_

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <type_traits>
#include <vector>

#include "psched.h"
#include "ps/internal/utils.h"
#include "ps/range.h"

namespace ps
{

template <typename V> class SArray
{
public:
	SArray()
	{
	}
	explicit SArray(size_t size, V val = 0)
	{
		resize(size, val);
	}
	/* A view of @arr's bytes as elements of V. */
	template <typename W> explicit SArray(const SArray<W> &arr)
	{
		*this = arr;
	}
	template <typename W> void operator=(const SArray<W> &arr)
	{
		size_ = arr.size() * sizeof(W) / sizeof(V);
		CHECK_EQ(size_ * sizeof(V), arr.size() * sizeof(W))
			<< "cannot view the array as this type";
		capacity_ = arr.capacity() * sizeof(W) / sizeof(V);
		ptr_ = std::shared_ptr<V>(arr.ptr(),
					  reinterpret_cast<V *>(arr.data()));
	}
	/* Over @data (not copied); freed with delete[] when the last copy
	 * goes if @deletable. */
	SArray(V *data, size_t size, bool deletable = false)
	{
		if (deletable)
			reset(data, size, [](V *p) { delete[] p; });
		else
			reset(data, size, [](V *) {});
	}
	explicit SArray(const std::vector<V> &vec)
	{
		CopyFrom(vec.data(), vec.size());
	}
	/* psched's: @size elements at @data, inside memory @owner keeps
	 * alive (a received message's block, psched_raw_keep()). */
	SArray(const std::shared_ptr<void> &owner, V *data, size_t size)
	{
		size_ = capacity_ = size;
		ptr_ = std::shared_ptr<V>(owner, data);
	}
	/* Shares @vec's memory, keeping @vec alive. */
	explicit SArray(const std::shared_ptr<std::vector<V>> &vec)
	{
		size_ = capacity_ = vec->size();
		ptr_ = std::shared_ptr<V>(vec, vec->data());
	}
	template <typename W> SArray(const std::initializer_list<W> &list)
	{
		CopyFrom(list.begin(), list.end());
	}
	template <typename W>
	void operator=(const std::initializer_list<W> &list)
	{
		CopyFrom(list.begin(), list.end());
	}

	void CopyFrom(const V *data, size_t size)
	{
		if (capacity_ >= size)
			size_ = size; /* in place, as ps-lite */
		else
			Fresh(size, size);
		if (size)
			std::memcpy(this->data(), data, size * sizeof(V));
	}
	void CopyFrom(const SArray<V> &other)
	{
		if (this != &other)
			CopyFrom(other.data(), other.size());
	}
	template <typename It> void CopyFrom(const It &first, const It &last)
	{
		size_t n = 0;

		for (It i = first; i != last; ++i)
			n++;
		reset(new V[n ? n : 1], n, [](V *p) { delete[] p; });
		n = 0;
		for (It i = first; i != last; ++i)
			data()[n++] = *i;
	}

	template <typename Deleter>
	void reset(V *data, size_t size, Deleter del)
	{
		size_ = capacity_ = size;
		ptr_.reset(data, del);
	}
	/* Grow (new memory, old values kept) or shrink; new elements are
	 * @val. */
	void resize(size_t size, V val = 0)
	{
		size_t old = size_;

		if (capacity_ >= size) {
			size_ = size;
		} else {
			std::shared_ptr<V> keep = ptr_;
			Fresh(size, size + 5);
			if (old)
				std::memcpy(data(), keep.get(),
					    old * sizeof(V));
		}
		for (size_t i = old; i < size; i++)
			data()[i] = val;
	}
	void reserve(size_t size)
	{
		size_t old = size_;

		if (capacity_ >= size)
			return;
		resize(size);
		size_ = old;
	}
	void clear()
	{
		reset(nullptr, 0, [](V *) {});
	}

	bool empty() const
	{
		return size_ == 0;
	}
	size_t size() const
	{
		return size_;
	}
	size_t capacity() const
	{
		return capacity_;
	}
	V *begin()
	{
		return data();
	}
	const V *begin() const
	{
		return data();
	}
	V *end()
	{
		return data() + size_;
	}
	const V *end() const
	{
		return data() + size_;
	}
	V *data() const
	{
		return ptr_.get();
	}
	std::shared_ptr<V> &ptr()
	{
		return ptr_;
	}
	const std::shared_ptr<V> &ptr() const
	{
		return ptr_;
	}
	V back() const
	{
		CHECK(!empty());
		return data()[size_ - 1];
	}
	V front() const
	{
		CHECK(!empty());
		return data()[0];
	}
	V &operator[](int i)
	{
		return data()[i];
	}
	const V &operator[](int i) const
	{
		return data()[i];
	}
	void push_back(const V &val)
	{
		if (size_ == capacity_)
			reserve(size_ * 2 + 5);
		data()[size_++] = val;
	}
	void pop_back()
	{
		if (size_)
			--size_;
	}
	void append(const SArray<V> &arr)
	{
		size_t old = size_;

		if (arr.empty())
			return;
		reserve(old + arr.size());
		std::memcpy(data() + old, arr.data(), arr.size() * sizeof(V));
		size_ = old + arr.size();
	}
	/* Elements [@begin, @end), sharing this memory. */
	SArray<V> segment(size_t begin, size_t end) const
	{
		SArray<V> s;

		CHECK_GE(end, begin);
		CHECK_LE(end, size_);
		s.ptr_ = std::shared_ptr<V>(ptr_, data() + begin);
		s.size_ = end - begin;
		s.capacity_ = end - begin;
		return s;
	}

private:
	/* New memory of @cap elements (uninitialised), @size of them in
	 * use.  Big arrays of plain values come from psched's blocks, kept
	 * mapped between requests (psched_raw_alloc()). */
	void Fresh(size_t size, size_t cap)
	{
		if (std::is_trivially_copyable<V>::value &&
		    cap >= kBlockBytes / sizeof(V)) {
			V *p = static_cast<V *>(
				psched_raw_alloc(cap * sizeof(V)));
			CHECK(p) << "no memory for " << cap * sizeof(V)
				 << " bytes";
			reset(p, size, [](V *q) { psched_raw_release(q); });
		} else {
			reset(new V[cap ? cap : 1], size,
			      [](V *q) { delete[] q; });
		}
		capacity_ = cap;
	}

	static const size_t kBlockBytes = 64 << 10;

	size_t size_ = 0;
	size_t capacity_ = 0;
	std::shared_ptr<V> ptr_;
};

/* The positions of sorted @arr whose values lie in [@lower, @upper). */
template <typename V> Range FindRange(const SArray<V> &arr, V lower, V upper)
{
	if (upper <= lower)
		return Range(0, 0);
	const V *lb = std::lower_bound(arr.begin(), arr.end(), lower);
	const V *ub = std::lower_bound(arr.begin(), arr.end(), upper);
	return Range(lb - arr.begin(), ub - arr.begin());
}

/* At most @m of @data's @n values, for logs. */
template <typename V>
inline std::string DebugStr(const V *data, int n, int m = 5)
{
	std::ostringstream os;

	os << "[" << n << "]: ";
	if (n < 2 * m) {
		for (int i = 0; i < n; ++i)
			os << data[i] << " ";
	} else {
		for (int i = 0; i < m; ++i)
			os << data[i] << " ";
		os << "... ";
		for (int i = n - m; i < n; ++i)
			os << data[i] << " ";
	}
	return os.str();
}

template <typename V>
std::ostream &operator<<(std::ostream &os, const SArray<V> &obj)
{
	os << DebugStr(obj.data(), (int)obj.size());
	return os;
}

} // namespace ps

#endif
