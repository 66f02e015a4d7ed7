// SPDX-License-Identifier: MIT
/*
 * Model profiles: built-in tables computed from the public model
 * definitions (torchvision resnet50/vgg16/alexnet, HF bert-base-uncased)
 * and user profiles loaded from CSV.
 *
 * Conventions (docs/profiles.md has the full story):
 * - params: trainable float32 elements; BatchNorm counts gamma + beta
 *   (2 * c), its running mean/var are buffers and carry no gradient.
 * - fwd_flops: 2 FLOPs per multiply-add of conv/fc/matmul, per sample,
 *   at the layer's output size; bias adds, BatchNorm, LayerNorm,
 *   activations, softmax, pooling and residual adds are not counted.
 * - bwd_flops = 2 * fwd_flops (gradient w.r.t. input and w.r.t. weights,
 *   one forward-sized matmul each), also for the first layer.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "profile.h"

#define PROFILE_CSV_LINE_MAX 4096
#define PROFILE_CSV_FIELDS   4

/* Fills a profile whose layer array was sized for the model. */
struct profile_builder {
	struct psd_profile *p;
	size_t cap;
};

typedef void profile_build_fn(struct profile_builder *b);

struct profile_builtin {
	const char *name;
	size_t nlayers;
	profile_build_fn *build;
};

static int profile_neg_errno(void)
{
	return errno ? -errno : -EIO;
}

static int profile_alloc(const char *name, size_t cap, struct psd_profile **out)
{
	struct psd_profile *p;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->layers = calloc(cap ? cap : 1, sizeof(*p->layers));
	if (!p->layers) {
		free(p);
		return -ENOMEM;
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->cost = PSD_PROFILE_COST_FLOPS;
	*out = p;
	return 0;
}

void psd_profile_destroy(struct psd_profile *p)
{
	if (!p)
		return;
	free(p->layers);
	free(p);
}

/* Append a layer of @params elements costing @macs multiply-adds/sample. */
static void profile_add(struct profile_builder *b, uint64_t params, double macs,
			const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void profile_add(struct profile_builder *b, uint64_t params, double macs,
			const char *fmt, ...)
{
	struct psd_layer *l;
	va_list ap;

	assert(b->p->nlayers < b->cap);
	l = &b->p->layers[b->p->nlayers++];
	va_start(ap, fmt);
	vsnprintf(l->name, sizeof(l->name), fmt, ap);
	va_end(ap);
	l->params = params;
	l->fwd_flops = 2.0 * macs;
	l->bwd_flops = 2.0 * l->fwd_flops;
}

/* k x k conv, @cin -> @cout: k*k*cin*cout weights (+ cout bias). */
static uint64_t conv_params(unsigned k, unsigned cin, unsigned cout, bool bias)
{
	return (uint64_t)k * k * cin * cout + (bias ? cout : 0);
}

/* One multiply-add per weight per output pixel of an @hw x @hw output. */
static double conv_macs(unsigned k, unsigned cin, unsigned cout, unsigned hw)
{
	return (double)k * k * cin * cout * hw * hw;
}

/* BatchNorm over @c channels: gamma + beta. */
static uint64_t bn_params(unsigned c)
{
	return 2 * (uint64_t)c;
}

/* Fully connected @in -> @out with bias: in*out + out. */
static uint64_t fc_params(unsigned in, unsigned out)
{
	return (uint64_t)in * out + out;
}

static double fc_macs(unsigned in, unsigned out)
{
	return (double)in * out;
}

/*
 * ResNet-50, torchvision resnet50 (v1.5: the stride sits on the 3x3 conv
 * of a stage's first block), 224x224 input.  One entry per conv + the
 * BatchNorm after it (convs have no bias), 54 entries:
 *   conv1    7x7 3->64 /2 (112x112): 9,408 + bn 128 = 9,536
 *   layer1   3 blocks, width 64,  56x56:    215,808
 *   layer2   4 blocks, width 128, 28x28:  1,219,584
 *   layer3   6 blocks, width 256, 14x14:  7,098,368
 *   layer4   3 blocks, width 512,  7x7:  14,964,736
 *   fc       2048->1000: 2,048,000 + 1,000 = 2,049,000
 *   total                                25,557,032
 * Forward 4,089,184,256 multiply-adds (8.18 GFLOPs) per image.
 */
struct resnet_stage {
	unsigned blocks;
	unsigned width;	 /* bottleneck width, block output 4 * width */
	unsigned stride; /* of the first block's 3x3 conv and downsample */
};

static const struct resnet_stage resnet50_stages[] = {
	{ 3, 64, 1 },
	{ 4, 128, 2 },
	{ 6, 256, 2 },
	{ 3, 512, 2 },
};

/*
 * Bottleneck @blk of stage @stage with @in input channels at @hw x @hw:
 * 1x1 in->w at hw, 3x3 w->w at hw/stride, 1x1 w->4w at hw/stride, and on
 * a stage's first block a strided 1x1 in->4w downsample (in forward()
 * it runs after conv3).  E.g. layer1.0: 1x1 64->64: 4,096 + bn 128 =
 * 4,224; 3x3 64->64: 36,864 + 128 = 36,992; 1x1 64->256: 16,384 + 512 =
 * 16,896; downsample 1x1 64->256: 16,384 + 512 = 16,896.
 */
static void resnet_add_bottleneck(struct profile_builder *b, unsigned stage,
				  unsigned blk, unsigned in, unsigned hw,
				  const struct resnet_stage *s)
{
	unsigned w = s->width;
	unsigned out = 4 * w;
	unsigned ohw = blk ? hw : hw / s->stride;

	profile_add(b, conv_params(1, in, w, false) + bn_params(w),
		    conv_macs(1, in, w, hw), "layer%u.%u.conv1", stage, blk);
	profile_add(b, conv_params(3, w, w, false) + bn_params(w),
		    conv_macs(3, w, w, ohw), "layer%u.%u.conv2", stage, blk);
	profile_add(b, conv_params(1, w, out, false) + bn_params(out),
		    conv_macs(1, w, out, ohw), "layer%u.%u.conv3", stage, blk);
	if (!blk)
		profile_add(b, conv_params(1, in, out, false) + bn_params(out),
			    conv_macs(1, in, out, ohw), "layer%u.%u.downsample",
			    stage, blk);
}

static void resnet50_build(struct profile_builder *b)
{
	const struct resnet_stage *s;
	unsigned in = 64;
	unsigned hw = 56; /* after conv1 /2 and maxpool /2 */
	unsigned i;
	unsigned blk;

	profile_add(b, conv_params(7, 3, 64, false) + bn_params(64),
		    conv_macs(7, 3, 64, 112), "conv1");
	for (i = 0; i < sizeof(resnet50_stages) / sizeof(*s); i++) {
		s = &resnet50_stages[i];
		for (blk = 0; blk < s->blocks; blk++) {
			resnet_add_bottleneck(b, i + 1, blk, in, hw, s);
			if (!blk)
				hw /= s->stride;
			in = 4 * s->width;
		}
	}
	/* global average pool to 1x1, then fc */
	profile_add(b, fc_params(2048, 1000), fc_macs(2048, 1000), "fc");
}

/* A k x k conv with bias (VGG, AlexNet) producing @hw x @hw. */
struct plain_conv {
	const char *name;
	unsigned k;
	unsigned cin;
	unsigned cout;
	unsigned hw;
};

struct plain_fc {
	const char *name;
	unsigned in;
	unsigned out;
};

/*
 * VGG-16, torchvision vgg16 (configuration D, no BatchNorm), 224x224:
 * 3x3 pad-1 convs with bias, 2x2 max pools between blocks, 7x7 adaptive
 * average pool, three fc layers.  Forward 15,470,264,320 multiply-adds
 * (30.9 GFLOPs) per image.
 */
static const struct plain_conv vgg16_convs[] = {
	{ "conv1_1", 3, 3, 64, 224 },	 /* 3*3*3*64 + 64 = 1,792 */
	{ "conv1_2", 3, 64, 64, 224 },	 /* 3*3*64*64 + 64 = 36,928 */
	{ "conv2_1", 3, 64, 128, 112 },	 /* 3*3*64*128 + 128 = 73,856 */
	{ "conv2_2", 3, 128, 128, 112 }, /* 3*3*128*128 + 128 = 147,584 */
	{ "conv3_1", 3, 128, 256, 56 },	 /* 3*3*128*256 + 256 = 295,168 */
	{ "conv3_2", 3, 256, 256, 56 },	 /* 3*3*256*256 + 256 = 590,080 */
	{ "conv3_3", 3, 256, 256, 56 },	 /* 590,080 */
	{ "conv4_1", 3, 256, 512, 28 },	 /* 3*3*256*512 + 512 = 1,180,160 */
	{ "conv4_2", 3, 512, 512, 28 },	 /* 3*3*512*512 + 512 = 2,359,808 */
	{ "conv4_3", 3, 512, 512, 28 },	 /* 2,359,808 */
	{ "conv5_1", 3, 512, 512, 14 },	 /* 2,359,808 */
	{ "conv5_2", 3, 512, 512, 14 },	 /* 2,359,808 */
	{ "conv5_3", 3, 512, 512, 14 },	 /* 2,359,808 */
};

static const struct plain_fc vgg16_fcs[] = {
	{ "fc6", 512 * 7 * 7, 4096 }, /* 25088*4096 + 4096 = 102,764,544 */
	{ "fc7", 4096, 4096 },	      /* 4096*4096 + 4096 = 16,781,312 */
	{ "fc8", 4096, 1000 },	      /* 4096*1000 + 1000 = 4,097,000 */
};
/* convs 14,714,688 + fcs 123,642,856 = 138,357,544 */

/*
 * AlexNet, torchvision alexnet (the single-tower "one weird trick"
 * variant: 64/192/384/256/256 channels), 224x224: conv1 11x11 /4 pad 2
 * -> 55x55, 3x3 /2 max pool -> 27, conv2 5x5 pad 2, pool -> 13,
 * conv3-5 3x3 pad 1, pool -> 6x6, three fc layers.  Forward 714,188,480
 * multiply-adds (1.43 GFLOPs) per image.
 */
static const struct plain_conv alexnet_convs[] = {
	{ "conv1", 11, 3, 64, 55 },   /* 11*11*3*64 + 64 = 23,296 */
	{ "conv2", 5, 64, 192, 27 },  /* 5*5*64*192 + 192 = 307,392 */
	{ "conv3", 3, 192, 384, 13 }, /* 3*3*192*384 + 384 = 663,936 */
	{ "conv4", 3, 384, 256, 13 }, /* 3*3*384*256 + 256 = 884,992 */
	{ "conv5", 3, 256, 256, 13 }, /* 3*3*256*256 + 256 = 590,080 */
};

static const struct plain_fc alexnet_fcs[] = {
	{ "fc6", 256 * 6 * 6, 4096 }, /* 9216*4096 + 4096 = 37,752,832 */
	{ "fc7", 4096, 4096 },	      /* 4096*4096 + 4096 = 16,781,312 */
	{ "fc8", 4096, 1000 },	      /* 4096*1000 + 1000 = 4,097,000 */
};
/* convs 2,469,696 + fcs 58,631,144 = 61,100,840 */

static void plain_build(struct profile_builder *b,
			const struct plain_conv *convs, size_t nconvs,
			const struct plain_fc *fcs, size_t nfcs)
{
	const struct plain_conv *c;
	const struct plain_fc *f;
	size_t i;

	for (i = 0; i < nconvs; i++) {
		c = &convs[i];
		profile_add(b, conv_params(c->k, c->cin, c->cout, true),
			    conv_macs(c->k, c->cin, c->cout, c->hw), "%s",
			    c->name);
	}
	for (i = 0; i < nfcs; i++) {
		f = &fcs[i];
		profile_add(b, fc_params(f->in, f->out), fc_macs(f->in, f->out),
			    "%s", f->name);
	}
}

static void vgg16_build(struct profile_builder *b)
{
	plain_build(b, vgg16_convs, sizeof(vgg16_convs) / sizeof(*vgg16_convs),
		    vgg16_fcs, sizeof(vgg16_fcs) / sizeof(*vgg16_fcs));
}

static void alexnet_build(struct profile_builder *b)
{
	plain_build(b, alexnet_convs,
		    sizeof(alexnet_convs) / sizeof(*alexnet_convs), alexnet_fcs,
		    sizeof(alexnet_fcs) / sizeof(*alexnet_fcs));
}

/*
 * BERT-base, HF BertModel("bert-base-uncased") incl. pooler: vocab 30522,
 * hidden H = 768, 12 layers, 12 heads, intermediate F = 3072, 512
 * positions, 2 token types.  A sample is one sequence of L = 128 tokens;
 * the head count does not change the multiply-adds.
 */
#define BERT_VOCAB     30522
#define BERT_POSITIONS 512
#define BERT_TYPES     2
#define BERT_HIDDEN    768
#define BERT_FFN       3072
#define BERT_LAYERS    12
#define BERT_SEQ       128

static void bert_base_build(struct profile_builder *b)
{
	const unsigned h = BERT_HIDDEN;
	const double seq = BERT_SEQ;
	unsigned i;

	/*
	 * word + position + token-type tables and a LayerNorm:
	 * (30522 + 512 + 2) * 768 + 2*768 = 23,837,184.  Lookups and the
	 * sum cost no multiply-adds.
	 */
	profile_add(b,
		    (uint64_t)(BERT_VOCAB + BERT_POSITIONS + BERT_TYPES) * h +
			    2 * h,
		    0, "embeddings");
	for (i = 0; i < BERT_LAYERS; i++) {
		/*
		 * Q, K, V and output projections + LayerNorm:
		 * 4 * (768*768 + 768) + 2*768 = 2,363,904.  Per token
		 * 4*H*H for the projections + L*H for Q.K^T + L*H for
		 * softmax.V: 4*589,824 + 2*128*768 = 2,555,904 MACs.
		 */
		profile_add(b, 4 * fc_params(h, h) + 2 * h,
			    seq * (4 * fc_macs(h, h) + 2 * seq * h),
			    "encoder.%u.attention", i);
		/*
		 * 768->3072 and 3072->768 + LayerNorm: 2,362,368 +
		 * 2,360,064 + 1,536 = 4,723,968.  Per token 2*H*F =
		 * 4,718,592 MACs.
		 */
		profile_add(b,
			    fc_params(h, BERT_FFN) + fc_params(BERT_FFN, h) +
				    2 * h,
			    seq * (fc_macs(h, BERT_FFN) + fc_macs(BERT_FFN, h)),
			    "encoder.%u.ffn", i);
	}
	/*
	 * dense 768->768 + tanh on the first ([CLS]) token only:
	 * 589,824 + 768 = 590,592 params, 589,824 MACs per sequence.
	 * Total 23,837,184 + 12 * 7,087,872 + 590,592 = 109,482,240.
	 * Forward 11,174,215,680 MACs (22.3 GFLOPs) per 128-token sequence.
	 */
	profile_add(b, fc_params(h, h), fc_macs(h, h), "pooler");
}

static const struct profile_builtin profile_builtins[] = {
	{ "resnet50", 54, resnet50_build },
	{ "vgg16", 16, vgg16_build },
	{ "alexnet", 8, alexnet_build },
	{ "bert-base", 2 + 2 * BERT_LAYERS, bert_base_build },
};

const char *psd_profile_names(void)
{
	return "resnet50, vgg16, alexnet, bert-base";
}

int psd_profile_builtin(const char *name, struct psd_profile **out)
{
	const struct profile_builtin *m = NULL;
	struct profile_builder b;
	size_t i;
	int ret;

	if (!name || !out)
		return -EINVAL;
	for (i = 0; i < sizeof(profile_builtins) / sizeof(*m); i++) {
		if (!strcmp(name, profile_builtins[i].name)) {
			m = &profile_builtins[i];
			break;
		}
	}
	if (!m)
		return -ENOENT;
	ret = profile_alloc(m->name, m->nlayers, &b.p);
	if (ret)
		return ret;
	b.cap = m->nlayers;
	m->build(&b);
	assert(b.p->nlayers == m->nlayers);
	*out = b.p;
	return 0;
}

uint64_t psd_profile_total_params(const struct psd_profile *p)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < p->nlayers; i++)
		sum += p->layers[i].params;
	return sum;
}

void psd_profile_layer_time_us(const struct psd_profile *p, size_t i,
			       double tflops, unsigned batch, double *fwd_us,
			       double *bwd_us)
{
	const struct psd_layer *l;
	double scale;

	assert(i < p->nlayers);
	l = &p->layers[i];
	if (p->cost == PSD_PROFILE_COST_US) {
		*fwd_us = l->fwd_us;
		*bwd_us = l->bwd_us;
		return;
	}
	assert(tflops > 0);
	/* flops / (tflops * 1e12 FLOP/s) s = flops / (tflops * 1e6) us */
	scale = (double)batch / (tflops * 1e6);
	*fwd_us = l->fwd_flops * scale;
	*bwd_us = l->bwd_flops * scale;
}

/* CSV loading. */

struct csv_ctx {
	const char *path;
	unsigned long line; /* 1-based; 0 while not reading lines */
	char *err;
	size_t errlen;
	bool have_header;
	struct psd_profile *p;
	size_t cap;
};

static int csv_fail(struct csv_ctx *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Record "<path>:<line>: <message>" and return @code. */
static int csv_fail(struct csv_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!c->err || !c->errlen)
		return code;
	if (c->line)
		n = snprintf(c->err, c->errlen, "%s:%lu: ", c->path, c->line);
	else
		n = snprintf(c->err, c->errlen, "%s: ", c->path);
	if (n < 0 || (size_t)n >= c->errlen)
		return code;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

static char *csv_trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*end = '\0';
	return s;
}

/* Split @s at commas into at most @max trimmed fields; return the count. */
static int csv_split(char *s, char **fields, int max)
{
	char *comma;
	int n = 0;

	for (;;) {
		comma = strchr(s, ',');
		if (comma)
			*comma = '\0';
		if (n < max)
			fields[n] = csv_trim(s);
		n++;
		if (!comma)
			return n;
		s = comma + 1;
	}
}

static int csv_header(struct csv_ctx *c, char **f)
{
	if (strcasecmp(f[0], "name") || strcasecmp(f[1], "params"))
		goto bad;
	if (!strcasecmp(f[2], "fwd_flops") && !strcasecmp(f[3], "bwd_flops"))
		c->p->cost = PSD_PROFILE_COST_FLOPS;
	else if (!strcasecmp(f[2], "fwd_us") && !strcasecmp(f[3], "bwd_us"))
		c->p->cost = PSD_PROFILE_COST_US;
	else
		goto bad;
	c->have_header = true;
	return 0;

bad:
	return csv_fail(c, -EINVAL,
			"bad header '%s,%s,%s,%s': expected "
			"'name,params,fwd_flops,bwd_flops' or "
			"'name,params,fwd_us,bwd_us'",
			f[0], f[1], f[2], f[3]);
}

static int csv_u64(struct csv_ctx *c, const char *what, const char *s,
		   uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s)
		return csv_fail(c, -EINVAL, "%s: missing value", what);
	if (*s == '-')
		return csv_fail(c, -EINVAL, "%s: negative value '%.32s'", what,
				s);
	/* strtoull would take leading '+', spaces and '-' */
	if (*s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		goto bad;
	if (errno == ERANGE || v > PSD_PROFILE_MAX_PARAMS)
		return csv_fail(c, -EINVAL, "%s: '%.32s' exceeds %llu", what, s,
				(unsigned long long)PSD_PROFILE_MAX_PARAMS);
	*out = v;
	return 0;

bad:
	return csv_fail(c, -EINVAL, "%s: '%.32s' is not a non-negative integer",
			what, s);
}

static int csv_double(struct csv_ctx *c, const char *what, const char *s,
		      double *out)
{
	double v;
	char *end;

	if (!*s)
		return csv_fail(c, -EINVAL, "%s: missing value", what);
	if (*s == ' ' || *s == '\t') /* strtod would skip them */
		goto bad;
	v = strtod(s, &end);
	if (end == s || *end)
		goto bad;
	if (!isfinite(v))
		return csv_fail(c, -EINVAL, "%s: '%.32s' is not finite", what,
				s);
	if (v < 0)
		return csv_fail(c, -EINVAL, "%s: negative value '%.32s'", what,
				s);
	*out = v;
	return 0;

bad:
	return csv_fail(c, -EINVAL, "%s: '%.32s' is not a number", what, s);
}

/* Make room for one more layer. */
static int csv_grow(struct csv_ctx *c)
{
	struct psd_layer *layers;
	size_t cap;

	if (c->p->nlayers >= PSD_PROFILE_MAX_LAYERS)
		return csv_fail(c, -EINVAL, "more than %d layers",
				PSD_PROFILE_MAX_LAYERS);
	if (c->p->nlayers < c->cap)
		return 0;
	cap = c->cap * 2;
	if (cap > PSD_PROFILE_MAX_LAYERS)
		cap = PSD_PROFILE_MAX_LAYERS;
	layers = realloc(c->p->layers, cap * sizeof(*layers));
	if (!layers)
		return csv_fail(c, -ENOMEM, "out of memory");
	c->p->layers = layers;
	c->cap = cap;
	return 0;
}

static int csv_row(struct csv_ctx *c, char **f)
{
	bool us = c->p->cost == PSD_PROFILE_COST_US;
	struct psd_layer l;
	double fwd;
	double bwd;
	size_t len;
	int ret;

	memset(&l, 0, sizeof(l));
	len = strlen(f[0]);
	if (!len)
		return csv_fail(c, -EINVAL, "empty layer name");
	if (len >= sizeof(l.name))
		return csv_fail(c, -EINVAL,
				"layer name '%.16s...' is %zu bytes, at most "
				"%zu allowed",
				f[0], len, sizeof(l.name) - 1);
	memcpy(l.name, f[0], len + 1);
	ret = csv_u64(c, "params", f[1], &l.params);
	if (!ret)
		ret = csv_double(c, us ? "fwd_us" : "fwd_flops", f[2], &fwd);
	if (!ret)
		ret = csv_double(c, us ? "bwd_us" : "bwd_flops", f[3], &bwd);
	if (!ret)
		ret = csv_grow(c);
	if (ret)
		return ret;
	if (us) {
		l.fwd_us = fwd;
		l.bwd_us = bwd;
	} else {
		l.fwd_flops = fwd;
		l.bwd_flops = bwd;
	}
	c->p->layers[c->p->nlayers++] = l;
	return 0;
}

/* One line of @len bytes as read by getline(), newline included. */
static int csv_line(struct csv_ctx *c, char *line, size_t len)
{
	char *f[PROFILE_CSV_FIELDS];
	char *s;
	int n;

	if (len > PROFILE_CSV_LINE_MAX)
		return csv_fail(c, -EINVAL, "line longer than %d bytes",
				PROFILE_CSV_LINE_MAX);
	if (strlen(line) != len)
		return csv_fail(c, -EINVAL, "NUL byte in line");
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		line[--len] = '\0';
	s = line;
	if (c->line == 1 && !strncmp(s, "\xef\xbb\xbf", 3))
		s += 3; /* UTF-8 byte order mark from spreadsheet exports */
	s = csv_trim(s);
	if (!*s || *s == '#')
		return 0;
	n = csv_split(s, f, PROFILE_CSV_FIELDS);
	if (n != PROFILE_CSV_FIELDS)
		return csv_fail(c, -EINVAL, "%d field%s, expected %d", n,
				n == 1 ? "" : "s", PROFILE_CSV_FIELDS);
	if (!c->have_header)
		return csv_header(c, f);
	return csv_row(c, f);
}

static int csv_read(struct csv_ctx *c, FILE *fp)
{
	char *line = NULL;
	size_t linecap = 0;
	ssize_t len;
	int ret = 0;

	for (;;) {
		errno = 0;
		len = getline(&line, &linecap, fp);
		if (len < 0)
			break;
		c->line++;
		ret = csv_line(c, line, (size_t)len);
		if (ret)
			goto out_free;
	}
	if (!feof(fp)) {
		ret = profile_neg_errno();
		ret = csv_fail(c, ret, "read error: %s", strerror(-ret));
		goto out_free;
	}
	c->line = 0;
	if (!c->have_header)
		ret = csv_fail(c, -EINVAL, "empty file, expected a header");
	else if (!c->p->nlayers)
		ret = csv_fail(c, -EINVAL, "no layers after the header");
out_free:
	free(line);
	return ret;
}

/* The profile is named after the file: "/x/my.model.csv" -> "my.model". */
static void csv_profile_name(const char *path, char *name, size_t size)
{
	const char *base = strrchr(path, '/');
	const char *dot;
	int len;

	base = base ? base + 1 : path;
	dot = strrchr(base, '.');
	len = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
	snprintf(name, size, "%.*s", len, base);
}

int psd_profile_load_csv(const char *path, struct psd_profile **out, char *err,
			 size_t errlen)
{
	struct csv_ctx c = { .path = path, .err = err, .errlen = errlen };
	FILE *fp;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !out)
		return -EINVAL;
	fp = fopen(path, "r");
	if (!fp) {
		ret = profile_neg_errno();
		return csv_fail(&c, ret, "%s", strerror(-ret));
	}
	c.cap = 64;
	ret = profile_alloc("", c.cap, &c.p);
	if (ret) {
		csv_fail(&c, ret, "out of memory");
		goto err_close;
	}
	csv_profile_name(path, c.p->name, sizeof(c.p->name));
	ret = csv_read(&c, fp);
	if (ret)
		goto err_destroy;
	fclose(fp);
	*out = c.p;
	return 0;

err_destroy:
	psd_profile_destroy(c.p);
err_close:
	fclose(fp);
	return ret;
}
