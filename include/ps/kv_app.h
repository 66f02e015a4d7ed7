/* SPDX-License-Identifier: MIT */
/*
 * KVWorker and KVServer: ps-lite's key-value API over psched's raw
 * requests (include/psched.h, PSCHED_FAMILY_RAW; docs/pslite.md).  A
 * worker's request is cut over the servers by its slicer (by default
 * along Postoffice::GetServerKeyRanges()); each server's share goes to
 * that server's request handle with its KVMeta, and the handle answers
 * with Response() when it wants.  A pull's answers are put back together
 * in key order.
 */
#ifndef PS_KV_APP_H_
#define PS_KV_APP_H_

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/internal/tracker.h"
#include "ps/simple_app.h"

namespace ps
{

template <typename Val> struct KVPairs {
	SArray<Key> keys;
	SArray<Val> vals;
	SArray<int> lens; /* values per key; empty: the same for each */
	int priority = 0;
};

namespace detail
{

/* Value counts of @n keys as value bytes (psched's raw requests count
 * bytes). */
template <typename Val>
inline std::vector<uint32_t> LensToBytes(const SArray<int> &lens)
{
	std::vector<uint32_t> b(lens.size());
	for (size_t i = 0; i < lens.size(); i++)
		b[i] = (uint32_t)lens[i] * (uint32_t)sizeof(Val);
	return b;
}

template <typename Val>
inline SArray<int> BytesToLens(const SArray<uint32_t> &bytes)
{
	SArray<int> l(bytes.size());
	for (size_t i = 0; i < bytes.size(); i++)
		l[i] = (int)(bytes[i] / sizeof(Val));
	return l;
}

} // namespace detail

template <typename Val> class KVWorker : public SimpleApp
{
public:
	using SimpleApp::app_id_;
	using SimpleApp::customer_id_;
	using Callback = std::function<void()>;

	explicit KVWorker(int app_id, int customer_id) : SimpleApp()
	{
		app_id_ = app_id;
		customer_id_ = customer_id;
		Listen();
		using namespace std::placeholders;
		slicer_ = std::bind(&KVWorker<Val>::DefaultSlicer, this, _1, _2,
				    _3);
	}
	virtual ~KVWorker()
	{
	}

	int Push(const std::vector<Key> &keys, const std::vector<Val> &vals,
		 const std::vector<int> &lens = {}, int cmd = 0,
		 const Callback &cb = nullptr, int priority = 0)
	{
		return ZPush(SArray<Key>(keys), SArray<Val>(vals),
			     SArray<int>(lens), cmd, cb, priority);
	}

	int Pull(const std::vector<Key> &keys, std::vector<Val> *vals,
		 std::vector<int> *lens = nullptr, int cmd = 0,
		 const Callback &cb = nullptr, int priority = 0)
	{
		SArray<Key> skeys(keys);
		int ts = AddPullCB(skeys, vals, lens, cb);
		KVPairs<Val> kvs;
		kvs.keys = skeys;
		kvs.priority = priority;
		Send(ts, false, true, cmd, kvs);
		return ts;
	}

	int PushPull(const std::vector<Key> &keys, const std::vector<Val> &vals,
		     std::vector<Val> *outs, std::vector<int> *lens = nullptr,
		     int cmd = 0, const Callback &cb = nullptr,
		     int priority = 0)
	{
		CHECK_NOTNULL(outs);
		if (outs->empty())
			outs->resize(vals.size());
		else
			CHECK_EQ(vals.size(), outs->size());
		SArray<Key> skeys(keys);
		SArray<Val> svals(vals);
		SArray<int> slens;
		if (lens)
			slens.CopyFrom(lens->data(), lens->size());
		int ts = AddPullCB(skeys, outs, lens, cb);
		KVPairs<Val> kvs;
		kvs.keys = skeys;
		kvs.vals = svals;
		kvs.lens = slens;
		kvs.priority = priority;
		Send(ts, true, true, cmd, kvs);
		return ts;
	}

	void Wait(int timestamp) override
	{
		tracker_.WaitRequest(timestamp);
	}

	int ZPush(const SArray<Key> &keys, const SArray<Val> &vals,
		  const SArray<int> &lens = {}, int cmd = 0,
		  const Callback &cb = nullptr, int priority = 0)
	{
		int ts = tracker_.NewRequest(
			[cb](std::vector<detail::RawAnswer> &, int err) {
				if (!err && cb)
					cb();
			});
		KVPairs<Val> kvs;
		kvs.keys = keys;
		kvs.vals = vals;
		kvs.lens = lens;
		kvs.priority = priority;
		Send(ts, true, false, cmd, kvs);
		return ts;
	}

	int ZPull(const SArray<Key> &keys, SArray<Val> *vals,
		  SArray<int> *lens = nullptr, int cmd = 0,
		  const Callback &cb = nullptr, int priority = 0)
	{
		int ts = AddPullCB(keys, vals, lens, cb);
		KVPairs<Val> kvs;
		kvs.keys = keys;
		kvs.priority = priority;
		Send(ts, false, true, cmd, kvs);
		return ts;
	}

	int ZPushPull(const SArray<Key> &keys, const SArray<Val> &vals,
		      SArray<Val> *outs, SArray<int> *lens = nullptr,
		      int cmd = 0, const Callback &cb = nullptr,
		      int priority = 0)
	{
		KVPairs<Val> kvs;
		kvs.keys = keys;
		kvs.vals = vals;
		kvs.priority = priority;
		if (lens)
			kvs.lens = *lens;
		int ts = AddPullCB(keys, outs, lens, cb);
		Send(ts, true, true, cmd, kvs);
		return ts;
	}

	using SlicedKVs = std::vector<std::pair<bool, KVPairs<Val>>>;
	using Slicer = std::function<void(const KVPairs<Val> &send,
					  const std::vector<Range> &ranges,
					  SlicedKVs *sliced)>;

	void set_slicer(const Slicer &slicer)
	{
		CHECK(slicer);
		slicer_ = slicer;
	}

private:
	/* What a request's parts send from, kept until it is done. */
	struct Sent {
		SlicedKVs sliced;
		std::vector<std::vector<uint32_t>> lens;
	};

	void Send(int ts, bool push, bool pull, int cmd,
		  const KVPairs<Val> &kvs)
	{
		std::shared_ptr<Sent> sent = std::make_shared<Sent>();
		std::vector<struct psched_raw_request> rqs;

		slicer_(kvs, Postoffice::Get()->GetServerKeyRanges(),
			&sent->sliced);
		sent->lens.resize(sent->sliced.size());
		for (size_t i = 0; i < sent->sliced.size(); ++i) {
			const KVPairs<Val> &s = sent->sliced[i].second;
			struct psched_raw_request rq;

			if (!sent->sliced[i].first)
				continue;
			std::memset(&rq, 0, sizeof(rq));
			rq.op = push && pull ? PSCHED_OP_PUSHPULL
				: push	     ? PSCHED_OP_PUSH
					     : PSCHED_OP_PULL;
			rq.priority = -kvs.priority; /* ps-lite: larger first */
			rq.keys = s.keys.data();
			rq.nkeys = s.keys.size();
			if (push) {
				rq.vals = s.vals.data();
				rq.nbytes = s.vals.size() * sizeof(Val);
			}
			if (push && !s.lens.empty()) {
				sent->lens[i] =
					detail::LensToBytes<Val>(s.lens);
				rq.lens = sent->lens[i].data();
			}
			rq.cmd = cmd;
			rq.tag = RawTag(app_id_, customer_id_, ts);
			rq.server = (unsigned)i + 1;
			rqs.push_back(rq);
		}
		tracker_.Issue(ts, rqs, sent);
	}

	/* A timestamp whose answers land in @vals (and @lens) in key order,
	 * then @cb runs. */
	template <typename C, typename D>
	int AddPullCB(const SArray<Key> &keys, C *vals, D *lens,
		      const Callback &cb)
	{
		return tracker_.NewRequest(
			[keys, vals, lens,
			 cb](std::vector<detail::RawAnswer> &ans, int err) {
				if (err)
					return;
				Land(keys, ans, vals, lens);
				if (cb)
					cb();
			});
	}

	template <typename C, typename D>
	static void Land(const SArray<Key> &keys,
			 std::vector<detail::RawAnswer> &ans, C *vals, D *lens)
	{
		size_t total_key = 0, total_val = 0;

		std::sort(ans.begin(), ans.end(),
			  [](const detail::RawAnswer &a,
			     const detail::RawAnswer &b) {
				  return a.keys.empty() ? !b.keys.empty()
					 : b.keys.empty()
						 ? false
						 : a.keys.front() <
							   b.keys.front();
			  });
		for (const auto &a : ans) {
			total_key += a.keys.size();
			total_val += a.vals.size() / sizeof(Val);
			if (lens)
				CHECK_EQ(a.lens.size(), a.keys.size())
					<< "a server answered without lens";
		}
		CHECK_EQ(total_key, keys.size()) << "lost some servers?";
		CHECK_NOTNULL(vals);
		/* one server's answer: an SArray takes its block */
		bool adopted =
			vals->empty() && ans.size() == 1 && Adopt(vals, ans[0]);
		if (!adopted && vals->empty())
			vals->resize(total_val);
		else if (!adopted)
			CHECK_EQ(vals->size(), total_val);
		Val *pv = vals->data();
		int *pl = nullptr;
		if (lens) {
			if (lens->empty())
				lens->resize(keys.size());
			else
				CHECK_EQ(lens->size(), keys.size());
			pl = lens->data();
		}
		for (const auto &a : ans) {
			size_t n = a.vals.size() / sizeof(Val);
			if (n && !adopted)
				std::memcpy(pv, a.vals.data(), n * sizeof(Val));
			pv += n;
			for (size_t i = 0; pl && i < a.lens.size(); i++)
				*pl++ = (int)(a.lens[i] / sizeof(Val));
		}
	}

	/* An SArray takes the answer's memory as it is; a vector is
	 * copied into. */
	static bool Adopt(SArray<Val> *vals, const detail::RawAnswer &a)
	{
		if (a.vals.size() % sizeof(Val))
			return false;
		*vals = SArray<Val>(a.vals);
		return true;
	}
	static bool Adopt(std::vector<Val> *, const detail::RawAnswer &)
	{
		return false;
	}

	void DefaultSlicer(const KVPairs<Val> &send,
			   const std::vector<Range> &ranges, SlicedKVs *sliced)
	{
		size_t n = ranges.size(), k = 0;
		std::vector<size_t> pos(n + 1, 0);
		const Key *keys = send.keys.begin();
		size_t nkeys = send.keys.size();

		sliced->resize(n);
		/* Range i ends where range i + 1 begins; the last takes
		 * every key left (also kMaxKey). */
		for (size_t i = 0; i < n; ++i)
			pos[i + 1] =
				i + 1 == n ? nkeys
					   : std::lower_bound(keys + pos[i],
							      keys + nkeys,
							      ranges[i].end()) -
						     keys;
		if (!nkeys) {
			for (size_t i = 0; i < n; ++i)
				(*sliced)[i].first = false;
			return;
		}
		if (send.lens.empty()) {
			k = send.vals.size() / nkeys;
			CHECK_EQ(k * nkeys, send.vals.size());
		} else {
			CHECK_EQ(send.lens.size(), nkeys);
		}
		size_t vb = 0, ve = 0;
		for (size_t i = 0; i < n; ++i) {
			auto &s = (*sliced)[i];
			s.first = pos[i + 1] != pos[i];
			if (!s.first)
				continue;
			s.second.keys = send.keys.segment(pos[i], pos[i + 1]);
			if (send.lens.size()) {
				s.second.lens =
					send.lens.segment(pos[i], pos[i + 1]);
				for (int l : s.second.lens)
					ve += l;
				if (!send.vals.empty())
					s.second.vals =
						send.vals.segment(vb, ve);
				vb = ve;
			} else if (!send.vals.empty()) {
				s.second.vals = send.vals.segment(
					pos[i] * k, pos[i + 1] * k);
			}
		}
	}

	Slicer slicer_;
	detail::Tracker tracker_;
};

/* What a server's request handle sees of a request. */
struct KVMeta {
	int cmd;
	bool push;
	bool pull;
	int sender;
	int timestamp;
	int customer_id;
};

template <typename Val> class KVServer : public SimpleApp, public RawApp
{
public:
	explicit KVServer(int app_id) : SimpleApp()
	{
		app_id_ = app_id;
		customer_id_ = app_id;
		Listen();
	}
	virtual ~KVServer()
	{
		if (raw_listening_)
			Postoffice::Get()->RemoveApp(app_id_, this);
		/* what the handle never answered */
		std::lock_guard<std::mutex> lk(calls_mu_);
		for (auto &c : calls_)
			psched_raw_respond(Postoffice::Get()->node(),
					   c.second.call, nullptr);
		calls_.clear();
	}

	using ReqHandle = std::function<void(const KVMeta &req_meta,
					     const KVPairs<Val> &req_data,
					     KVServer *server)>;
	/* Requests are handed to @request_handle from now on (those that
	 * came before it wait for it). */
	void set_request_handle(const ReqHandle &request_handle)
	{
		CHECK(request_handle) << "invalid request handle";
		kv_handle_ = request_handle;
		if (!raw_listening_ && Postoffice::Get()->is_server()) {
			raw_listening_ = true;
			Postoffice::Get()->AddApp(app_id_, this);
		}
	}

	/* Answer request @req (from any thread, once). */
	void Response(const KVMeta &req,
		      const KVPairs<Val> &res = KVPairs<Val>())
	{
		Call c;
		CHECK(TakeCall(req.sender, req.customer_id, req.timestamp, &c))
			<< "no request " << req.timestamp << " of node "
			<< req.sender << " to answer";
		std::vector<uint32_t> lens = detail::LensToBytes<Val>(res.lens);
		struct psched_raw_msg m;
		std::memset(&m, 0, sizeof(m));
		m.nkeys = res.keys.size();
		m.keys = res.keys.data();
		/* the keys the pull asked (as KVServerDefaultHandle answers):
		 * the worker has them, they are not sent back */
		m.keys_asked = m.nkeys && c.keys.size() == m.nkeys &&
			       (c.keys.data() == m.keys ||
				!std::memcmp(c.keys.data(), m.keys,
					     m.nkeys * sizeof(Key)));
		m.lens = lens.empty() ? nullptr : lens.data();
		m.vals = res.vals.data();
		m.nbytes = res.vals.size() * sizeof(Val);
		int ret = psched_raw_respond(Postoffice::Get()->node(), c.call,
					     &m);
		if (ret)
			LOG(WARNING) << "response: " << psched_errmsg();
	}
	using SimpleApp::Response;

	void OnRaw(const RawRequest &r) override
	{
		KVMeta meta;
		meta.cmd = r.cmd;
		meta.push = r.push;
		meta.pull = r.pull;
		meta.sender = r.sender;
		meta.timestamp = r.timestamp;
		meta.customer_id = r.customer_id;
		KVPairs<Val> data;
		data.keys = r.keys;
		if (r.push) {
			CHECK_EQ(r.vals.size() % sizeof(Val), 0u)
				<< "values of a partial element";
			data.vals = SArray<Val>(r.vals);
		}
		if (!r.lens.empty())
			data.lens = detail::BytesToLens<Val>(r.lens);
		PutCall(r);
		kv_handle_(meta, data, this);
	}

private:
	static uint64_t CallKey(int sender, int customer_id, int ts)
	{
		return ((uint64_t)(sender & 0xffff) << 48) |
		       ((uint64_t)(customer_id & 0xffff) << 32) | (uint32_t)ts;
	}
	/* A request waiting for its Response(), with a pull's keys. */
	struct Call {
		struct psched_raw_call *call = nullptr;
		SArray<Key> keys;
	};
	void PutCall(const RawRequest &r)
	{
		Call c;
		c.call = r.call;
		if (r.pull)
			c.keys = r.keys;
		std::lock_guard<std::mutex> lk(calls_mu_);
		calls_[CallKey(r.sender, r.customer_id, r.timestamp)] = c;
	}
	bool TakeCall(int sender, int customer_id, int ts, Call *c)
	{
		std::lock_guard<std::mutex> lk(calls_mu_);
		auto it = calls_.find(CallKey(sender, customer_id, ts));
		if (it == calls_.end())
			return false;
		*c = it->second;
		calls_.erase(it);
		return true;
	}

	ReqHandle kv_handle_;
	bool raw_listening_ = false;
	std::mutex calls_mu_;
	std::unordered_map<uint64_t, Call> calls_;
};

/* A server that adds every push into its store and answers pulls with
 * what it holds, one value per key. */
template <typename Val> struct KVServerDefaultHandle {
	void operator()(const KVMeta &req_meta, const KVPairs<Val> &req_data,
			KVServer<Val> *server)
	{
		size_t n = req_data.keys.size();
		KVPairs<Val> res;

		if (req_meta.push)
			CHECK_EQ(n, req_data.vals.size());
		if (req_meta.pull) {
			res.keys = req_data.keys;
			res.vals.resize(n);
		}
		for (size_t i = 0; i < n; ++i) {
			Key key = req_data.keys[i];
			if (req_meta.push)
				store[key] += req_data.vals[i];
			if (req_meta.pull)
				res.vals[i] = store[key];
		}
		server->Response(req_meta, res);
	}
	std::unordered_map<Key, Val> store;
};

} // namespace ps

#endif
