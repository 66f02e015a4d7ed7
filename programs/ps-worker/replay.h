/* SPDX-License-Identifier: MIT */
/*
 * Model replay: drive a worker node through the training steps of a model
 * profile (programs/ps-worker/profile.h).  Each step runs the forward pass
 * layer by layer, every layer first waiting for its parameters pulled in the
 * previous step; then the backward pass in reverse order, every layer's
 * gradient pushed (pushpull: the gradient buffer out, the parameter buffer
 * in) the moment its backward compute ends.  Compute is simulated by
 * sleeping (or spinning) for the profile's time.  Internal to the worker;
 * ps-worker --model uses it.
 *
 * Keys and priorities: layer i of the profile (forward order) is key i
 * with priority i, so front layers, needed first by the next forward, are
 * sent first (smaller = sooner).  Layers without parameters have no key.
 * Timed by seconds, key nlayers (one float, priority -1) carries a vote
 * after each step so that all workers stop after the same step; the vote
 * of step s is waited for one step later, so it never holds a step's
 * communication.  --warmup 0 runs as 1: the first timed step must have a
 * previous step's pulls to wait for, or N timed steps would contain only
 * N - 1 steps' communication.
 *
 * Correctness check: all values start at 0 (rank 0 inits every key to
 * zeros).  In each step a worker writes small integers, derived from the
 * seed, its rank, the step, the layer and the element, into a few sample
 * elements of each gradient (at most PSD_REPLAY_SAMPLES) and leaves the
 * rest as pulled (zero).  After the pull the samples must hold the exact
 * sum over all workers and one non-sample element must still be 0.
 * Workers started with different seeds therefore fail the check.
 */
#ifndef PSCHED_WORKER_REPLAY_H
#define PSCHED_WORKER_REPLAY_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "psched.h"
#include "profile.h"

#define PSD_REPLAY_SAMPLES 4

/* A pulled value was not the expected sum (see psd_replay_result.msg). */
#define PSD_REPLAY_EMISMATCH (-EILSEQ)

struct psd_replay_opts {
	const struct psd_profile *prof;
	double tflops;	     /* FLOPs profiles: device speed, > 0 */
	unsigned batch;	     /* FLOPs profiles: samples per step, > 0 */
	unsigned steps;	     /* timed steps; 0 = run for @seconds */
	double seconds;	     /* when @steps is 0; at least 2 timed steps */
	unsigned warmup;     /* untimed steps first (0 runs as 1) */
	uint64_t seed;	     /* must be equal on every worker */
	unsigned timeout_ms; /* per wait; 0 = the node's request timeout */
	bool spin;	     /* busy-wait instead of sleeping */
	FILE *progress;	     /* NULL, or "seconds,step" after each step */
};

struct psd_replay_result {
	uint64_t steps;	  /* timed steps */
	double seconds;	  /* wall time of the timed steps */
	double compute_s; /* profile compute per step (fwd + bwd) */
	double wait_s;	  /* per timed step: forward blocked on pulls */
	/* honest timing: both must equal @steps and 0 (see replay.c) */
	uint64_t comm_steps;	 /* steps' pulls waited in the timed window */
	uint64_t vote_absorbed;	 /* stop votes waited with a pull of their
				  * step still unwaited, in the window */
	uint64_t bytes_per_step; /* gradient bytes pushed per step */
	unsigned keys;		 /* layers with parameters */
	uint64_t checked;	 /* pulled layer values verified */
	char msg[512];		 /* on error: what failed, naming layer/step */
};

/*
 * Run the replay on @node (a worker).  Collective: every worker of the
 * cluster must run it with the same profile and seed.  Blocking; waits are
 * bounded by @o->timeout_ms.  Returns 0, PSD_REPLAY_EMISMATCH, -EINVAL for
 * bad options, -ENOMEM, or the error of a failed psched call; on error
 * @res->msg says what failed.
 */
int psd_replay_run(struct psched_node *node, const struct psd_replay_opts *o,
		   struct psd_replay_result *res);

#endif
