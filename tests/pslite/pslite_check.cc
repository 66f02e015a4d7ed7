// SPDX-License-Identifier: MIT
/*
 * ps-lite's C++ API over psched (include/ps/), used as ps-lite programs
 * use it: one binary started as scheduler, servers and workers by
 * DMLC_ROLE (tests/integration/test_pslite.sh).  The mode, argv[1]:
 *   connection  Start / Finalize, the cluster's shape and node ids
 *   kv          KVServerDefaultHandle: Push, Pull, PushPull, ZPush, ZPull
 *               of every worker with callbacks and priorities, exact sums
 *   handle      a user handle that holds each push's Response until every
 *               worker pushed that round (cmd), values of several lengths
 *               per key (lens), a pull answered with the cmd added
 *   simple      SimpleApp requests from workers to every server, answered
 *   broadcast   SimpleApp requests from the scheduler to every node (itself
 *               too), each node counting what it got after Finalize's
 *               barrier; a barrier with the scheduler in it
 *   slicer      set_slicer: every key to the last server
 *   keep        big pushes (MiBs) whose requests a user handle keeps, not
 *               copied, until every worker sent all of its rounds, then
 *               checks every one still holds what was sent; big pulls
 *               into an empty SArray and into a vector
 * Exit 0 when every check held (a failed CHECK aborts).
 */
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ps/ps.h"

using namespace ps;

static std::vector<Key> SpreadKeys(int num, Key salt)
{
	std::vector<Key> keys(num);
	for (int i = 0; i < num; ++i)
		keys[i] = kMaxKey / num * i + salt;
	return keys;
}

static void CheckShape()
{
	const char *w = getenv("DMLC_NUM_WORKER");
	const char *s = getenv("DMLC_NUM_SERVER");

	CHECK(w && s);
	CHECK_EQ(NumWorkers(), atoi(w));
	CHECK_EQ(NumServers(), atoi(s));
	CHECK_EQ(IsWorker() + IsServer() + IsScheduler(), 1);
	if (IsWorker())
		CHECK_LT(MyRank(), NumWorkers());
	if (IsServer())
		CHECK_LT(MyRank(), NumServers());
	Postoffice *po = Postoffice::Get();
	CHECK_EQ(po->GetNodeIDs(kScheduler).size(), 1u);
	CHECK_EQ(po->GetNodeIDs(kServerGroup).size(), (size_t)NumServers());
	CHECK_EQ(po->GetNodeIDs(kWorkerGroup + kServerGroup + kScheduler)
			 .size(),
		 (size_t)(NumServers() + NumWorkers() + 1));
	CHECK_EQ(Postoffice::IDtoRank(Postoffice::WorkerRankToID(3)), 3);
	const std::vector<Range> &r = po->GetServerKeyRanges();
	CHECK_EQ(r.size(), (size_t)NumServers());
	CHECK_EQ(r[0].begin(), 0u);
	for (size_t i = 1; i < r.size(); i++)
		CHECK_EQ(r[i - 1].end(), r[i].begin());
}

/* Every worker pushes the same keys; after a barrier of the workers each
 * pull sees the sum of every worker's pushes. */
static void RunKV()
{
	if (IsServer()) {
		auto server = new KVServer<float>(0);
		server->set_request_handle(KVServerDefaultHandle<float>());
		RegisterExitCallback([server]() { delete server; });
	}
	if (!IsWorker())
		return;
	KVWorker<float> kv(0, 0);
	const int num = 1000, repeat = 20, W = NumWorkers();
	std::vector<Key> keys = SpreadKeys(num, 7);
	std::vector<float> vals(num);
	for (int i = 0; i < num; ++i)
		vals[i] = (float)(i % 13 + 1);

	std::atomic<int> called(0);
	std::vector<int> ts;
	for (int i = 0; i < repeat; ++i)
		ts.push_back(kv.Push(keys, vals, {}, 0, [&called]() { called++; },
				     i % 3));
	for (int t : ts)
		kv.Wait(t);
	CHECK_EQ(called.load(), repeat);
	Postoffice::Get()->Barrier(0, kWorkerGroup);

	std::vector<float> rets;
	kv.Wait(kv.Pull(keys, &rets));
	CHECK_EQ(rets.size(), (size_t)num);
	for (int i = 0; i < num; ++i)
		CHECK_EQ(rets[i], vals[i] * repeat * W) << "key " << i;
	Postoffice::Get()->Barrier(0, kWorkerGroup);

	/* PushPull: at least this worker's push is in its answer. */
	std::vector<float> outs;
	kv.Wait(kv.PushPull(keys, vals, &outs));
	for (int i = 0; i < num; ++i)
		CHECK_GE(outs[i], vals[i] * (repeat * W + 1));
	Postoffice::Get()->Barrier(0, kWorkerGroup);

	/* ZPush / ZPull on SArrays. */
	SArray<Key> skeys(keys);
	SArray<float> svals(vals);
	kv.Wait(kv.ZPush(skeys, svals));
	Postoffice::Get()->Barrier(0, kWorkerGroup);
	SArray<float> sout;
	kv.Wait(kv.ZPull(skeys, &sout));
	for (int i = 0; i < num; ++i)
		CHECK_EQ(sout[i], vals[i] * (repeat + 2) * W) << "key " << i;
	printf("kv: worker %d: %d keys, %d workers, sums exact\n", MyRank(),
	       num, W);
}

/* A server that answers a round's pushes (cmd = round) only once every
 * worker pushed it, and pulls with the cmd added to every value. */
class RoundServer {
public:
	void operator()(const KVMeta &meta, const KVPairs<float> &data,
			KVServer<float> *server)
	{
		if (meta.push) {
			size_t off = 0;
			CHECK_EQ(data.lens.size(), data.keys.size());
			for (size_t i = 0; i < data.keys.size(); i++) {
				std::vector<float> &v = store_[data.keys[i]];
				v.resize(data.lens[i], 0.0f);
				for (int j = 0; j < data.lens[i]; j++)
					v[j] += data.vals[off + j];
				off += data.lens[i];
			}
			CHECK_EQ(off, data.vals.size());
			std::vector<KVMeta> &w = waiting_[meta.cmd];
			w.push_back(meta);
			if ((int)w.size() == NumWorkers()) {
				for (const KVMeta &m : w)
					server->Response(m);
				waiting_.erase(meta.cmd);
			}
			return;
		}
		KVPairs<float> res;
		res.keys = data.keys;
		res.lens.resize(data.keys.size());
		for (size_t i = 0; i < data.keys.size(); i++) {
			std::vector<float> &v = store_[data.keys[i]];
			res.lens[i] = (int)v.size();
			for (float x : v)
				res.vals.push_back(x + meta.cmd);
		}
		server->Response(meta, res);
	}

private:
	std::map<Key, std::vector<float>> store_;
	std::map<int, std::vector<KVMeta>> waiting_;
};

static void RunHandle()
{
	if (IsServer()) {
		auto server = new KVServer<float>(0);
		server->set_request_handle(RoundServer());
		RegisterExitCallback([server]() { delete server; });
	}
	if (!IsWorker())
		return;
	KVWorker<float> kv(0, 0);
	const int num = 300, rounds = 5, W = NumWorkers();
	SArray<Key> keys(SpreadKeys(num, 3));
	SArray<int> lens(num);
	SArray<float> vals;
	for (int i = 0; i < num; i++) {
		lens[i] = i % 3 + 1;
		for (int j = 0; j < lens[i]; j++)
			vals.push_back((float)(i + j));
	}
	for (int r = 1; r <= rounds; r++) {
		SArray<float> v(vals.size());
		for (size_t i = 0; i < v.size(); i++)
			v[i] = vals[i] * r;
		/* returns only once every worker pushed round r */
		kv.Wait(kv.ZPush(keys, v, lens, r));
	}
	SArray<float> out;
	SArray<int> outlens;
	kv.Wait(kv.ZPull(keys, &out, &outlens, 7));
	CHECK_EQ(out.size(), vals.size());
	CHECK_EQ(outlens.size(), (size_t)num);
	for (int i = 0; i < num; i++)
		CHECK_EQ(outlens[i], lens[i]);
	const float sum = (float)(rounds * (rounds + 1) / 2);
	for (size_t i = 0; i < out.size(); i++)
		CHECK_EQ(out[i], vals[i] * sum * W + 7) << "value " << i;
	printf("handle: worker %d: %d rounds held until all %d workers "
	       "pushed, lens and cmd back\n",
	       MyRank(), rounds, W);
}

/* The value a keep-mode worker of rank @w sends for value @i of round
 * @r, and a server's pull answer for key @k. */
static float KeepVal(int w, int r, size_t i)
{
	return (float)((i * 7 + (size_t)w * 131 + (size_t)r * 17) % 100003);
}
static float KeepAnswer(Key k)
{
	return (float)(k % 65521);
}

/* Holds every push as it came (its arrays share the received message's
 * memory) until all of them are in; then checks each and answers. */
class KeepServer {
public:
	void operator()(const KVMeta &meta, const KVPairs<float> &data,
			KVServer<float> *server)
	{
		if (!meta.push) {
			KVPairs<float> res;
			res.keys = data.keys;
			res.vals.resize(2 * data.keys.size());
			for (size_t i = 0; i < data.keys.size(); i++)
				res.vals[2 * i] = res.vals[2 * i + 1] =
					KeepAnswer(data.keys[i]);
			server->Response(meta, res);
			return;
		}
		held_.push_back(std::make_pair(meta, data));
		if ((int)held_.size() < NumWorkers() * kRounds)
			return;
		for (auto &h : held_) {
			const KVPairs<float> &d = h.second;
			int w = Postoffice::IDtoRank(h.first.sender);
			CHECK_EQ(d.vals.size(), 2 * d.keys.size());
			for (size_t i = 0; i < d.vals.size(); i++) {
				/* the value's index in the whole push */
				size_t g = 2 * ((d.keys[i / 2] - kSalt) /
						(kMaxKey / kNum)) +
					   i % 2;
				CHECK_EQ(d.vals[i], KeepVal(w, h.first.cmd, g))
					<< "worker " << w << " round "
					<< h.first.cmd << " value " << g
					<< ": a kept request changed";
			}
		}
		for (auto &h : held_)
			server->Response(h.first);
		printf("keep: server %d: %zu requests kept and intact\n",
		       MyRank(), held_.size());
		held_.clear();
	}
	static const int kRounds = 4, kNum = 200000, kSalt = 11;

private:
	std::vector<std::pair<KVMeta, KVPairs<float>>> held_;
};

static void RunKeep()
{
	if (IsServer()) {
		auto server = new KVServer<float>(0);
		server->set_request_handle(KeepServer());
		RegisterExitCallback([server]() { delete server; });
	}
	if (!IsWorker())
		return;
	KVWorker<float> kv(0, 0);
	const int num = KeepServer::kNum, w = MyRank();
	std::vector<Key> keys = SpreadKeys(num, KeepServer::kSalt);
	std::vector<int> ts;
	for (int r = 0; r < KeepServer::kRounds; r++) {
		std::vector<float> v(2 * num);
		for (size_t i = 0; i < v.size(); i++)
			v[i] = KeepVal(w, r, i);
		/* Push copies: v may go at once. */
		ts.push_back(kv.Push(keys, v, {}, r));
	}
	for (int t : ts)
		kv.Wait(t);
	SArray<float> sout;
	std::vector<float> vout;
	kv.Wait(kv.ZPull(SArray<Key>(keys), &sout));
	kv.Wait(kv.Pull(keys, &vout));
	CHECK_EQ(sout.size(), (size_t)(2 * num));
	CHECK_EQ(vout.size(), (size_t)(2 * num));
	for (int i = 0; i < num; i++) {
		CHECK_EQ(sout[2 * i], KeepAnswer(keys[i])) << "key " << i;
		CHECK_EQ(sout[2 * i + 1], KeepAnswer(keys[i])) << "key " << i;
		CHECK_EQ(vout[2 * i + 1], KeepAnswer(keys[i])) << "key " << i;
	}
	printf("keep: worker %d: %d rounds of %d keys held, pulls exact\n", w,
	       KeepServer::kRounds, num);
}

static void RunSimple()
{
	/* Lives until Finalize: servers answer while workers ask. */
	SimpleApp *app = new SimpleApp(1, 0);
	RegisterExitCallback([app]() { delete app; });
	if (IsServer())
		app->set_request_handle([](const SimpleData &req,
					   SimpleApp *a) {
			CHECK_EQ(req.head, 3);
			CHECK_EQ(req.body.compare(0, 4, "ping"), 0);
			a->Response(req, req.body + "!");
		});
	/* No request before every server has its handle. */
	Postoffice::Get()->Barrier(0, kServerGroup + kWorkerGroup);
	if (!IsWorker())
		return;
	std::atomic<int> answers(0);
	std::string body = "ping" + std::to_string(MyRank());
	app->set_response_handle([&answers, body](const SimpleData &res,
						  SimpleApp *) {
		CHECK_EQ(res.body, body + "!");
		answers++;
	});
	const int n = 20;
	std::vector<int> ts;
	for (int i = 0; i < n; i++)
		ts.push_back(app->Request(3, body, kServerGroup));
	for (int t : ts)
		app->Wait(t);
	CHECK_EQ(answers.load(), n * NumServers());
	printf("simple: worker %d: %d answers\n", MyRank(), answers.load());
}

static int broadcast_got;

static void RunBroadcast()
{
	const int n = 50;
	SimpleApp app(0, 0);

	app.set_request_handle([](const SimpleData &req, SimpleApp *a) {
		CHECK_EQ(req.head, 5);
		CHECK_EQ(req.sender, kScheduler);
		CHECK_EQ(req.body, "hello");
		a->Response(req, "r");
		++broadcast_got;
	});
	std::atomic<int> answers(0);
	app.set_response_handle([&answers](const SimpleData &res,
					   SimpleApp *) {
		CHECK_EQ(res.body, "r");
		answers++;
	});
	if (IsScheduler()) {
		std::vector<int> ts;
		for (int i = 0; i < n; ++i)
			ts.push_back(app.Request(
				5, "hello",
				kScheduler + kServerGroup + kWorkerGroup));
		for (int t : ts)
			app.Wait(t);
		CHECK_EQ(answers.load(), n * (1 + NumServers() + NumWorkers()));
	}
	Postoffice::Get()->Barrier(0, kScheduler + kServerGroup + kWorkerGroup);
	CHECK_EQ(broadcast_got, n);
	if (IsWorker())
		printf("broadcast: worker %d: %d requests from the scheduler\n",
		       MyRank(), broadcast_got);
}

static void RunSlicer()
{
	if (IsServer()) {
		auto server = new KVServer<int>(0);
		int rank = MyRank();
		server->set_request_handle([rank](const KVMeta &meta,
						  const KVPairs<int> &data,
						  KVServer<int> *s) {
			KVPairs<int> res;
			if (meta.pull) {
				res.keys = data.keys;
				res.vals.resize(data.keys.size(), rank + 1);
			}
			s->Response(meta, res);
		});
		RegisterExitCallback([server]() { delete server; });
	}
	if (!IsWorker())
		return;
	KVWorker<int> kv(0, 0);
	kv.set_slicer([](const KVPairs<int> &send,
			 const std::vector<Range> &ranges,
			 KVWorker<int>::SlicedKVs *sliced) {
		sliced->resize(ranges.size());
		for (auto &s : *sliced)
			s.first = false;
		sliced->back().first = true;
		sliced->back().second = send;
	});
	std::vector<Key> keys = SpreadKeys(100, 1);
	std::vector<int> out;
	kv.Wait(kv.Pull(keys, &out));
	for (int v : out)
		CHECK_EQ(v, NumServers());
	printf("slicer: worker %d: every key at server %d\n", MyRank(),
	       NumServers() - 1);
}

int main(int argc, char *argv[])
{
	std::string mode = argc > 1 ? argv[1] : "connection";

	Start(0);
	CheckShape();
	if (mode == "kv")
		RunKV();
	else if (mode == "handle")
		RunHandle();
	else if (mode == "simple")
		RunSimple();
	else if (mode == "keep")
		RunKeep();
	else if (mode == "slicer")
		RunSlicer();
	else if (mode == "broadcast")
		RunBroadcast();
	else
		CHECK_EQ(mode, "connection");
	Finalize(0, true);
	return 0;
}
