// SPDX-License-Identifier: MIT
/* ps-scheduler: rendezvous, barriers, heartbeats and shutdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

static void usage(void)
{
	printf("usage: ps-scheduler [options] | --version\n"
	       "Runs the scheduler of a psched job (one per job).  With a root "
	       "port of 0 it picks a free port.\nOnce listening it prints "
	       "'PS_ROOT_PORT=<port>' on stdout.\n\n");
	psched_cfg_usage_role(stdout, PSCHED_ROLE_SCHEDULER);
}

int main(int argc, char **argv)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *node;
	int ret;

	for (ret = 1; ret < argc && strcmp(argv[ret], "--"); ret++)
		if (!strcmp(argv[ret], "--version")) {
			printf("ps-scheduler %s\n", psched_version());
			return 0;
		}
	ret = psched_cfg_create(&cfg);
	if (!ret)
		ret = psched_cfg_from_env(cfg);
	if (!ret)
		ret = psched_cfg_parse_args(cfg, &argc, argv, true);
	if (ret == 1) {
		usage();
		psched_cfg_destroy(cfg);
		return 0;
	}
	if (!ret)
		ret = psched_cfg_set(cfg, "role", "scheduler");
	if (ret) {
		fprintf(stderr, "ps-scheduler: %s\n", psched_errmsg());
		psched_cfg_destroy(cfg);
		return 2;
	}
	ret = psched_node_create(cfg, &node);
	psched_cfg_destroy(cfg);
	if (ret) {
		fprintf(stderr, "ps-scheduler: %s\n", psched_errmsg());
		return 1;
	}
	printf("PS_ROOT_PORT=%u\n", psched_node_port(node));
	fflush(stdout);
	ret = psched_node_run(node);
	if (ret)
		fprintf(stderr, "ps-scheduler: %s\n", psched_errmsg());
	psched_node_destroy(node);
	return ret ? 1 : 0;
}
