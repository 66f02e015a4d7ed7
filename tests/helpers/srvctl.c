// SPDX-License-Identifier: MIT
/*
 * Application commands to a server's controller (tests/integration/
 * test_server_controller.sh, 2 servers + 1 worker):
 *
 *   srvctl server   psched_kvstore_run_server_from_env() with a controller:
 *                   head 1 installs an updater (stored += 10 * merged,
 *                   float32) through psched_server_set_updater(), head 2
 *                   is refused with a reason; prints what it got.
 *   srvctl worker   sends head 1 with a body, checks the updater took
 *                   effect on both servers' ranges, head 2 comes back as
 *                   -EINVAL naming the server and the controller's reason,
 *                   and bad arguments are refused before sending.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched/kvstore.h"

#define CHECK_WHO "%s", "srvctl"
#include "check.h"

#define NF (1 << 20)

static atomic_int commands, updates;

static void tenfold(uint64_t key, enum psched_dtype dtype, uint64_t off,
		    void *stored, const void *merged, uint64_t nbytes,
		    void *arg)
{
	float *s = stored;
	const float *m = merged;
	size_t i;

	(void)key;
	(void)off;
	(void)arg;
	(void)dtype;
	for (i = 0; i < nbytes / 4; i++)
		s[i] += 10 * m[i];
	atomic_fetch_add(&updates, 1);
}

static int control(struct psched_node *node, int head, const void *body,
		   size_t len, char *msg, size_t msglen, void *arg)
{
	(void)arg;
	atomic_fetch_add(&commands, 1);
	if (head == 1 && len == 5 && !memcmp(body, "hello", 5))
		return psched_server_set_updater(node, tenfold, NULL);
	snprintf(msg, msglen, "head %d refused on purpose (%zu bytes)", head,
		 len);
	return -EINVAL;
}

static int run_server(void)
{
	int ret = psched_kvstore_run_server_from_env(control, NULL);

	printf("controller got %d commands, updater ran %d times\n",
	       atomic_load(&commands), atomic_load(&updates));
	CHECK(!ret, "%s", psched_errmsg());
	return atomic_load(&commands) != 2;
}

static int run_worker(void)
{
	struct psched_node *n;
	struct psched_cfg *cfg = NULL;
	static float v[NF], out[NF]; /* big enough to span both servers */
	const void *in = v;
	void *o = out;
	uint64_t key = 5, len = sizeof(v), req;
	int i, ret;

	for (i = 0; i < NF; i++)
		v[i] = 1;
	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg), "%s",
	      psched_errmsg());
	CHECK(!psched_node_create(cfg, &n), "%s", psched_errmsg());
	psched_cfg_destroy(cfg);
	CHECK(!psched_keys_init(n, &key, 1, &in, &len, PSCHED_F32, 0), "%s",
	      psched_errmsg());
	CHECK(psched_servers_command(n, 1, NULL, 3, 0) == -EINVAL,
	      "a NULL body was sent");
	CHECK(!psched_servers_command(n, 1, "hello", 5, 0), "%s",
	      psched_errmsg());
	ret = psched_pushpull(n, &key, 1, &in, &o, &len, PSCHED_F32, 0, NULL,
			      NULL, &req);
	CHECK(!ret && !psched_wait(n, req, 0), "%s", psched_errmsg());
	for (i = 0; i < NF; i++) /* 1 + 10 * 1 on both servers' ranges */
		CHECK(out[i] == 11, "out[%d] = %g, want 11", i, out[i]);
	ret = psched_servers_command(n, 2, "x", 1, 0);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "refused on purpose") &&
		      strstr(psched_errmsg(), "server"),
	      "head 2: %d (%s)", ret, psched_errmsg());
	printf("refused as expected: %s\n", psched_errmsg());
	printf("controller commands ok\n");
	return psched_node_destroy(n) != 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return run_server();
	if (argc == 2 && !strcmp(argv[1], "worker"))
		return run_worker();
	fprintf(stderr, "usage: srvctl server|worker\n");
	return 2;
}
