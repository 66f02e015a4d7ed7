/* SPDX-License-Identifier: MIT */
/*
 * The timestamps of one customer (a KVWorker or SimpleApp) on a worker:
 * each request of the application is one timestamp, made of raw requests
 * to one or more servers (psched_raw_request()).  The
 * answers they bring are kept with their timestamp; once the last one
 * is done, the timestamp's finisher runs (on psched's receive thread)
 * and Wait() returns.
 */
#ifndef PS_INTERNAL_TRACKER_H_
#define PS_INTERNAL_TRACKER_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "psched.h"
#include "ps/internal/postoffice.h"

namespace ps
{
namespace detail
{

/* One server's answer (TakeRawArrays()). */
struct RawAnswer {
	SArray<Key> keys;
	SArray<char> vals;
	SArray<uint32_t> lens; /* value bytes per key; empty: none */
};

class Tracker
{
public:
	/* Runs once every part is done: the answers, 0 or the first
	 * error. */
	using Finish = std::function<void(std::vector<RawAnswer> &, int)>;

	int NewRequest(const Finish &fin)
	{
		std::lock_guard<std::mutex> lk(mu_);
		int ts = next_++;
		std::shared_ptr<Entry> e = std::make_shared<Entry>();
		e->fin = fin;
		map_[ts] = e;
		return ts;
	}

	/* Issue the parts of @ts: each @rqs entry, its cb and answer set
	 * here; @keep holds what their buffers live in until the end. */
	void Issue(int ts, std::vector<struct psched_raw_request> &rqs,
		   const std::shared_ptr<void> &keep)
	{
		std::shared_ptr<Entry> e = Find(ts);
		{
			std::lock_guard<std::mutex> lk(mu_);
			e->remaining = (int)rqs.size();
			e->keep = keep;
		}
		if (rqs.empty()) {
			Done(e);
			return;
		}
		for (auto &rq : rqs) {
			Part *p = new Part{ this, e };
			rq.cb = &Tracker::OnDone;
			rq.arg = p;
			if (psched_msg_is_pull(rq)) {
				rq.answer = &Tracker::OnAnswer;
				rq.answer_arg = p;
			}
			int ret = psched_raw_request(Postoffice::Get()->node(),
						     &rq, nullptr);
			if (ret) {
				delete p;
				LOG(FATAL) << "request: " << psched_errmsg();
			}
		}
	}

	/* Block until @ts is done; a failed request aborts (as a failed
	 * CHECK in ps-lite would). */
	void WaitRequest(int ts)
	{
		std::unique_lock<std::mutex> lk(mu_);
		auto it = map_.find(ts);
		if (it == map_.end())
			return; /* waited for already */
		std::shared_ptr<Entry> e = it->second;
		cv_.wait(lk, [&e] { return e->done; });
		map_.erase(ts);
		if (e->err)
			LOG(FATAL) << "request " << ts << " failed: " << e->msg;
	}

	/* Parts of @ts that did not answer yet (ps-lite's NumResponse is
	 * the answered ones). */
	int Remaining(int ts)
	{
		std::lock_guard<std::mutex> lk(mu_);
		auto it = map_.find(ts);
		return it == map_.end() ? 0 : it->second->remaining;
	}

private:
	struct Entry {
		int remaining = 0;
		bool done = false;
		int err = 0;
		std::string msg;
		Finish fin;
		std::vector<RawAnswer> answers;
		std::shared_ptr<void> keep;
	};
	struct Part {
		Tracker *t;
		std::shared_ptr<Entry> e;
	};

	static bool psched_msg_is_pull(const struct psched_raw_request &rq)
	{
		return rq.op != PSCHED_OP_PUSH;
	}

	std::shared_ptr<Entry> Find(int ts)
	{
		std::lock_guard<std::mutex> lk(mu_);
		return map_.at(ts);
	}

	/* Receive thread, inside psched: only take the arrays. */
	static void OnAnswer(const struct psched_raw_msg *m, void *arg)
	{
		Part *p = static_cast<Part *>(arg);
		RawAnswer a;

		TakeRawArrays(m, &a.keys, &a.vals, &a.lens);
		std::lock_guard<std::mutex> lk(p->t->mu_);
		p->e->answers.push_back(a);
	}

	static void OnDone(int err, uint64_t req, void *arg)
	{
		Part *p = static_cast<Part *>(arg);
		Tracker *t = p->t;
		std::shared_ptr<Entry> e = p->e;
		bool last;

		(void)req;
		delete p;
		{
			std::lock_guard<std::mutex> lk(t->mu_);
			if (err && !e->err) {
				e->err = err;
				e->msg = psched_errmsg();
			}
			last = --e->remaining == 0;
		}
		if (last)
			t->Done(e);
	}

	void Done(const std::shared_ptr<Entry> &e)
	{
		if (e->fin)
			e->fin(e->answers, e->err);
		std::lock_guard<std::mutex> lk(mu_);
		e->done = true;
		e->answers.clear();
		e->keep.reset();
		cv_.notify_all();
	}

	std::mutex mu_;
	std::condition_variable cv_;
	int next_ = 0;
	std::unordered_map<int, std::shared_ptr<Entry>> map_;
};

} // namespace detail
} // namespace ps

#endif
