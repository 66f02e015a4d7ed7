// SPDX-License-Identifier: MIT
/*
 * Optimizer states of every server, the worker's side (worker/
 * command.h): fetch each server's records piece by piece (OP_DUMP) and
 * concatenate them, or send records piece by piece (OP_LOAD) to every
 * server (server/kvs_states.c applies them by byte range).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "optim.h"

/* Per-server records of a dump in progress. */
struct states_dump {
	unsigned nserver;
	uint8_t **buf;
	size_t *len;
	uint64_t *total;
	bool *seen;
	char name[16]; /* the servers' optimizer */
	int err;
};

/* Under the node's lock: one server's piece. */
static void states_on_data(void *arg, unsigned srank, const char *msg,
			   const uint8_t *data, size_t len, uint64_t total)
{
	struct states_dump *d = arg;
	uint8_t *nb;

	if (srank >= d->nserver || d->err)
		return;
	if (!d->name[0])
		snprintf(d->name, sizeof(d->name), "%s", msg);
	else if (strncmp(d->name, msg, sizeof(d->name) - 1))
		d->err = psd_set_errmsg(-EPROTO,
					"servers run different optimizers "
					"('%s', and '%.15s' on server %u)",
					d->name, msg, srank);
	if (d->seen[srank] && d->total[srank] != total) {
		d->err = psd_set_errmsg(-EPROTO,
					"server %u changed its state size "
					"during a dump",
					srank);
		return;
	}
	d->seen[srank] = true;
	d->total[srank] = total;
	if (!len)
		return;
	if (d->len[srank] + len > total) {
		d->err = psd_set_errmsg(-EPROTO,
					"server %u sent more state than its "
					"total of %llu bytes",
					srank, (unsigned long long)total);
		return;
	}
	nb = realloc(d->buf[srank], d->len[srank] + len);
	if (!nb) {
		d->err = psd_set_errmsg(-ENOMEM,
					"no memory for the states "
					"of server %u",
					srank);
		return;
	}
	memcpy(nb + d->len[srank], data, len);
	d->buf[srank] = nb;
	d->len[srank] += len;
}

static void states_dump_free(struct states_dump *d)
{
	unsigned s;

	for (s = 0; s < d->nserver && d->buf; s++)
		free(d->buf[s]);
	free(d->buf);
	free(d->len);
	free(d->total);
	free(d->seen);
}

/* Concatenate the servers' records into *@buf. */
static int states_join(struct states_dump *d, uint8_t **buf, size_t *len)
{
	size_t all = 0, at = 0;
	unsigned s;
	uint8_t *out;

	for (s = 0; s < d->nserver; s++)
		all += d->len[s];
	out = malloc(all ? all : 1);
	if (!out)
		return psd_set_errmsg(-ENOMEM,
				      "no memory for %zu bytes of states", all);
	for (s = 0; s < d->nserver; s++) {
		if (d->len[s])
			memcpy(out + at, d->buf[s], d->len[s]);
		at += d->len[s];
	}
	*buf = out;
	*len = all;
	return 0;
}

int psd_kvw_states_dump(struct psched_node *n, uint8_t **buf, size_t *len,
			char name[16], unsigned timeout_ms)
{
	Psched__ServerCommand sc = PSCHED__SERVER_COMMAND__INIT;
	Psched__OptStates st = PSCHED__OPT_STATES__INIT;
	struct states_dump d = { .nserver = n->num_server };
	uint64_t off = 0, most;
	unsigned s;
	int ret;

	d.buf = calloc(d.nserver + 1, sizeof(*d.buf));
	d.len = calloc(d.nserver + 1, sizeof(*d.len));
	d.total = calloc(d.nserver + 1, sizeof(*d.total));
	d.seen = calloc(d.nserver + 1, sizeof(*d.seen));
	if (!d.buf || !d.len || !d.total || !d.seen) {
		ret = psd_set_errmsg(-ENOMEM, "no memory for a state dump");
		goto out;
	}
	st.op = PSCHED__OPT_STATES__OP__OP_DUMP;
	sc.states = &st;
	do {
		st.offset = off;
		ret = psd_cmd_send_data(n, &sc, timeout_ms, states_on_data, &d);
		if (!ret)
			ret = d.err;
		if (ret)
			goto out;
		most = 0;
		for (s = 0; s < d.nserver; s++) {
			if (d.len[s] != (d.total[s] < off + PSD_OPT_PIECE
						 ? d.total[s]
						 : off + PSD_OPT_PIECE)) {
				ret = psd_set_errmsg(
					-EPROTO,
					"server %u sent %zu of "
					"%llu state bytes",
					s, d.len[s],
					(unsigned long long)d.total[s]);
				goto out;
			}
			if (d.total[s] > most)
				most = d.total[s];
		}
		off += PSD_OPT_PIECE;
	} while (off < most);
	ret = states_join(&d, buf, len);
	if (ret)
		goto out;
	memcpy(name, d.name, sizeof(d.name));
out:
	states_dump_free(&d);
	return ret;
}

int psd_kvw_states_load(struct psched_node *n, const char *name,
			const uint8_t *recs, size_t len, unsigned timeout_ms)
{
	Psched__ServerCommand sc = PSCHED__SERVER_COMMAND__INIT;
	Psched__OptStates st = PSCHED__OPT_STATES__INIT;
	size_t off = 0, piece;
	int ret;

	st.op = PSCHED__OPT_STATES__OP__OP_LOAD;
	st.name = (char *)(uintptr_t)name;
	st.total = len;
	sc.states = &st;
	do {
		piece = len - off < PSD_OPT_PIECE ? len - off : PSD_OPT_PIECE;
		st.offset = off;
		st.data.data = (uint8_t *)(uintptr_t)(recs + off);
		st.data.len = piece;
		ret = psd_cmd_send(n, &sc, timeout_ms);
		if (ret)
			return ret;
		off += piece;
	} while (off < len);
	return 0;
}
