/* SPDX-License-Identifier: MIT */
/*
 * ps-lite's C++ API over psched (docs/pslite.md): include this one
 * header, link -lpsched (pkg-config psched-pslite).
 */
#ifndef PS_PS_H_
#define PS_PS_H_

#include "ps/base.h"
#include "ps/internal/postoffice.h"
#include "ps/kv_app.h"
#include "ps/sarray.h"
#include "ps/simple_app.h"

namespace ps
{

inline int NumWorkers()
{
	return Postoffice::Get()->num_workers();
}
inline int NumServers()
{
	return Postoffice::Get()->num_servers();
}
inline bool IsWorker()
{
	return Postoffice::Get()->is_worker();
}
inline bool IsServer()
{
	return Postoffice::Get()->is_server();
}
inline bool IsScheduler()
{
	return Postoffice::Get()->is_scheduler();
}
inline int MyRank()
{
	return Postoffice::Get()->my_rank();
}
/* Join the job (DMLC_* variables and PS_JOB_TOKEN); blocks until every
 * node is up. */
inline void Start(int customer_id, const char *argv0 = nullptr)
{
	Postoffice::Get()->Start(customer_id, argv0, true);
}
/* The same: psched's start-up always waits for every node. */
inline void StartAsync(int customer_id, const char *argv0 = nullptr)
{
	Postoffice::Get()->Start(customer_id, argv0, false);
}
inline void Finalize(int customer_id, const bool do_barrier = true)
{
	Postoffice::Get()->Finalize(customer_id, do_barrier);
}
inline void RegisterExitCallback(const std::function<void()> &cb)
{
	Postoffice::Get()->RegisterExitCallback(cb);
}

} // namespace ps

#endif
