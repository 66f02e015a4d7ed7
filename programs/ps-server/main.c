// SPDX-License-Identifier: MIT
/* ps-server: holds and aggregates its share of every tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

static void usage(void)
{
	printf("usage: ps-server [options] | --version\n"
	       "Runs one server of a psched job until the scheduler shuts the "
	       "job down.\n\n");
	psched_cfg_usage_role(stdout, PSCHED_ROLE_SERVER);
}

int main(int argc, char **argv)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *node;
	int ret;

	for (ret = 1; ret < argc && strcmp(argv[ret], "--"); ret++)
		if (!strcmp(argv[ret], "--version")) {
			printf("ps-server %s\n", psched_version());
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
		ret = psched_cfg_set(cfg, "role", "server");
	if (ret) {
		fprintf(stderr, "ps-server: %s\n", psched_errmsg());
		psched_cfg_destroy(cfg);
		return 2;
	}
	ret = psched_node_create(cfg, &node);
	psched_cfg_destroy(cfg);
	if (ret) {
		fprintf(stderr, "ps-server: %s\n", psched_errmsg());
		return 1;
	}
	printf("ps-server rank %d id %d listening on 0.0.0.0:%u\n",
	       psched_node_rank(node), psched_node_id(node),
	       psched_node_port(node));
	fflush(stdout);
	ret = psched_node_run(node);
	if (ret)
		fprintf(stderr, "ps-server: %s\n", psched_errmsg());
	psched_node_destroy(node);
	return ret ? 1 : 0;
}
