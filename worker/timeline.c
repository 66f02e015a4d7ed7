// SPDX-License-Identifier: MIT
/*
 * Per-chunk timeline as Chrome trace JSON (the "Trace Event Format": an
 * array of complete events, "ph":"X", times in microseconds).  One track
 * per server a worker talks to; each chunk shows as a push slice (start to
 * push done) and a pull slice (push done, or start, to pull done), named
 * after its key and byte range, with priority, step and epoch as args, so
 * the reordering by priority is visible at a glance.  otherData.t0_us is
 * the CLOCK_MONOTONIC time (us) that ts 0 stands for.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"
#include "wire.h"

int psd_tl_start(struct psd_timeline *t, size_t cap)
{
	struct psd_tl_rec *v;

	if (!cap)
		cap = (size_t)1 << 20;
	v = malloc(cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	free(t->v);
	t->v = v;
	t->cap = cap;
	t->n = 0;
	t->dropped = 0;
	t->t0 = 0;
	return 0;
}

void psd_tl_fini(struct psd_timeline *t)
{
	free(t->v);
	memset(t, 0, sizeof(*t));
}

void psd_tl_add(struct psd_timeline *t, const struct psd_tl_rec *r)
{
	if (t->n == t->cap) {
		t->dropped++;
		return;
	}
	if (!t->t0 || r->t_start < t->t0)
		t->t0 = r->t_start;
	t->v[t->n++] = *r;
}

static int tl_slice(FILE *f, bool *first, const struct psd_tl_rec *r,
		    const char *what, uint64_t from, uint64_t to, uint64_t t0,
		    int pid)
{
	if (!from || to < from)
		return 0;
	fprintf(f,
		"%s\n{\"name\":\"%s key %" PRIu64 " [%" PRIu64 "+%" PRIu64
		"]\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%u,"
		"\"ts\":%" PRIu64 ",\"dur\":%" PRIu64
		",\"args\":{\"key\":%" PRIu64 ",\"offset\":%" PRIu64
		",\"bytes\":%" PRIu64 ",\"priority\":%d,\"step\":%" PRIu64
		",\"epoch\":%u,\"op\":\"%s\",\"failed\":%s}}",
		*first ? "" : ",", what, r->key, r->offset, r->len, what, pid,
		(unsigned)r->server, from - t0, to - from, r->key, r->offset,
		r->len, (int)r->priority, r->step, (unsigned)r->epoch,
		psd_msg_type_name(r->type), r->failed ? "true" : "false");
	*first = false;
	return 0;
}

int psd_tl_write_json(FILE *f, const struct psd_tl_rec *v, size_t n,
		      uint64_t t0, uint64_t dropped, int node_id)
{
	bool first = true;
	size_t i;
	unsigned s, maxs = 0;

	fprintf(f,
		"{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped\":"
		"%" PRIu64 ",\"t0_us\":%" PRIu64 "},\"traceEvents\":[",
		dropped, t0);
	for (i = 0; i < n; i++)
		if (v[i].server > maxs)
			maxs = v[i].server;
	for (s = 0; n && s <= maxs; s++) {
		fprintf(f,
			"%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
			"\"tid\":%u,\"args\":{\"name\":\"to server rank %u\"}}",
			first ? "" : ",", node_id, s, s);
		first = false;
	}
	for (i = 0; i < n; i++) {
		const struct psd_tl_rec *r = &v[i];
		uint64_t pull_from = r->t_push ? r->t_push : r->t_start;

		if (r->type != PSD_MSG_PULL)
			tl_slice(f, &first, r, "push", r->t_start,
				 r->t_push ? r->t_push : r->t_pull, t0,
				 node_id);
		if (r->t_pull)
			tl_slice(f, &first, r, "pull", pull_from, r->t_pull, t0,
				 node_id);
	}
	fprintf(f, "\n]}\n");
	return ferror(f) ? -EIO : 0;
}
