/* SPDX-License-Identifier: MIT */
/*
 * SimpleApp: requests of a head (an int) and a body (a string) and their
 * responses, as in ps-lite.  Over psched a request goes from a worker to
 * servers (raw requests, include/psched.h): recv_id names a server, the
 * server group, or a sum of groups of which only the servers are asked
 * (docs/pslite.md says what differs).
 */
#ifndef PS_SIMPLE_APP_H_
#define PS_SIMPLE_APP_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ps/base.h"
#include "ps/internal/postoffice.h"
#include "ps/internal/tracker.h"

namespace ps
{

struct SimpleData {
	int head;
	std::string body;
	int sender;
	int timestamp;
	int customer_id;
};

class SimpleApp : public RawApp
{
      public:
	/* On a server, requests of @app_id come here from now on. */
	explicit SimpleApp(int app_id, int customer_id) : SimpleApp()
	{
		app_id_ = app_id;
		customer_id_ = customer_id;
		if (Postoffice::Get()->is_server())
			Listen();
	}
	virtual ~SimpleApp()
	{
		if (listening_)
			Postoffice::Get()->RemoveApp(app_id_, this);
		/* what the application never answered */
		std::lock_guard<std::mutex> lk(calls_mu_);
		for (auto &c : calls_)
			psched_raw_respond(Postoffice::Get()->node(), c.second,
					   nullptr);
		calls_.clear();
	}

	/* Send @req_head and @req_body to @recv_id; its timestamp. */
	virtual int Request(int req_head, const std::string &req_body,
			    int recv_id)
	{
		std::shared_ptr<std::string> body =
			std::make_shared<std::string>(req_body);
		int ts = tracker_.NewRequest(
			[this, req_head](std::vector<detail::RawAnswer> &ans,
					 int err) {
				for (auto &a : ans) {
					SimpleData d;
					d.head = req_head;
					d.body.assign(a.vals.data(),
						      a.vals.size());
					d.sender = -1;
					d.timestamp = -1;
					d.customer_id = customer_id_;
					if (!err)
						response_handle_(d, this);
				}
			});
		std::vector<struct psched_raw_request> rqs;
		for (int id : Postoffice::Get()->GetNodeIDs(recv_id)) {
			if (id < 8 || id % 2) {
				LOG(WARNING) << "SimpleApp: psched carries "
						"requests to servers only; "
						"node "
					     << id << " skipped";
				continue;
			}
			struct psched_raw_request rq;
			std::memset(&rq, 0, sizeof(rq));
			rq.op = PSCHED_OP_PUSHPULL;
			rq.vals = body->data();
			rq.nbytes = body->size();
			rq.cmd = req_head;
			rq.tag = RawTag(true, app_id_, customer_id_, 0);
			rq.server = (unsigned)Postoffice::IDtoRank(id) + 1;
			rqs.push_back(rq);
		}
		for (auto &rq : rqs)
			rq.tag = RawTag(true, app_id_, customer_id_, ts);
		tracker_.Issue(ts, rqs, body);
		return ts;
	}

	virtual void Wait(int timestamp)
	{
		tracker_.WaitRequest(timestamp);
	}

	/* Server: answer @recv_req with @res_body. */
	virtual void Response(const SimpleData &recv_req,
			      const std::string &res_body = "")
	{
		struct psched_raw_call *call =
			TakeCall(recv_req.sender, recv_req.customer_id,
				 recv_req.timestamp);
		CHECK(call) << "no request " << recv_req.timestamp << " of "
			    << recv_req.sender << " to answer";
		struct psched_raw_msg m;
		std::memset(&m, 0, sizeof(m));
		m.vals = res_body.data();
		m.nbytes = res_body.size();
		psched_raw_respond(Postoffice::Get()->node(), call, &m);
	}

	using Handle = std::function<void(const SimpleData &, SimpleApp *)>;
	virtual void set_request_handle(const Handle &request_handle)
	{
		CHECK(request_handle) << "invalid request handle";
		request_handle_ = request_handle;
	}
	virtual void set_response_handle(const Handle &response_handle)
	{
		CHECK(response_handle) << "invalid response handle";
		response_handle_ = response_handle;
	}

	int app_id() const
	{
		return app_id_;
	}
	int customer_id() const
	{
		return customer_id_;
	}

	void OnRaw(const RawRequest &r) override
	{
		SimpleData d;

		if (!r.simple) {
			LOG(ERROR) << "app " << app_id_
				   << " is no KVServer: a KV request from "
				   << r.sender << " is answered empty";
			psched_raw_respond(Postoffice::Get()->node(), r.call,
					   nullptr);
			return;
		}
		d.head = r.cmd;
		d.body.assign(r.vals.data(), r.vals.size());
		d.sender = r.sender;
		d.timestamp = r.timestamp;
		d.customer_id = r.customer_id;
		PutCall(r);
		request_handle_(d, this);
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
		Postoffice::Get()->AddApp(app_id_, this);
	}

	static uint64_t CallKey(int sender, int customer_id, int ts)
	{
		return ((uint64_t)(sender & 0xffff) << 48) |
		       ((uint64_t)(customer_id & 0xffff) << 32) | (uint32_t)ts;
	}
	void PutCall(const RawRequest &r)
	{
		std::lock_guard<std::mutex> lk(calls_mu_);
		calls_[CallKey(r.sender, r.customer_id, r.timestamp)] = r.call;
	}
	struct psched_raw_call *TakeCall(int sender, int customer_id, int ts)
	{
		std::lock_guard<std::mutex> lk(calls_mu_);
		auto it = calls_.find(CallKey(sender, customer_id, ts));
		if (it == calls_.end())
			return nullptr;
		struct psched_raw_call *c = it->second;
		calls_.erase(it);
		return c;
	}

	int app_id_ = 0;
	int customer_id_ = 0;
	bool listening_ = false;
	detail::Tracker tracker_;
	Handle request_handle_;
	Handle response_handle_;
	std::mutex calls_mu_;
	std::unordered_map<uint64_t, struct psched_raw_call *> calls_;
};

} // namespace ps

#endif
