/* SPDX-License-Identifier: MIT */
/*
 * ps-lite's Postoffice over one psched node (docs/pslite.md): starting
 * and stopping the node from the DMLC_* environment, the cluster's shape,
 * ps-lite's node ids and groups, barriers, the servers' key ranges, and
 * the routing of raw requests (include/psched.h, PSCHED_FAMILY_RAW) on a
 * server to the app (KVServer, SimpleApp) of their app id.
 */
#ifndef PS_INTERNAL_POSTOFFICE_H_
#define PS_INTERNAL_POSTOFFICE_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "psched.h"
#include "ps/base.h"
#include "ps/range.h"
#include "ps/sarray.h"

namespace ps
{

/* A raw request as a server's app gets it: its call (answered once with
 * psched_raw_respond()) and copies of what the worker sent. */
struct RawRequest {
	struct psched_raw_call *call;
	int cmd;
	bool push;
	bool pull;
	int sender; /* ps-lite node id of the worker */
	int app_id;
	int customer_id;
	int timestamp;
	SArray<Key> keys;
	SArray<char> vals;
	SArray<uint32_t> lens; /* value bytes per key; empty: none sent */
};

/* @n elements at @p as @out: over the block @own keeps alive, or copied
 * without one. */
template <typename V>
inline void RawArray(const std::shared_ptr<void> &own, const V *p, size_t n,
		     SArray<V> *out)
{
	if (own)
		*out = SArray<V>(own, const_cast<V *>(p), n);
	else
		out->CopyFrom(p, n);
}

/* The keys, values and byte counts of raw message @m as arrays: over
 * the message's own block when psched hands it over (psched_raw_keep()),
 * else copied.  During @m's call only. */
inline void TakeRawArrays(const struct psched_raw_msg *m, SArray<Key> *keys,
			  SArray<char> *vals, SArray<uint32_t> *lens)
{
	void *blk = psched_raw_keep(m);
	std::shared_ptr<void> own;

	if (blk)
		own.reset(blk, psched_raw_release);
	/* An answer for the keys asked: the request's own, alive until it
	 * is done. */
	if (m->keys_asked)
		*keys = SArray<Key>(const_cast<Key *>(m->keys), m->nkeys);
	else
		RawArray(own, m->keys, m->nkeys, keys);
	RawArray(own, static_cast<const char *>(m->vals), (size_t)m->nbytes,
		 vals);
	if (m->lens)
		RawArray(own, m->lens, m->nkeys, lens);
}

/* What the postoffice hands raw requests to. */
class RawApp
{
public:
	virtual ~RawApp()
	{
	}
	virtual void OnRaw(const RawRequest &req) = 0;
};

/* What the postoffice hands application messages (SimpleApp) to. */
class AppSink
{
public:
	virtual ~AppSink()
	{
	}
	virtual void OnApp(const struct psched_app_msg &msg) = 0;
};

/* The tag of a raw request: which app and customer sent it and its
 * timestamp. */
inline uint64_t RawTag(int app_id, int customer_id, int ts)
{
	return ((uint64_t)(app_id & 0xffff) << 48) |
	       ((uint64_t)(customer_id & 0xffff) << 32) | (uint32_t)ts;
}

class Postoffice
{
public:
	using Callback = std::function<void()>;

	static Postoffice *Get()
	{
		static Postoffice e;
		return &e;
	}

	/* Join the job as DMLC_ROLE says (blocks until every node is up,
	 * so @do_barrier changes nothing).  Each
	 * customer of the process calls it; the first starts the node. */
	void Start(int customer_id, const char *argv0, bool do_barrier)
	{
		std::lock_guard<std::mutex> lk(start_mu_);
		(void)customer_id;
		(void)argv0;
		(void)do_barrier;
		if (customers_++)
			return;
		StartNode();
		/* psched's scheduler is up before the other nodes: like
		 * ps-lite's, Start returns on every node once all are. */
		Barrier(0, kScheduler + kServerGroup + kWorkerGroup);
	}

	/* Leave: the last customer of the process waits at a barrier of
	 * every node (@do_barrier), runs the exit callbacks, then stops the
	 * node (a server or the scheduler serves until the job ends). */
	void Finalize(int customer_id, bool do_barrier = true)
	{
		std::lock_guard<std::mutex> lk(start_mu_);
		(void)customer_id;
		if (!node_ || --customers_ > 0)
			return;
		{
			std::lock_guard<std::recursive_mutex> alk(app_mu_);
			std::vector<uint64_t> keys;
			for (auto &h : held_app_)
				keys.push_back(h.first);
			for (uint64_t k : keys)
				FlushKey(k);
		}
		if (do_barrier)
			Barrier(0, kScheduler + kServerGroup + kWorkerGroup);
		for (auto &cb : exit_callbacks_)
			if (cb)
				cb();
		exit_callbacks_.clear();
		if (!is_worker_) {
			int ret = psched_node_run(node_);
			if (ret)
				LOG(ERROR) << "psched: " << psched_strerror(ret)
					   << ": " << psched_errmsg();
		}
		psched_node_destroy(node_);
		node_ = nullptr;
	}

	void RegisterExitCallback(const Callback &cb)
	{
		std::lock_guard<std::mutex> lk(start_mu_);
		exit_callbacks_.push_back(cb);
	}

	static int WorkerRankToID(int rank)
	{
		return rank * 2 + 9;
	}
	static int ServerRankToID(int rank)
	{
		return rank * 2 + 8;
	}
	static int IDtoRank(int id)
	{
		return std::max((id - 8) / 2, 0);
	}

	int num_workers() const
	{
		return num_workers_;
	}
	int num_servers() const
	{
		return num_servers_;
	}
	int my_rank() const
	{
		return rank_;
	}
	int is_worker() const
	{
		return is_worker_;
	}
	int is_server() const
	{
		return is_server_;
	}
	int is_scheduler() const
	{
		return is_scheduler_;
	}
	int verbose() const
	{
		return 0;
	}
	bool is_recovery() const
	{
		return false;
	}
	/* The psched node under this postoffice (NULL before Start). */
	struct psched_node *node() const
	{
		return node_;
	}

	/* The node ids of group or node @node_id. */
	const std::vector<int> &GetNodeIDs(int node_id) const
	{
		auto it = node_ids_.find(node_id);
		CHECK(it != node_ids_.end())
			<< "node " << node_id << " doesn't exist";
		return it->second;
	}

	/* Server rank i's keys, as psched_raw_key_range() cuts them. */
	const std::vector<Range> &GetServerKeyRanges()
	{
		std::lock_guard<std::mutex> lk(ranges_mu_);
		if (ranges_.empty()) {
			for (int i = 0; i < num_servers_; ++i) {
				uint64_t b, e;

				psched_raw_key_range((unsigned)num_servers_,
						     (unsigned)i, &b, &e);
				ranges_.push_back(Range(b, e));
			}
		}
		return ranges_;
	}

	/* Wait until every node of @node_group (kScheduler, kServerGroup,
	 * kWorkerGroup, or a sum) got here, within PS_REQUEST_TIMEOUT.  A
	 * group without the scheduler is psched's barrier; with it, the
	 * scheduler collects every member's arrival (an application
	 * message) and releases them, as ps-lite's does. */
	void Barrier(int customer_id, int node_group)
	{
		unsigned group = (unsigned)node_group & 7u;
		unsigned mine = is_server_   ? PSCHED_GROUP_SERVERS
				: is_worker_ ? PSCHED_GROUP_WORKERS
					     : PSCHED_GROUP_SCHEDULER;

		(void)customer_id;
		if (!(group & mine))
			return;
		if (!(group & PSCHED_GROUP_SCHEDULER)) {
			int ret = psched_barrier(node_, group, 0);
			CHECK_EQ(ret, 0) << "barrier: " << psched_errmsg();
			return;
		}
		if (is_scheduler_)
			ReleaseBarrier(group);
		else
			ArriveBarrier(group);
	}

	/* Node ids: ps-lite's (scheduler 1, servers 8 + 2r, workers 9 + 2r)
	 * and psched's (scheduler 0, servers 1 + r, workers 1 + S + r). */
	int PschedID(int id) const
	{
		if (id == kScheduler)
			return 0;
		if (id >= 8 && id % 2 == 0)
			return 1 + IDtoRank(id);
		return 1 + num_servers_ + IDtoRank(id);
	}
	int PsliteID(int id) const
	{
		if (id == 0)
			return kScheduler;
		if (id <= num_servers_)
			return ServerRankToID(id - 1);
		return WorkerRankToID(id - 1 - num_servers_);
	}

	/* Send an application message to ps-lite node @to. */
	void SendApp(int to, bool request, int head, const std::string &body,
		     int app_id, int customer_id, int ts)
	{
		struct psched_app_msg m;

		std::memset(&m, 0, sizeof(m));
		m.to = PschedID(to);
		m.request = request;
		m.head = head;
		m.body = body.data();
		m.len = body.size();
		m.app_id = (uint32_t)app_id;
		m.customer_id = (uint32_t)customer_id;
		m.timestamp = ts;
		int ret = psched_app_send(node_, &m);
		CHECK_EQ(ret, 0) << "SimpleApp: " << psched_errmsg();
	}

	/* Application messages of @app_id (and, on a worker, @customer_id)
	 * go to @sink from now on; those that came before wait for
	 * FlushHeld(), so that they meet the handle the app sets after its
	 * constructor. */
	void AddSink(int app_id, int customer_id, AppSink *sink)
	{
		std::lock_guard<std::recursive_mutex> lk(app_mu_);
		sinks_[SinkKey(app_id, customer_id)] = sink;
	}
	/* Hand the messages held for @app_id / @customer_id to its sink. */
	void FlushHeld(int app_id, int customer_id)
	{
		std::lock_guard<std::recursive_mutex> lk(app_mu_);
		FlushKey(SinkKey(app_id, customer_id));
	}
	void RemoveSink(int app_id, int customer_id, AppSink *sink)
	{
		std::lock_guard<std::recursive_mutex> lk(app_mu_);
		auto it = sinks_.find(SinkKey(app_id, customer_id));
		if (it != sinks_.end() && it->second == sink)
			sinks_.erase(it);
	}

	/* Nodes seen dead (their ids are not known here: one -1 each). */
	std::vector<int> GetDeadNodes(int t = 60)
	{
		(void)t;
		int n = node_ ? psched_num_dead_nodes(node_, 7) : 0;
		return std::vector<int>(n > 0 ? n : 0, -1);
	}

	/* Server: hand raw requests of @app_id to @app from now on (and
	 * those that came before). */
	void AddApp(int app_id, RawApp *app)
	{
		std::lock_guard<std::mutex> lk(dispatch_mu_);
		apps_[app_id] = app;
		auto q = held_.find(app_id);
		if (q == held_.end())
			return;
		for (auto &r : q->second)
			app->OnRaw(r);
		held_.erase(q);
	}
	void RemoveApp(int app_id, RawApp *app)
	{
		std::lock_guard<std::mutex> lk(dispatch_mu_);
		auto it = apps_.find(app_id);
		if (it != apps_.end() && it->second == app)
			apps_.erase(it);
	}

private:
	Postoffice()
	{
	}

	void StartNode()
	{
		struct psched_cfg *cfg = nullptr;
		int ret = psched_cfg_create(&cfg);

		CHECK_EQ(ret, 0) << psched_errmsg();
		ret = psched_cfg_from_env(cfg);
		CHECK_EQ(ret, 0) << psched_errmsg();
		/* Before the node exists, so no request finds it missing. */
		psched_server_set_raw_handler(nullptr, &Postoffice::OnRawC,
					      this);
		psched_set_app_handler(nullptr, &Postoffice::OnAppC, this);
		char tmo[32];
		if (!psched_cfg_get(cfg, "request-timeout", tmo, sizeof(tmo)))
			timeout_ms_ = (long)(std::atof(tmo) * 1000);
		ret = psched_node_create(cfg, &node_);
		psched_cfg_destroy(cfg);
		CHECK_EQ(ret, 0) << "psched: " << psched_errmsg();
		enum psched_role role = psched_node_role(node_);
		is_worker_ = role == PSCHED_ROLE_WORKER;
		is_server_ = role == PSCHED_ROLE_SERVER;
		is_scheduler_ = role == PSCHED_ROLE_SCHEDULER;
		rank_ = psched_node_rank(node_);
		WritePort();
		num_workers_ = (int)psched_num_workers(node_);
		num_servers_ = (int)psched_num_servers(node_);
		MakeNodeIDs();
	}

	/* A scheduler started on DMLC_PS_ROOT_PORT=0 picked a free port:
	 * written to the file PS_PSLITE_PORT_FILE names, for launchers. */
	void WritePort()
	{
		const char *path = std::getenv("PS_PSLITE_PORT_FILE");

		if (!is_scheduler_ || !path || !*path)
			return;
		std::string tmp = std::string(path) + ".tmp";
		FILE *f = std::fopen(tmp.c_str(), "w");
		CHECK(f) << "cannot write " << tmp;
		std::fprintf(f, "%u\n", psched_node_port(node_));
		CHECK_EQ(std::fclose(f), 0) << "cannot write " << tmp;
		CHECK_EQ(std::rename(tmp.c_str(), path), 0)
			<< "cannot write " << path;
	}

	void MakeNodeIDs()
	{
		for (int g = 1; g <= 7; g++) {
			std::vector<int> &ids = node_ids_[g];
			if (g & kScheduler)
				ids.push_back(kScheduler);
			for (int i = 0; (g & kServerGroup) && i < num_servers_;
			     i++)
				ids.push_back(ServerRankToID(i));
			for (int i = 0; (g & kWorkerGroup) && i < num_workers_;
			     i++)
				ids.push_back(WorkerRankToID(i));
		}
		for (int i = 0; i < num_servers_; i++)
			node_ids_[ServerRankToID(i)] = { ServerRankToID(i) };
		for (int i = 0; i < num_workers_; i++)
			node_ids_[WorkerRankToID(i)] = { WorkerRankToID(i) };
	}

	/* The node's receive thread: take the request's arrays, hand it to
	 * its app or hold it until that app is there. */
	static void OnRawC(struct psched_node *node,
			   struct psched_raw_call *call,
			   const struct psched_raw_msg *m, void *arg)
	{
		Postoffice *po = static_cast<Postoffice *>(arg);
		RawRequest r;

		(void)node;
		r.call = call;
		r.cmd = m->cmd;
		r.push = m->push;
		r.pull = m->pull;
		r.app_id = (int)((m->tag >> 48) & 0xffff);
		r.customer_id = (int)((m->tag >> 32) & 0xffff);
		r.timestamp = (int)(uint32_t)m->tag;
		r.sender = WorkerRankToID(m->rank);
		TakeRawArrays(m, &r.keys, &r.vals, &r.lens);
		std::lock_guard<std::mutex> lk(po->dispatch_mu_);
		auto it = po->apps_.find(r.app_id);
		if (it != po->apps_.end())
			it->second->OnRaw(r);
		else
			po->held_[r.app_id].push_back(r);
	}

	/* Application messages of this app id for ReleaseBarrier() and
	 * ArriveBarrier(); the head is the group. */
	static const uint32_t kBarrierApp = 0xffffffffu;

	struct HeldApp {
		struct psched_app_msg msg;
		std::string body;
	};

	/* app_mu_ held. */
	void FlushKey(uint64_t k)
	{
		auto it = sinks_.find(k);
		auto q = held_app_.find(k);
		if (it == sinks_.end() || q == held_app_.end())
			return;
		std::vector<HeldApp> held;
		held.swap(q->second);
		held_app_.erase(q);
		for (auto &h : held) {
			h.msg.body = h.body.data();
			it->second->OnApp(h.msg);
		}
	}

	uint64_t SinkKey(int app_id, int customer_id) const
	{
		/* ps-lite finds a server's or the scheduler's app by its app
		 * id alone, a worker's by app and customer. */
		return ((uint64_t)(uint32_t)app_id << 32) |
		       (is_worker_ ? (uint32_t)customer_id : 0u);
	}

	/* The node's receive thread (or a sender to itself). */
	static void OnAppC(struct psched_node *node,
			   const struct psched_app_msg *m, void *arg)
	{
		Postoffice *po = static_cast<Postoffice *>(arg);

		(void)node;
		if (m->app_id == kBarrierApp) {
			po->OnBarrierMsg(*m);
			return;
		}
		std::lock_guard<std::recursive_mutex> lk(po->app_mu_);
		uint64_t k = po->SinkKey((int)m->app_id, (int)m->customer_id);
		auto it = po->sinks_.find(k);
		if (it != po->sinks_.end() && !po->held_app_.count(k)) {
			it->second->OnApp(*m);
			return;
		}
		HeldApp h;
		h.msg = *m;
		h.body.assign(static_cast<const char *>(m->body), m->len);
		po->held_app_[k].push_back(h);
	}

	void OnBarrierMsg(const struct psched_app_msg &m)
	{
		std::lock_guard<std::mutex> lk(barrier_mu_);
		unsigned g = (unsigned)m.head & 7u;
		if (m.request)
			arrived_[g]++;
		else
			released_[g]++;
		barrier_cv_.notify_all();
	}

	/* How long a barrier may take: PS_REQUEST_TIMEOUT. */
	std::chrono::milliseconds BarrierTimeout() const
	{
		return std::chrono::milliseconds(timeout_ms_ > 0 ? timeout_ms_
								 : 60000);
	}

	void ArriveBarrier(unsigned group)
	{
		std::unique_lock<std::mutex> lk(barrier_mu_);
		uint64_t want = ++entered_[group];
		lk.unlock();
		SendApp(kScheduler, true, (int)group, std::string(),
			(int)kBarrierApp, 0, 0);
		lk.lock();
		bool ok = barrier_cv_.wait_for(lk, BarrierTimeout(), [&] {
			return released_[group] >= want;
		});
		CHECK(ok) << "barrier of group " << group
			  << " not released by the scheduler in time";
	}

	void ReleaseBarrier(unsigned group)
	{
		const std::vector<int> &ids = GetNodeIDs((int)group);
		uint64_t others = ids.size() - 1;
		std::unique_lock<std::mutex> lk(barrier_mu_);
		bool ok = barrier_cv_.wait_for(lk, BarrierTimeout(), [&] {
			return arrived_[group] >= others;
		});
		CHECK(ok) << "barrier of group " << group << ": "
			  << arrived_[group] << " of " << others
			  << " nodes arrived in time";
		arrived_[group] -= others;
		lk.unlock();
		for (int id : ids)
			if (id != kScheduler)
				SendApp(id, false, (int)group, std::string(),
					(int)kBarrierApp, 0, 0);
	}

	struct psched_node *node_ = nullptr;
	int customers_ = 0;
	bool is_worker_ = false, is_server_ = false, is_scheduler_ = false;
	int rank_ = 0, num_workers_ = 0, num_servers_ = 0;
	std::mutex start_mu_;
	std::vector<Callback> exit_callbacks_;
	std::unordered_map<int, std::vector<int>> node_ids_;
	std::mutex ranges_mu_;
	std::vector<Range> ranges_;
	std::mutex dispatch_mu_;
	std::unordered_map<int, RawApp *> apps_;
	std::unordered_map<int, std::vector<RawRequest>> held_;
	long timeout_ms_ = 0;
	std::recursive_mutex app_mu_;
	std::unordered_map<uint64_t, AppSink *> sinks_;
	std::unordered_map<uint64_t, std::vector<HeldApp>> held_app_;
	std::mutex barrier_mu_;
	std::condition_variable barrier_cv_;
	uint64_t arrived_[8] = { 0 };  /* scheduler: arrivals per group */
	uint64_t entered_[8] = { 0 };  /* member: barriers entered */
	uint64_t released_[8] = { 0 }; /* member: barriers released */
};

} // namespace ps

#endif
