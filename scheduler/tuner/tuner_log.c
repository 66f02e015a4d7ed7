// SPDX-License-Identifier: MIT
/*
 * What the tuner tells people: phase names, the CSV log (docs/tuner.md,
 * "The log") and the one-line progress report.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "tuner_int.h"

static const char *const tuner_csv_header =
	"sample,step,epoch,partition_bytes,credit_bytes,score_steps_per_s,"
	"predicted_mean,predicted_sd,phase\n";

const char *psd_tuner_phase_name(enum psd_tuner_phase phase)
{
	switch (phase) {
	case PSD_TUNER_WARMUP:
		return "warmup";
	case PSD_TUNER_EXPLORE:
		return "explore";
	case PSD_TUNER_LOCKED:
		return "locked";
	case PSD_TUNER_RETUNE:
		return "retune";
	}
	return "unknown";
}

int psd_tuner_open_log(struct psd_tuner *t, const char *path)
{
	if (path) {
		t->log = fopen(path, "w");
		if (!t->log)
			return errno ? -errno : -EIO;
		t->own_log = true;
	} else {
		t->log = t->o.log;
	}
	if (t->log) {
		fputs(tuner_csv_header, t->log);
		fflush(t->log);
	}
	return 0;
}

void psd_tuner_log_row(struct psd_tuner *t, uint64_t step,
		       const struct psd_tuner_config *c, double score,
		       double mean, double sd, const char *phase)
{
	if (!t->log)
		return;
	fprintf(t->log,
		"%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
		",%.6g,%.6g,%.6g,%s\n",
		t->samples, step, c->epoch, c->partition_bytes, c->credit_bytes,
		score, mean, sd, phase);
	fflush(t->log);
}

/* "4 KiB", "1 MiB", "3 GiB" or plain bytes. */
static void tuner_fmt_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;

	while (u < 4 && b >= 1024 && b % 1024 == 0) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, "%" PRIu64 " %s", b, unit[u]);
}

int psd_tuner_progress(const struct psd_tuner *t, char *buf, size_t len)
{
	const struct psd_tuner_config *c = &t->cur;
	char part[32];
	char credit[32];
	char best[32];
	int n;

	if (!buf || !len)
		return -EINVAL;
	tuner_fmt_bytes(c->partition_bytes, part, sizeof(part));
	tuner_fmt_bytes(c->credit_bytes, credit, sizeof(credit));
	n = snprintf(buf, len,
		     "tuner %s: sample %" PRIu64
		     ", search %u/%u, partition %s, credit %s (%" PRIu64
		     "x), last %.4g steps/s",
		     psd_tuner_phase_name(t->phase), t->samples,
		     t->search_samples, psd_tuner_max_samples(t), part, credit,
		     c->credit_bytes / c->partition_bytes, t->last_score);
	if (t->locked_once && n >= 0 && (size_t)n < len) {
		tuner_fmt_bytes(t->best.partition_bytes, best, sizeof(best));
		n += snprintf(buf + n, len - (size_t)n,
			      ", best %.4g at %s/%" PRIu64 "x", t->ref, best,
			      t->best.credit_bytes / t->best.partition_bytes);
	}
	if (t->raw.workers && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n,
			 ", link %.4g MB/s, rtt %.3g ms, compute %.4g ms, %u "
			 "workers%s%s",
			 t->raw.link_bytes_per_s / 1e6, t->rtt_s * 1e3,
			 t->raw.compute_s * 1e3, t->raw.workers,
			 t->raw.link_floor
				 ? ", credit-bound (link read as a floor)"
				 : "",
			 t->probing ? ", probing the link" : "");
	return 0;
}
