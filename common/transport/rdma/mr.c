// SPDX-License-Identifier: MIT
/*
 * RDMA transport, the registration cache (LRU of MRs by address range under a
 * byte budget). Design and wire protocol: rdma_internal.h.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "rdma_internal.h"

static void rdmt_mr_evict_locked(struct rdmt_dev *d, uint64_t need)
{
	struct psd_list *pos, *tmp;
	struct rdmt_mr *m;

	for (pos = d->mrs.prev, tmp = pos->prev;
	     pos != &d->mrs && d->mr_bytes + need > d->k.mr_budget;
	     pos = tmp, tmp = pos->prev) {
		m = psd_container_of(pos, struct rdmt_mr, lru);
		if (m->refs)
			continue;
		psd_list_del(&m->lru);
		d->mr_bytes -= m->end - m->start;
		ibv_dereg_mr(m->mr);
		free(m);
		atomic_fetch_add(&psd_rdmt_st_evicts, 1);
	}
}

void psd_rdmt_mr_reg_failed(struct rdmt_dev *d, size_t len, int err,
			    const char *peer, uint64_t key)
{
	bool first;

	atomic_fetch_add(&psd_rdmt_st_reg_fail, 1);
	pthread_mutex_lock(&d->mr_lock);
	first = !d->reg_warned;
	d->reg_warned = true;
	pthread_mutex_unlock(&d->mr_lock);
	psd_log(first ? PSD_LOG_WARN : PSD_LOG_DEBUG,
		"rdma: cannot register %zu bytes for key %llu with %s: %s; "
		"copying through send buffers instead (slower).  Raise the "
		"locked-memory limit (ulimit -l, LimitMEMLOCK=) or lower "
		"PS_RDMA_MR_BUDGET (now %llu bytes)",
		len, (unsigned long long)key, peer, strerror(-err),
		(unsigned long long)d->k.mr_budget);
}

/* Registered region covering [addr, addr+len); takes a reference. */
int psd_rdmt_mr_get(struct rdmt_dev *d, void *addr, size_t len,
		    struct rdmt_mr **out)
{
	uintptr_t s = (uintptr_t)addr, e = s + len;
	struct psd_list *pos;
	struct rdmt_mr *m;
	struct ibv_mr *mr;

	if (d->k.fail_reg)
		return -ENOMEM;
	pthread_mutex_lock(&d->mr_lock);
	psd_list_for_each (pos, &d->mrs) {
		m = psd_container_of(pos, struct rdmt_mr, lru);
		if (m->start <= s && e <= m->end) {
			m->refs++;
			psd_list_del(&m->lru);
			psd_list_add_tail(d->mrs.next, &m->lru);
			pthread_mutex_unlock(&d->mr_lock);
			*out = m;
			return 0;
		}
	}
	rdmt_mr_evict_locked(d, len);
	pthread_mutex_unlock(&d->mr_lock);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	mr = ibv_reg_mr(d->pd, addr, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		/* Maybe the cache holds the locked memory: drop it, retry. */
		pthread_mutex_lock(&d->mr_lock);
		rdmt_mr_evict_locked(d, d->k.mr_budget + 1);
		pthread_mutex_unlock(&d->mr_lock);
		mr = ibv_reg_mr(d->pd, addr, len,
				IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE);
	}
	if (!mr) {
		int ret = psd_neg_errno();

		free(m);
		return ret;
	}
	atomic_fetch_add(&psd_rdmt_st_regs, 1);
	m->start = s;
	m->end = e;
	m->mr = mr;
	m->refs = 1;
	pthread_mutex_lock(&d->mr_lock);
	m->cached = d->mr_bytes + len <= d->k.mr_budget;
	if (m->cached) {
		d->mr_bytes += len;
		psd_list_add_tail(d->mrs.next, &m->lru);
	}
	pthread_mutex_unlock(&d->mr_lock);
	*out = m;
	return 0;
}

void psd_rdmt_mr_put(struct rdmt_dev *d, struct rdmt_mr *m)
{
	bool drop;

	if (!m)
		return;
	pthread_mutex_lock(&d->mr_lock);
	drop = --m->refs == 0 && !m->cached;
	pthread_mutex_unlock(&d->mr_lock);
	if (drop) {
		ibv_dereg_mr(m->mr);
		free(m);
	}
}

/*
 * The registration cache keys MRs by address.  Memory that malloc hands
 * back to the OS and maps again later at the same address would get new
 * pages behind a cached MR's back, so, as MPI libraries do, keep freed
 * heap memory mapped: no trimming, no mmap'd chunks.
 */
void psd_rdmt_keep_heap(void)
{
	static atomic_bool done;

	if (atomic_exchange(&done, true))
		return;
	mallopt(M_TRIM_THRESHOLD, -1);
	mallopt(M_MMAP_MAX, 0);
}
