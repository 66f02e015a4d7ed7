/* SPDX-License-Identifier: MIT */
/*
 * The scheduler's private state and the functions its files share:
 * scheduler.c (rendezvous, barriers, heartbeats, failures, shutdown,
 * lifecycle) and cfgswitch.c (two-phase config switches, --config-cycle,
 * the autotuner's proposals).  Everything runs on the van thread.
 */
#ifndef PSCHED_SCHEDULER_SCHED_H
#define PSCHED_SCHEDULER_SCHED_H

#include "node.h"
#include "autotune.h"
#include "metrics.h"

struct sched_node {
	struct psd_conn *conn;
	int id;
	enum psched_role role;
	int rank;
	char host[256];
	unsigned port;
	unsigned shm_port;		     /* auto: shm listener, 0 none */
	char host_key[PSD_SHM_HOST_KEY_LEN]; /* psd_shm_host_key(), "" unknown
					      */
	uint64_t last_seen_ms;
	bool used;
	bool dead;
	bool finalized;
	bool closed;
	uint32_t acked_epoch; /* last config PREPARE it answered */
	/* Membership (worker): @out once it asked to leave (the next switch
	 * proposes a membership without it), @left once that committed. */
	bool out;
	bool left;
	uint64_t acked_step; /* the max_step of that answer */
	char desc[96];
	/* For the metrics (metrics.h): the counters of its last heartbeat
	 * and, for a worker, its last step report. */
	bool has_stats;
	struct psched_stats stats;
	uint32_t dead_peers;
	bool has_step;
	struct psd_metrics_step step;
};

/* One config switch in progress (two phases, see proto/psched.proto). */
struct sched_cfg_switch {
	bool open;
	uint32_t epoch;
	uint64_t part;
	uint64_t credit;
	uint64_t max_step; /* highest step any worker acked */
	uint64_t deadline_ms;
	struct psd_cfg_proposal *prop; /* whose config it carries, or NULL */
	uint8_t *members; /* the membership it carries: worker rank bitmap */
	unsigned nmembers;
	/* Only the membership changes (psd_sched_members_kick()): it starts
	 * after the leavers' last step, and the layout stays. */
	bool members_only;
};

#define SCHED_CYCLE_MAX 32
#define SCHED_HIST	64

/* One committed config: the layout in force from @from. */
struct sched_commit {
	uint64_t from;
	uint64_t part;
	uint64_t credit;
};

/* --config-cycle: configs proposed in turn every --config-interval. */
struct sched_cycle {
	uint64_t part[SCHED_CYCLE_MAX];
	uint64_t credit[SCHED_CYCLE_MAX];
	unsigned n;
	unsigned next;
	uint64_t last_ms;
};

struct sched_barrier {
	unsigned arrived;
	struct sched_node **waiting; /* S+W slots */
	uint64_t *seqs;
};

struct psd_sched {
	struct sched_node *nodes; /* S+W slots, registration order */
	/* Each node's connection by node id, a reference each, for
	 * application messages sent from any thread (psched_app_send()):
	 * set once the ids are given, cleared when it closes. */
	pthread_mutex_t app_lock;
	struct psd_conn **app_conns; /* [1 + cap] */
	unsigned cap;
	unsigned nserv;
	unsigned nwork;
	bool table_sent;
	bool shutdown_sent;
	bool done;
	int result;
	char result_msg[512];
	uint64_t start_ms;
	uint64_t shutdown_ms;
	char transport[16];	  /* data transport of the job */
	char transport_from[160]; /* who chose it, for mismatch errors */
	struct sched_barrier barriers[PSCHED_GROUP_ALL + 1];
	uint32_t last_epoch;
	uint64_t last_apply_step;
	struct sched_cfg_switch sw;
	size_t members_len; /* bytes of a membership bitmap */
	struct sched_cycle cycle;
	struct psd_autotune *at; /* --autotune, else NULL */
	/* The config in force (the last committed) and what happened. */
	uint32_t cur_epoch;
	uint64_t cur_part;
	uint64_t cur_credit;
	/* The last commits, oldest first (the first the initial config):
	 * the layout a membership-only switch keeps at its first step. */
	struct sched_commit hist[SCHED_HIST];
	unsigned nhist;
	/* Sizes a membership-only switch from an earlier step overrode:
	 * proposed again once it committed. */
	bool reapply;
	uint64_t reapply_part;
	uint64_t reapply_credit;
	uint64_t switches_committed;
	uint64_t switches_aborted;
	uint64_t declared_dead;
	struct psd_metrics *met; /* --metrics-port / --metrics-file, or NULL */
};

static inline struct psd_sched *psd_sched_of(struct psched_node *n)
{
	return n->role_state;
}

/* Send @m to one registered node (errors show up as a closed connection). */
void psd_sched_send(struct sched_node *sn, const Psched__Control *m);

/* metrics_sched.c: the node's counters from a heartbeat. */
void psd_sched_on_heartbeat(struct sched_node *sn, const Psched__Heartbeat *hb);
/* Van thread, each tick: publish the metrics when due. */
void psd_sched_metrics_tick(struct psched_node *n, uint64_t now);
/* Start serving (scheduler start); 0 or -errno with psched_errmsg(). */
int psd_sched_metrics_start(struct psched_node *n);

/* cfgswitch.c */
bool psd_sched_is_live_worker(const struct sched_node *sn);
/* Commit the open switch once every live worker acknowledged it. */
void psd_sched_cfg_check(struct psched_node *n);
void psd_sched_on_config_ack(struct psched_node *n, struct sched_node *sn,
			     const Psched__ConfigAck *a);
/* A PREPARE nobody finished answering: call it off, naming who. */
void psd_sched_cfg_timeout(struct psched_node *n);
/* --autotune: propose the config the tuner wants once nothing is open. */
void psd_sched_autotune_kick(struct psched_node *n);
void psd_sched_on_metrics(struct psched_node *n, struct sched_node *sn,
			  const Psched__Metrics *m);
/* --config-cycle: propose the next config when its time has come. */
void psd_sched_cycle_tick(struct psched_node *n, uint64_t now);
/* A worker asked to leave (psched_leave()). */
void psd_sched_on_leave(struct psched_node *n, struct sched_node *sn);
/* A membership change is due and nothing is open: propose it. */
void psd_sched_members_kick(struct psched_node *n);
/* "PART:CREDIT,PART:CREDIT,..." with K/M/G suffixes; -EINVAL if bad. */
int psd_sched_cycle_parse(const char *spec, struct sched_cycle *cy);

#endif
