/* SPDX-License-Identifier: MIT */
/*
 * SimpleApp: requests of a head (an int) and a body (a string) to any
 * node or group of nodes, and their responses, as in ps-lite.  Over
 * psched they are application messages (psched_app_send(),
 * include/psched.h) on the scheduler links, so a body is at most
 * PSCHED_APP_MAX_BODY bytes (docs/pslite.md).
 */
#ifndef PS_SIMPLE_APP_H_
#define PS_SIMPLE_APP_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ps/base.h"
#include "ps/internal/postoffice.h"

namespace ps
{

struct SimpleData {
	int head;
	std::string body;
	int sender;
	int timestamp;
	int customer_id;
};

class SimpleApp : public AppSink
{
public:
	/* Messages of @app_id (and @customer_id, on a worker) come here
	 * from now on. */
	explicit SimpleApp(int app_id, int customer_id) : SimpleApp()
	{
		app_id_ = app_id;
		customer_id_ = customer_id;
		Listen();
	}
	virtual ~SimpleApp()
	{
		if (listening_)
			Postoffice::Get()->RemoveSink(app_id_, customer_id_,
						      this);
	}

	/* Send @req_head and @req_body to every node of @recv_id (a node
	 * id, a group id or a sum of groups); its timestamp, done once each
	 * of them responded. */
	virtual int Request(int req_head, const std::string &req_body,
			    int recv_id)
	{
		const std::vector<int> &ids =
			Postoffice::Get()->GetNodeIDs(recv_id);
		Flush();
		int ts;
		{
			std::lock_guard<std::mutex> lk(mu_);
			ts = next_ts_++;
			want_[ts] = ids.size();
			got_[ts] = 0;
		}
		for (int id : ids)
			Postoffice::Get()->SendApp(id, true, req_head, req_body,
						   app_id_, customer_id_, ts);
		return ts;
	}

	/* Block until every response to @timestamp came (within
	 * PS_REQUEST_TIMEOUT x 10: a lost node aborts the wait). */
	virtual void Wait(int timestamp)
	{
		std::unique_lock<std::mutex> lk(mu_);
		auto it = want_.find(timestamp);
		if (it == want_.end())
			return;
		size_t want = it->second;
		bool ok = cv_.wait_for(lk, std::chrono::minutes(10),
				       [&] { return got_[timestamp] >= want; });
		CHECK(ok) << "request " << timestamp << ": " << got_[timestamp]
			  << " of " << want << " responses";
		want_.erase(timestamp);
		got_.erase(timestamp);
	}

	/* Answer @recv_req with @res_body. */
	virtual void Response(const SimpleData &recv_req,
			      const std::string &res_body = "")
	{
		Postoffice::Get()->SendApp(
			recv_req.sender, false, recv_req.head, res_body,
			app_id_, recv_req.customer_id, recv_req.timestamp);
	}

	using Handle = std::function<void(const SimpleData &, SimpleApp *)>;
	virtual void set_request_handle(const Handle &request_handle)
	{
		CHECK(request_handle) << "invalid request handle";
		request_handle_ = request_handle;
		Flush();
	}
	virtual void set_response_handle(const Handle &response_handle)
	{
		CHECK(response_handle) << "invalid response handle";
		response_handle_ = response_handle;
		Flush();
	}

	int app_id() const
	{
		return app_id_;
	}
	int customer_id() const
	{
		return customer_id_;
	}

	/* psched's receive thread (or the sender's, to itself). */
	void OnApp(const struct psched_app_msg &m) override
	{
		SimpleData d;

		d.head = m.head;
		d.body.assign(static_cast<const char *>(m.body), m.len);
		d.sender = Postoffice::Get()->PsliteID(m.from);
		d.timestamp = m.timestamp;
		d.customer_id = (int)m.customer_id;
		if (m.request) {
			request_handle_(d, this);
			return;
		}
		response_handle_(d, this);
		std::lock_guard<std::mutex> lk(mu_);
		if (want_.count(m.timestamp))
			got_[m.timestamp]++;
		cv_.notify_all();
	}

protected:
	SimpleApp()
	{
		request_handle_ = [](const SimpleData &d, SimpleApp *app) {
			app->Response(d);
		};
		response_handle_ = [](const SimpleData &, SimpleApp *) {};
	}

	void Listen()
	{
		listening_ = true;
		Postoffice::Get()->AddSink(app_id_, customer_id_, this);
	}
	/* Messages that came before this app was there, now. */
	void Flush()
	{
		if (listening_)
			Postoffice::Get()->FlushHeld(app_id_, customer_id_);
	}

	int app_id_ = 0;
	int customer_id_ = 0;
	bool listening_ = false;
	Handle request_handle_;
	Handle response_handle_;

private:
	std::mutex mu_;
	std::condition_variable cv_;
	int next_ts_ = 0;
	std::unordered_map<int, size_t> want_;
	std::unordered_map<int, size_t> got_;
};

} // namespace ps

#endif
