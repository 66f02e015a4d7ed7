/* SPDX-License-Identifier: MIT */
/*
 * Model profiles for the synthetic training replay: a model as its
 * parameterized layers in forward order, each with a gradient size and a
 * compute cost.  ps-worker replays a profile (backward in reverse order,
 * each finished layer's gradient pushed, the next forward waiting layer by
 * layer for its pull).  Internal to the worker; see docs/profiles.md for
 * where the built-in numbers come from and the CSV format.
 */
#ifndef PSCHED_WORKER_PROFILE_H
#define PSCHED_WORKER_PROFILE_H

#include <stddef.h>
#include <stdint.h>

/* Longest layer name is sizeof(name) - 1 = 47 bytes. */
#define PSD_LAYER_NAME_MAX   48
#define PSD_PROFILE_NAME_MAX 32
/* A CSV profile with more layers than this is rejected. */
#define PSD_PROFILE_MAX_LAYERS 100000
/* Largest per-layer parameter count accepted from CSV (2^40, 4 TiB). */
#define PSD_PROFILE_MAX_PARAMS (UINT64_C(1) << 40)

/* How a profile states its layers' compute cost. */
enum psd_profile_cost {
	/* fwd_flops/bwd_flops per sample: time scales with batch and speed */
	PSD_PROFILE_COST_FLOPS,
	/* fwd_us/bwd_us measured per step: batch and speed are ignored */
	PSD_PROFILE_COST_US,
};

struct psd_layer {
	char name[PSD_LAYER_NAME_MAX];
	uint64_t params;  /* float32 gradient elements (= gradient bytes / 4) */
	double fwd_flops; /* per sample; 0 for PSD_PROFILE_COST_US */
	double bwd_flops; /* per sample; built-ins use 2 x fwd_flops */
	double fwd_us;	  /* per step; 0 for PSD_PROFILE_COST_FLOPS */
	double bwd_us;	  /* per step */
};

struct psd_profile {
	char name[PSD_PROFILE_NAME_MAX];
	enum psd_profile_cost cost;
	size_t nlayers;
	struct psd_layer *layers; /* forward order, owned by the profile */
};

/*
 * Build the built-in profile @name: "resnet50", "vgg16", "alexnet" or
 * "bert-base" (see psd_profile_names()).  On 0 the caller owns *@out and
 * frees it with psd_profile_destroy().  FLOPs are per sample: one 224x224
 * image, or for bert-base one 128-token sequence.
 * Errors: -ENOENT unknown name (callers list psd_profile_names() in their
 * message), -EINVAL NULL argument, -ENOMEM.
 */
int psd_profile_builtin(const char *name, struct psd_profile **out);

/*
 * Load a user profile from the CSV file @path, header
 * "name,params,fwd_flops,bwd_flops" (FLOPs per sample) or
 * "name,params,fwd_us,bwd_us" (microseconds per step).  Blocking file I/O.
 * On 0 the caller owns *@out (free with psd_profile_destroy()).  On error
 * *@out is untouched and, if @err is not NULL, @err holds a NUL-terminated
 * message "<path>:<line>: <what>" (truncated to @errlen bytes).
 * Errors: -EINVAL malformed content (bad or missing header, wrong field
 * count, empty/negative/non-numeric/out-of-range value, empty or overlong
 * name, no layers, more than PSD_PROFILE_MAX_LAYERS layers) or a NULL
 * @path/@out; -errno from opening/reading the file (-ENOENT, -EACCES,
 * -EISDIR, -EIO, ...); -ENOMEM.
 */
int psd_profile_load_csv(const char *path, struct psd_profile **out, char *err,
			 size_t errlen);

/* Free @p and its layers.  NULL is a no-op. */
void psd_profile_destroy(struct psd_profile *p);

/* Sum of params over all layers (float32 elements). */
uint64_t psd_profile_total_params(const struct psd_profile *p);

/*
 * Compute time of layer @i for one step, in microseconds, in *@fwd_us and
 * *@bwd_us.  PSD_PROFILE_COST_FLOPS: flops * @batch / (@tflops * 1e12)
 * seconds, i.e. a device sustaining @tflops TFLOP/s; the caller checks
 * @tflops > 0.  PSD_PROFILE_COST_US: the measured per-step times, @tflops
 * and @batch ignored.  @i < p->nlayers.
 */
void psd_profile_layer_time_us(const struct psd_profile *p, size_t i,
			       double tflops, unsigned batch, double *fwd_us,
			       double *bwd_us);

/* The built-in names for messages: "resnet50, vgg16, alexnet, bert-base". */
const char *psd_profile_names(void);

#endif
