// SPDX-License-Identifier: MIT
/*
 * Shared-memory transport: reading a large payload out of the sender's
 * memory (process_vm_readv), shared between the van thread and one copy
 * helper thread per process.  The copy is the whole cost of a large shm
 * message on the receiver, and one thread copying is what one core
 * copies; loopback TCP spreads its two copies over the sender's and the
 * receiver's cores.  A large piece is cut in SHM_SPLIT_PARTS parts that
 * both threads claim in turn, so the van thread never waits for a helper
 * that is not running (a loaded machine): it copies what the helper has
 * not claimed and waits only for parts the helper is copying.  The
 * helper takes one job at a time: a van thread that finds it busy
 * (several vans in one process) copies alone.
 */
#include <pthread.h>

#include "shm_internal.h"

#define SHM_SPLIT_PARTS 4

struct shm_copy_job {
	const struct shm_conn *sc;
	uint64_t off;	  /* payload offset of part 0 */
	size_t part;	  /* bytes per part (the last may be shorter) */
	size_t len;	  /* bytes in all */
	unsigned n;	  /* parts */
	atomic_uint next; /* next unclaimed part */
	ssize_t res[SHM_SPLIT_PARTS];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct shm_copy_job *job; /* submitted, not yet collected */
	bool busy;		  /* *job is the helper's to take */
	bool running;		  /* the helper took it and copies */
	bool ok;		  /* the helper thread runs */
} shm_copier = { .lock = PTHREAD_MUTEX_INITIALIZER,
		 .cond = PTHREAD_COND_INITIALIZER };
static pthread_once_t shm_copier_once = PTHREAD_ONCE_INIT;

ssize_t psd_shm_cma_read_at(const struct shm_conn *sc, uint64_t off, size_t len)
{
	struct iovec lv = { .iov_base = sc->dst + off, .iov_len = len };
	struct iovec rv[SHM_MAX_IOV];
	uint64_t skip = off;
	uint32_t i;
	int n = 0;
	ssize_t r;

	for (i = 0; i < sc->niov && len; i++) {
		if (skip >= sc->riov[i].len) {
			skip -= sc->riov[i].len;
			continue;
		}
		rv[n].iov_base = (void *)(uintptr_t)(sc->riov[i].base + skip);
		rv[n].iov_len = (size_t)(sc->riov[i].len - skip);
		if (rv[n].iov_len > len)
			rv[n].iov_len = len;
		len -= rv[n++].iov_len;
		skip = 0;
	}
	r = process_vm_readv(sc->peer_pid, &lv, 1, rv, (unsigned long)n, 0);
	if (r < 0)
		return psd_neg_errno();
	return r ? r : -EFAULT;
}

static size_t shm_part_len(const struct shm_copy_job *job, unsigned i)
{
	size_t from = (size_t)i * job->part;

	return job->len - from < job->part ? job->len - from : job->part;
}

/* Claim and copy parts of @job until none is left. */
static void shm_copy_parts(struct shm_copy_job *job)
{
	unsigned i;

	while ((i = atomic_fetch_add(&job->next, 1)) < job->n)
		job->res[i] = psd_shm_cma_read_at(
			job->sc, job->off + (uint64_t)i * job->part,
			shm_part_len(job, i));
}

static void *shm_copier_main(void *arg)
{
	struct shm_copy_job *job;

	(void)arg;
	pthread_mutex_lock(&shm_copier.lock);
	for (;;) {
		while (!shm_copier.job || !shm_copier.busy)
			pthread_cond_wait(&shm_copier.cond, &shm_copier.lock);
		job = shm_copier.job;
		shm_copier.running = true;
		pthread_mutex_unlock(&shm_copier.lock);
		shm_copy_parts(job);
		pthread_mutex_lock(&shm_copier.lock);
		shm_copier.running = false;
		shm_copier.busy = false;
		pthread_cond_broadcast(&shm_copier.cond);
	}
	return NULL;
}

static void shm_copier_start(void)
{
	pthread_attr_t a;
	pthread_t t;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return; /* nothing to gain on one core */
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (!pthread_create(&t, &a, shm_copier_main, NULL)) {
		pthread_setname_np(t, "ps-shm-copy");
		shm_copier.ok = true;
	}
	pthread_attr_destroy(&a);
}

/* Offer @job to the helper; false when it is absent or has another. */
static bool shm_copier_submit(struct shm_copy_job *job)
{
	bool taken = false;

	pthread_once(&shm_copier_once, shm_copier_start);
	pthread_mutex_lock(&shm_copier.lock);
	if (shm_copier.ok && !shm_copier.job) {
		shm_copier.job = job;
		shm_copier.busy = true;
		pthread_cond_broadcast(&shm_copier.cond);
		taken = true;
	}
	pthread_mutex_unlock(&shm_copier.lock);
	return taken;
}

/*
 * Take the job back once every part is claimed (the caller copied until
 * none was left).  A helper that has not taken it yet never will (it
 * finds no job when it wakes); one that did is waited for, which is at
 * most the part it is copying (one bounded syscall).
 */
static void shm_copier_collect(void)
{
	pthread_mutex_lock(&shm_copier.lock);
	while (shm_copier.running)
		pthread_cond_wait(&shm_copier.cond, &shm_copier.lock);
	shm_copier.job = NULL;
	shm_copier.busy = false;
	pthread_mutex_unlock(&shm_copier.lock);
}

ssize_t psd_shm_cma_read(const struct shm_conn *sc, size_t len)
{
	struct shm_copy_job job;
	ssize_t got = 0;
	unsigned i;

	if (len < SHM_SPLIT_MIN)
		return psd_shm_cma_read_at(sc, sc->got, len);
	job = (struct shm_copy_job){ .sc = sc, .off = sc->got, .len = len };
	job.part = ((len + SHM_SPLIT_PARTS - 1) / SHM_SPLIT_PARTS + 4095) &
		   ~(size_t)4095;
	job.n = (unsigned)((len + job.part - 1) / job.part);
	atomic_init(&job.next, 0);
	if (!shm_copier_submit(&job))
		return psd_shm_cma_read_at(sc, sc->got, len);
	shm_copy_parts(&job);
	shm_copier_collect();
	/* What counts is the prefix of whole parts; a short or failed part
	 * ends it (read again, or its error seen, on the next call). */
	for (i = 0; i < job.n; i++) {
		if (job.res[i] != (ssize_t)shm_part_len(&job, i))
			return i ? got : job.res[i];
		got += job.res[i];
	}
	return got;
}
