// SPDX-License-Identifier: MIT
/*
 * Shared-memory transport: reading a large payload out of the sender's
 * memory (process_vm_readv), split between the van thread and one copy
 * helper thread per process.  The copy is the whole cost of a large shm
 * message on the receiver, and one thread copying is what one core
 * copies; loopback TCP spreads its two copies over the sender's and the
 * receiver's cores.  With the helper, the receiver reads the two halves
 * of each piece at once.  The helper takes one job at a time: a van
 * thread that finds it busy (several vans in one process) copies alone.
 */
#include <pthread.h>

#include "shm_internal.h"

struct shm_copy_job {
	const struct shm_conn *sc;
	uint64_t off;
	size_t len;
	ssize_t ret;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct shm_copy_job *job; /* submitted, not yet collected */
	bool done;		  /* the helper finished *job */
	bool ok;		  /* the helper thread runs */
} shm_copier = { .lock = PTHREAD_MUTEX_INITIALIZER,
		 .cond = PTHREAD_COND_INITIALIZER };
static pthread_once_t shm_copier_once = PTHREAD_ONCE_INIT;

ssize_t psd_shm_cma_read_at(const struct shm_conn *sc, uint64_t off,
			    size_t len)
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

static void *shm_copier_main(void *arg)
{
	struct shm_copy_job *job;

	(void)arg;
	pthread_mutex_lock(&shm_copier.lock);
	for (;;) {
		while (!shm_copier.job || shm_copier.done)
			pthread_cond_wait(&shm_copier.cond, &shm_copier.lock);
		job = shm_copier.job;
		pthread_mutex_unlock(&shm_copier.lock);
		job->ret = psd_shm_cma_read_at(job->sc, job->off, job->len);
		pthread_mutex_lock(&shm_copier.lock);
		shm_copier.done = true;
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
	if (!pthread_create(&t, &a, shm_copier_main, NULL))
		shm_copier.ok = true;
	pthread_attr_destroy(&a);
}

/* Hand @job to the helper; false when it is busy or absent. */
static bool shm_copier_submit(struct shm_copy_job *job)
{
	bool taken = false;

	pthread_once(&shm_copier_once, shm_copier_start);
	pthread_mutex_lock(&shm_copier.lock);
	if (shm_copier.ok && !shm_copier.job) {
		shm_copier.job = job;
		shm_copier.done = false;
		pthread_cond_broadcast(&shm_copier.cond);
		taken = true;
	}
	pthread_mutex_unlock(&shm_copier.lock);
	return taken;
}

/* Wait for the helper to finish our job (a single bounded syscall). */
static void shm_copier_collect(void)
{
	pthread_mutex_lock(&shm_copier.lock);
	while (!shm_copier.done)
		pthread_cond_wait(&shm_copier.cond, &shm_copier.lock);
	shm_copier.job = NULL;
	shm_copier.done = false;
	pthread_mutex_unlock(&shm_copier.lock);
}

ssize_t psd_shm_cma_read(const struct shm_conn *sc, size_t len)
{
	struct shm_copy_job job;
	size_t half;
	ssize_t r;

	if (len < SHM_SPLIT_MIN)
		return psd_shm_cma_read_at(sc, sc->got, len);
	half = (len / 2 + 4095) & ~(size_t)4095;
	job = (struct shm_copy_job){ .sc = sc,
				     .off = sc->got + half,
				     .len = len - half };
	if (!shm_copier_submit(&job))
		return psd_shm_cma_read_at(sc, sc->got, len);
	r = psd_shm_cma_read_at(sc, sc->got, half);
	shm_copier_collect();
	/* Only a whole first half lets the second count; a short or failed
	 * piece is read again (or its error seen) on the next call. */
	if (r == (ssize_t)half && job.ret == (ssize_t)(len - half))
		return (ssize_t)len;
	return r;
}
