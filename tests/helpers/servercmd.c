// SPDX-License-Identifier: MIT
/*
 * Server commands against a real server (tests/integration/
 * test_server_command.sh, 1 server + 1 worker):
 *
 *   servercmd server   a server embedded with psched_node_create() that
 *                      installs a custom updater (stored += 2 * merged
 *                      for float32) with psched_server_set_updater();
 *   servercmd worker   sends garbage ServerCommands (each must come back
 *                      as a clear refusal, the server alive), then checks
 *                      the custom updater, the mode-switch refusal, the
 *                      SGD optimizer replacing the custom updater, and the
 *                      default rule after a reset.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "psched/kvstore.h"
#include "../../worker/command.h"

#define CHECK_WHO "%s", "servercmd"
#include "check.h"

#define GROUP (PSCHED_GROUP_SERVERS | PSCHED_GROUP_WORKERS)

static atomic_int calls;

static void twice(uint64_t key, enum psched_dtype dtype, uint64_t off,
		  void *stored, const void *merged, uint64_t nbytes, void *arg)
{
	float *s = stored;
	const float *m = merged;
	size_t i;

	(void)key;
	(void)off;
	(void)arg;
	if (dtype != PSCHED_F32) {
		memcpy(stored, merged, (size_t)nbytes);
		return;
	}
	for (i = 0; i < nbytes / 4; i++)
		s[i] += 2 * m[i];
	atomic_fetch_add(&calls, 1);
}

static int run_server(void)
{
	struct psched_node *node;
	struct psched_cfg *cfg = NULL;
	int ret;

	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "server"),
	      "%s", psched_errmsg());
	ret = psched_node_create(cfg, &node);
	psched_cfg_destroy(cfg);
	CHECK(!ret, "%s", psched_errmsg());
	CHECK(!psched_server_set_updater(node, twice, NULL), "%s",
	      psched_errmsg());
	/* Workers push only after the updater is in. */
	CHECK(!psched_barrier(node, GROUP, 0), "%s", psched_errmsg());
	ret = psched_node_run(node);
	psched_node_destroy(node);
	printf("custom updater ran %d times\n", atomic_load(&calls));
	return ret || atomic_load(&calls) < 1;
}

/* A garbage command must be refused with -EINVAL naming @want. */
static void expect_refused(struct psched_node *n, Psched__ServerCommand *sc,
			   const char *want)
{
	int ret = psd_cmd_send(n, sc, 0);

	CHECK(ret == -EINVAL, "want -EINVAL for '%s', got %d (%s)", want, ret,
	      psched_errmsg());
	CHECK(strstr(psched_errmsg(), "refused the command") &&
		      strstr(psched_errmsg(), want),
	      "message '%s' does not name '%s'", psched_errmsg(), want);
	printf("refused as expected: %s\n", psched_errmsg());
}

static void garbage(struct psched_node *n)
{
	Psched__ServerCommand sc = PSCHED__SERVER_COMMAND__INIT;
	Psched__Optimizer po = PSCHED__OPTIMIZER__INIT;
	char longname[200];
	char ftrl[] = "ftrl";
	char sgd[] = "sgd";

	sc.mode = (Psched__ServerMode)7;
	expect_refused(n, &sc, "unknown server mode 7");
	sc.mode = PSCHED__SERVER_MODE__MODE_UNCHANGED;
	sc.optimizer = &po;
	po.name = ftrl;
	po.rescale_grad = 1;
	expect_refused(n, &sc, "'ftrl' is not supported");
	po.name = sgd;
	po.learning_rate = NAN;
	expect_refused(n, &sc, "learning_rate nan");
	po.learning_rate = 0.1;
	po.momentum = -0.5;
	expect_refused(n, &sc, "momentum -0.5");
	po.momentum = 0;
	po.wd = INFINITY;
	expect_refused(n, &sc, "wd inf");
	po.wd = 0;
	po.rescale_grad = 0;
	expect_refused(n, &sc, "rescale_grad 0");
	po.rescale_grad = 1;
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	po.name = longname;
	expect_refused(n, &sc, "too long");
}

static void push_pull(struct psched_node *n, float pushed, float want)
{
	float v[4] = { pushed, pushed, pushed, pushed }, out[4];
	const void *in = v;
	void *o = out;
	uint64_t key = 1, len = sizeof(v), req;
	int i, ret;

	ret = psched_pushpull(n, &key, 1, &in, &o, &len, PSCHED_F32, 0, NULL,
			      NULL, &req);
	if (!ret)
		ret = psched_wait(n, req, 0);
	CHECK(!ret, "pushpull: %s", psched_errmsg());
	for (i = 0; i < 4; i++)
		CHECK(out[i] == want, "pulled %g, want %g", out[i], want);
}

static int run_worker(void)
{
	struct psched_optimizer opt;
	struct psched_node *n;
	struct psched_cfg *cfg = NULL;
	float one[4] = { 1, 1, 1, 1 };
	const void *v = one;
	uint64_t key = 1, len = sizeof(one);
	int ret;

	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	CHECK(!psched_node_create(cfg, &n), "%s", psched_errmsg());
	psched_cfg_destroy(cfg);
	CHECK(!psched_barrier(n, GROUP, 0), "%s", psched_errmsg());
	garbage(n);
	CHECK(psched_server_set_updater(n, twice, NULL) == -EINVAL,
	      "a worker took a server updater");
	CHECK(!psched_keys_init(n, &key, 1, &v, &len, PSCHED_F32, 0), "%s",
	      psched_errmsg());
	push_pull(n, 1, 3); /* custom: 1 + 2 * 1 */
	ret = psched_servers_configure(n, "async", NULL, 0);
	CHECK(ret == -EBUSY && strstr(psched_errmsg(), "cannot switch"),
	      "mode switch after pushes: %d (%s)", ret, psched_errmsg());
	printf("refused as expected: %s\n", psched_errmsg());
	CHECK(!psched_servers_configure(n, "sync", NULL, 0), "%s",
	      psched_errmsg());
	psched_optimizer_init(&opt);
	opt.learning_rate = 0.5;
	CHECK(!psched_servers_configure(n, NULL, &opt, 0), "%s",
	      psched_errmsg());
	push_pull(n, 1, 2.5f); /* sgd: 3 - 0.5 * 1 */
	opt.name = "";
	CHECK(!psched_servers_configure(n, NULL, &opt, 0), "%s",
	      psched_errmsg());
	push_pull(n, 7, 7); /* default: the aggregate replaces */
	printf("server commands ok\n");
	return psched_node_destroy(n) != 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "server"))
		return run_server();
	if (argc == 2 && !strcmp(argv[1], "worker"))
		return run_worker();
	fprintf(stderr, "usage: servercmd server|worker\n");
	return 2;
}
