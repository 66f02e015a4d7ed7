// SPDX-License-Identifier: MIT
/*
 * Echo round trips (common/echo.c) and the base round trip a path's
 * queue is judged against (common/transport/tcp_info.c).
 */
#include <string.h>

#include "echo.h"
#include "../harness.h"
#include "internal.h"
#include "transport/tcp_info.h"

static int fake_tx_room(struct psd_conn *c, uint32_t echo_us,
			uint32_t *min_rtt_us)
{
	(void)c;
	(void)echo_us;
	(void)min_rtt_us;
	return 1;
}

static const struct psd_transport_ops fake_ops = { .name = "fake",
						   .tx_room = fake_tx_room };
static const struct psd_transport_ops blind_ops = { .name = "blind" };

static void conn_init(struct psd_conn *c, const struct psd_transport_ops *ops)
{
	memset(c, 0, sizeof(*c));
	c->ops = ops;
	c->fd = -1;
	snprintf(c->peer, sizeof(c->peer), "server 8");
}

/* An echo as psd_echo_send() stamps it, without the send. */
static void stamp(struct psd_conn *c, uint64_t t)
{
	atomic_store(&c->echo_last_us, t);
	atomic_store(&c->echo_sent_us, t);
}

#define S 1000000ull /* one second in us */

static void test_echo_due(void)
{
	struct psd_conn c, blind;
	uint64_t t0 = 100 * S;

	conn_init(&c, &fake_ops);
	conn_init(&blind, &blind_ops);
	CHECK(psd_echo_due(&c, t0));
	/* a transport that cannot tell a round trip gets none */
	CHECK(!psd_echo_due(&blind, t0));
	stamp(&c, t0);
	/* outstanding: none more, until it is given up */
	CHECK(!psd_echo_due(&c, t0 + PSD_ECHO_GAP_US));
	CHECK(!psd_echo_due(&c, t0 + PSD_ECHO_LOST_US - 1));
	CHECK(psd_echo_due(&c, t0 + PSD_ECHO_LOST_US));
	/* answered: the next after the gap */
	CHECK(psd_echo_took(&c, t0, t0 + 400));
	CHECK(!psd_echo_due(&c, t0 + PSD_ECHO_GAP_US - 1));
	CHECK(psd_echo_due(&c, t0 + PSD_ECHO_GAP_US));
	atomic_store(&c.closed, true);
	CHECK(!psd_echo_due(&c, t0 + PSD_ECHO_GAP_US));
}

static void test_echo_took_only_the_outstanding(void)
{
	struct psd_conn c;
	uint64_t t0 = 100 * S;

	conn_init(&c, &fake_ops);
	/* nothing outstanding: a reply is not believed */
	CHECK(!psd_echo_took(&c, t0, t0 + 50));
	CHECK_INT(psd_echo_base_us(&c, t0 + 50), ==, 0);
	stamp(&c, t0);
	/* a forged or late stamp, a zero one, one from the future */
	CHECK(!psd_echo_took(&c, t0 - 7, t0 + 50));
	CHECK(!psd_echo_took(&c, 0, t0 + 50));
	CHECK(!psd_echo_took(&c, t0, t0 - 1));
	CHECK_INT(psd_echo_base_us(&c, t0 + 50), ==, 0);
	CHECK(psd_echo_took(&c, t0, t0 + 4100));
	CHECK_INT(psd_echo_base_us(&c, t0 + 4100), ==, 4100);
	/* the same reply again */
	CHECK(!psd_echo_took(&c, t0, t0 + 9000));
	CHECK_INT(psd_echo_base_us(&c, t0 + 9000), ==, 4100);
}

/* The least of the last 2-4 s: a longer path shows within 4 s, a
 * shorter at once; nothing for 4 s is unknown. */
static void test_echo_window(void)
{
	struct psd_conn c;
	uint64_t t = 100 * S;
	unsigned i;

	conn_init(&c, &fake_ops);
	/* 0.06 ms paths, an echo every half second for 3 s, one slow */
	for (i = 0; i < 6; i++, t += S / 2) {
		stamp(&c, t);
		CHECK(psd_echo_took(&c, t, t + (i == 3 ? 900 : 60)));
	}
	CHECK_INT(psd_echo_base_us(&c, t), ==, 60);
	/* the path lengthens to 4 ms: the old minimum holds for at most
	 * two windows, then the new one */
	for (i = 0; i < 10; i++, t += S / 2) {
		stamp(&c, t);
		CHECK(psd_echo_took(&c, t, t + 4000 + i));
	}
	CHECK_INT(psd_echo_base_us(&c, t), ==, 4000 + 2);
	CHECK(psd_echo_base_us(&c, t) >= 4000);
	/* and shortens again: at once */
	stamp(&c, t);
	CHECK(psd_echo_took(&c, t, t + 70));
	CHECK_INT(psd_echo_base_us(&c, t + 70), ==, 70);
	/* no echo for a window: the current one still counts; for two:
	 * unknown */
	CHECK_INT(psd_echo_base_us(&c, t + PSD_ECHO_WIN_US + 70), ==, 70);
	CHECK_INT(psd_echo_base_us(&c, t + 2 * PSD_ECHO_WIN_US + 70), ==, 0);
	/* and after such a gap nothing old comes back */
	t += 5 * PSD_ECHO_WIN_US;
	stamp(&c, t);
	CHECK(psd_echo_took(&c, t, t + 5000));
	CHECK_INT(psd_echo_base_us(&c, t + 5000), ==, 5000);
}

/* A reply on the answers connection of a split pair is the request
 * connection's echo. */
static void test_echo_split_pair(void)
{
	struct psd_conn req, ans;
	Psched__Echo e = PSCHED__ECHO__INIT;
	uint64_t t = psd_now_us();

	conn_init(&req, &fake_ops);
	conn_init(&ans, &fake_ops);
	req.channel = PSD_CHAN_REQ;
	ans.channel = PSD_CHAN_ANS;
	atomic_store(&ans.pair, &req);
	atomic_store(&req.pair, &ans);
	stamp(&req, t);
	e.nonce = t;
	e.reply = true;
	psd_echo_rx(&ans, 1, &e);
	CHECK_INT(atomic_load(&req.echo_sent_us), ==, 0);
	CHECK(psd_echo_base_us(&req, psd_now_us()) > 0);
	CHECK_INT(psd_echo_base_us(&ans, psd_now_us()), ==, 0);
	/* a forged reply on a lone connection changes nothing */
	conn_init(&ans, &fake_ops);
	stamp(&ans, t);
	e.nonce = t + 12345;
	psd_echo_rx(&ans, 1, &e);
	CHECK_INT(atomic_load(&ans.echo_sent_us), ==, t);
	CHECK_INT(psd_echo_base_us(&ans, psd_now_us()), ==, 0);
}

static void test_path_base(void)
{
	/* no echo, or one near the kernel's minimum: the minimum */
	CHECK_INT(psd_path_base_us(60, 0), ==, 60);
	CHECK_INT(psd_path_base_us(60, 900), ==, 60);
	CHECK_INT(psd_path_base_us(4000, 7900), ==, 4000);
	CHECK_INT(psd_path_base_us(4000, 5200), ==, 4000);
	/* the path lengthened: the echoes' */
	CHECK_INT(psd_path_base_us(60, 4060), ==, 4060);
	CHECK_INT(psd_path_base_us(4000, 10000), ==, 10000);
	/* no kernel minimum yet */
	CHECK_INT(psd_path_base_us(0, 1200), ==, 1200);
	CHECK_INT(psd_path_base_us(0, 500), ==, 0);
}

const struct test_case test_list[] = {
	{ "echo_due", test_echo_due },
	{ "echo_took_only_the_outstanding",
	  test_echo_took_only_the_outstanding },
	{ "echo_window", test_echo_window },
	{ "echo_split_pair", test_echo_split_pair },
	{ "path_base", test_path_base },
	{ NULL, NULL },
};
