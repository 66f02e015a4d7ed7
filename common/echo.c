// SPDX-License-Identifier: MIT
/*
 * Echoes (echo.h): one outstanding per connection, stamped with the
 * sender's clock; the van thread takes the reply and keeps the least
 * round trip of the current and the last window.
 */
#include "echo.h"
#include "internal.h"

bool psd_echo_due(struct psd_conn *c, uint64_t now_us)
{
	uint64_t sent = atomic_load(&c->echo_sent_us);

	if (!c->ops->tx_room || atomic_load(&c->closed))
		return false;
	if (sent && now_us - sent < PSD_ECHO_LOST_US)
		return false;
	return now_us - atomic_load(&c->echo_last_us) >= PSD_ECHO_GAP_US;
}

int psd_echo_send(struct psd_conn *c, int sender, uint64_t now_us)
{
	Psched__Echo e = PSCHED__ECHO__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	int ret;

	atomic_store(&c->echo_last_us, now_us);
	atomic_store(&c->echo_sent_us, now_us);
	e.nonce = now_us;
	m.body_case = PSCHED__CONTROL__BODY_ECHO;
	m.echo = &e;
	ret = psd_conn_send_control(c, sender, &m);
	if (ret)
		atomic_store(&c->echo_sent_us, 0);
	return ret;
}

bool psd_echo_took(struct psd_conn *c, uint64_t nonce, uint64_t now_us)
{
	uint64_t want = nonce;
	uint64_t rtt;
	uint32_t r;

	/* only the outstanding echo, and only once */
	if (!nonce || now_us < nonce ||
	    !atomic_compare_exchange_strong(&c->echo_sent_us, &want, 0))
		return false;
	rtt = now_us - nonce;
	r = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
	if (!r)
		r = 1;
	/* the van thread alone writes the window */
	if (now_us - atomic_load(&c->echo_win_us) >= PSD_ECHO_WIN_US) {
		/* a gap of two windows or more leaves nothing to keep */
		atomic_store(&c->echo_min_us[1],
			     now_us - atomic_load(&c->echo_win_us) <
					     2 * PSD_ECHO_WIN_US
				     ? atomic_load(&c->echo_min_us[0])
				     : 0);
		atomic_store(&c->echo_min_us[0], 0);
		atomic_store(&c->echo_win_us, now_us);
	}
	if (!atomic_load(&c->echo_min_us[0]) ||
	    r < atomic_load(&c->echo_min_us[0]))
		atomic_store(&c->echo_min_us[0], r);
	return true;
}

void psd_echo_rx(struct psd_conn *c, int self, const Psched__Echo *e)
{
	Psched__Echo back = PSCHED__ECHO__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	struct psd_conn *t = c;
	struct psd_conn *pair;

	if (!e->reply) {
		back.nonce = e->nonce;
		back.reply = true;
		m.body_case = PSCHED__CONTROL__BODY_ECHO;
		m.echo = &back;
		(void)psd_conn_send_control(c, self, &m);
		return;
	}
	/* the echo went out on the request connection (stable here: the
	 * van thread's pairs are undone only after it stopped) */
	pair = atomic_load(&c->pair);
	if (c->channel == PSD_CHAN_ANS && pair)
		t = pair;
	if (!psd_echo_took(t, e->nonce, psd_now_us()))
		psd_debug("ignoring an echo reply from %s (nonce %llu): not "
			  "the one outstanding",
			  c->peer, (unsigned long long)e->nonce);
}

uint32_t psd_echo_base_us(struct psd_conn *c, uint64_t now_us)
{
	uint64_t win = atomic_load(&c->echo_win_us);
	uint32_t a = atomic_load(&c->echo_min_us[0]);
	uint32_t b = atomic_load(&c->echo_min_us[1]);

	if (!win || now_us - win >= 2 * PSD_ECHO_WIN_US)
		return 0; /* nothing in the last 2-4 s */
	if (now_us - win >= PSD_ECHO_WIN_US)
		b = 0; /* the last window is older than that */
	if (!a)
		return b;
	return b && b < a ? b : a;
}
