// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "../../programs/ps-worker/profile.h"

static struct psd_profile *load_builtin(const char *name)
{
	struct psd_profile *p = NULL;

	CHECK_EQ(psd_profile_builtin(name, &p), 0);
	CHECK(p != NULL);
	CHECK_STR(p->name, name);
	CHECK_EQ(p->cost, PSD_PROFILE_COST_FLOPS);
	return p;
}

static const struct psd_layer *find_layer(const struct psd_profile *p,
					  const char *name)
{
	size_t i;

	for (i = 0; i < p->nlayers; i++)
		if (!strcmp(p->layers[i].name, name))
			return &p->layers[i];
	test_fail_at(__FILE__, __LINE__, "%s: no layer %s", p->name, name);
}

static double total_fwd_flops(const struct psd_profile *p)
{
	double sum = 0;
	size_t i;

	for (i = 0; i < p->nlayers; i++)
		sum += p->layers[i].fwd_flops;
	return sum;
}

static void test_profile_resnet50(void)
{
	struct psd_profile *p = load_builtin("resnet50");
	const struct psd_layer *l;

	CHECK_U64(psd_profile_total_params(p), ==, 25557032);
	/* conv1 + 16 bottlenecks * 3 + 4 downsamples + fc */
	CHECK_EQ(p->nlayers, 54);
	CHECK_STR(p->layers[0].name, "conv1");
	CHECK_U64(p->layers[0].params, ==, 7 * 7 * 3 * 64 + 2 * 64);
	l = &p->layers[p->nlayers - 1];
	CHECK_STR(l->name, "fc");
	CHECK_U64(l->params, ==, 2048 * 1000 + 1000);
	l = find_layer(p, "layer4.0.conv2");
	CHECK_U64(l->params, ==, 3 * 3 * 512 * 512 + 2 * 512);
	/* 3x3 512->512 at 7x7 */
	CHECK_NEAR(l->fwd_flops, 2.0 * 9 * 512 * 512 * 7 * 7, 0.5);
	l = find_layer(p, "layer2.0.downsample");
	CHECK_U64(l->params, ==, 256 * 512 + 2 * 512);
	/* ~4.1 GMACs -> ~8.2 GFLOPs; exactly 4,089,184,256 MACs */
	CHECK_NEAR(total_fwd_flops(p), 8.2e9, 0.05 * 8.2e9);
	CHECK_NEAR(total_fwd_flops(p), 2.0 * 4089184256.0, 1.0);
	psd_profile_destroy(p);
}

static void test_profile_vgg16(void)
{
	struct psd_profile *p = load_builtin("vgg16");
	const struct psd_layer *l;

	CHECK_U64(psd_profile_total_params(p), ==, 138357544);
	CHECK_EQ(p->nlayers, 16);
	l = find_layer(p, "fc6");
	CHECK_U64(l->params, ==, 102764544);
	CHECK_U64(l->params, ==, 25088 * 4096 + 4096);
	CHECK_STR(p->layers[0].name, "conv1_1");
	CHECK_U64(p->layers[0].params, ==, 3 * 3 * 3 * 64 + 64);
	CHECK_STR(p->layers[15].name, "fc8");
	/* ~15.5 GMACs */
	CHECK_NEAR(total_fwd_flops(p), 2 * 15.5e9, 0.05 * 2 * 15.5e9);
	psd_profile_destroy(p);
}

static void test_profile_alexnet(void)
{
	struct psd_profile *p = load_builtin("alexnet");

	CHECK_U64(psd_profile_total_params(p), ==, 61100840);
	CHECK_EQ(p->nlayers, 8);
	CHECK_U64(find_layer(p, "conv1")->params, ==, 11 * 11 * 3 * 64 + 64);
	CHECK_U64(find_layer(p, "fc6")->params, ==, 9216 * 4096 + 4096);
	/* ~0.71 GMACs */
	CHECK_NEAR(total_fwd_flops(p), 2 * 0.714e9, 0.05 * 2 * 0.714e9);
	psd_profile_destroy(p);
}

static void test_profile_bert_base(void)
{
	struct psd_profile *p = load_builtin("bert-base");
	const double h = 768;
	const double l = 128;
	double per_layer;

	CHECK_U64(psd_profile_total_params(p), ==, 109482240);
	/* embeddings + 12 * (attention, ffn) + pooler */
	CHECK_EQ(p->nlayers, 26);
	CHECK_STR(p->layers[0].name, "embeddings");
	CHECK_U64(p->layers[0].params, ==, (30522 + 512 + 2) * 768 + 2 * 768);
	CHECK_STR(p->layers[25].name, "pooler");
	CHECK_U64(p->layers[25].params, ==, 768 * 768 + 768);
	CHECK_U64(p->layers[1].params + p->layers[2].params, ==, 7087872);
	/* per 128-token sequence: 12*H*H + 2*L*H MACs per token and layer */
	per_layer = 2 * l * (12 * h * h + 2 * l * h);
	CHECK_NEAR(p->layers[1].fwd_flops + p->layers[2].fwd_flops, per_layer,
		   1.0);
	CHECK_NEAR(total_fwd_flops(p), 12 * per_layer + 2 * h * h, 1.0);
	CHECK_NEAR(total_fwd_flops(p), 22.35e9, 0.01e9);
	psd_profile_destroy(p);
}

static void test_profile_bwd_is_twice_fwd(void)
{
	static const char *const names[] = { "resnet50", "vgg16", "alexnet",
					     "bert-base" };
	struct psd_profile *p;
	size_t i;
	size_t j;

	for (i = 0; i < sizeof(names) / sizeof(*names); i++) {
		p = load_builtin(names[i]);
		for (j = 0; j < p->nlayers; j++) {
			CHECK_NEAR(p->layers[j].bwd_flops,
				   2 * p->layers[j].fwd_flops, 1e-6);
			CHECK(p->layers[j].params > 0);
			CHECK(p->layers[j].name[0] != '\0');
		}
		psd_profile_destroy(p);
	}
}

static void test_profile_unknown_builtin(void)
{
	struct psd_profile *p = NULL;

	CHECK_EQ(psd_profile_builtin("resnet51", &p), -ENOENT);
	CHECK_EQ(psd_profile_builtin("", &p), -ENOENT);
	CHECK_EQ(psd_profile_builtin("RESNET50", &p), -ENOENT);
	CHECK(p == NULL);
	CHECK_EQ(psd_profile_builtin(NULL, &p), -EINVAL);
	CHECK_EQ(psd_profile_builtin("vgg16", NULL), -EINVAL);
}

/* Every name psd_profile_names() advertises loads. */
static void test_profile_names_all_load(void)
{
	char buf[128];
	char *save = NULL;
	char *tok;
	int n = 0;

	CHECK_STR(psd_profile_names(), "resnet50, vgg16, alexnet, bert-base");
	snprintf(buf, sizeof(buf), "%s", psd_profile_names());
	for (tok = strtok_r(buf, ", ", &save); tok;
	     tok = strtok_r(NULL, ", ", &save)) {
		psd_profile_destroy(load_builtin(tok));
		n++;
	}
	CHECK_EQ(n, 4);
}

static void test_profile_layer_time_flops(void)
{
	struct psd_profile *p = load_builtin("vgg16");
	double fwd;
	double bwd;

	/* fc6: 2 * 25088*4096 FLOPs * 32 samples at 10 TFLOP/s */
	psd_profile_layer_time_us(p, 13, 10.0, 32, &fwd, &bwd);
	CHECK_NEAR(fwd, 2.0 * 25088 * 4096 * 32 / 10e12 * 1e6, 1e-9);
	CHECK_NEAR(bwd, 2 * fwd, 1e-9);
	psd_profile_layer_time_us(p, 13, 20.0, 32, &fwd, &bwd);
	CHECK_NEAR(fwd, 2.0 * 25088 * 4096 * 32 / 20e12 * 1e6, 1e-9);
	psd_profile_layer_time_us(p, 0, 10.0, 0, &fwd, &bwd);
	CHECK_NEAR(fwd, 0, 0);
	CHECK_NEAR(bwd, 0, 0);
	psd_profile_destroy(p);
}

/* Write @text to a fresh temp file; the caller unlinks @path. */
static void write_tmp(char *path, size_t size, const char *text, size_t len)
{
	FILE *f;
	int fd;

	snprintf(path, size, "/tmp/test_profile.XXXXXX");
	fd = mkstemp(path);
	CHECK_INT(fd, >=, 0);
	f = fdopen(fd, "w");
	CHECK(f != NULL);
	CHECK_EQ(fwrite(text, 1, len, f), len);
	CHECK_EQ(fclose(f), 0);
}

/* Load @text as a CSV file; return the code, *@out on success. */
static int load_text_len(const char *text, size_t len, struct psd_profile **out,
			 char *err, size_t errlen)
{
	char path[64];
	int ret;

	write_tmp(path, sizeof(path), text, len);
	ret = psd_profile_load_csv(path, out, err, errlen);
	unlink(path);
	return ret;
}

static int load_text(const char *text, struct psd_profile **out, char *err,
		     size_t errlen)
{
	return load_text_len(text, strlen(text), out, err, errlen);
}

/* Write @src as CSV in FLOPs form, load it back, compare. */
static void test_profile_csv_roundtrip_flops(void)
{
	struct psd_profile *src = load_builtin("resnet50");
	struct psd_profile *p = NULL;
	char path[64];
	char err[256];
	FILE *f;
	size_t i;
	int fd;

	snprintf(path, sizeof(path), "/tmp/test_profile.XXXXXX");
	fd = mkstemp(path);
	CHECK_INT(fd, >=, 0);
	f = fdopen(fd, "w");
	CHECK(f != NULL);
	fprintf(f, "name,params,fwd_flops,bwd_flops\n");
	for (i = 0; i < src->nlayers; i++)
		fprintf(f, "%s,%llu,%.17g,%.17g\n", src->layers[i].name,
			(unsigned long long)src->layers[i].params,
			src->layers[i].fwd_flops, src->layers[i].bwd_flops);
	CHECK_EQ(fclose(f), 0);
	CHECK_EQ(psd_profile_load_csv(path, &p, err, sizeof(err)), 0);
	unlink(path);
	CHECK_EQ(p->cost, PSD_PROFILE_COST_FLOPS);
	CHECK_EQ(p->nlayers, src->nlayers);
	CHECK_U64(psd_profile_total_params(p), ==, 25557032);
	for (i = 0; i < p->nlayers; i++) {
		CHECK_STR(p->layers[i].name, src->layers[i].name);
		CHECK_U64(p->layers[i].params, ==, src->layers[i].params);
		CHECK(p->layers[i].fwd_flops == src->layers[i].fwd_flops);
		CHECK(p->layers[i].bwd_flops == src->layers[i].bwd_flops);
	}
	psd_profile_destroy(p);
	psd_profile_destroy(src);
}

static void test_profile_csv_us(void)
{
	static const char text[] = "# measured on a V100, batch 32\r\n"
				   "\xef\xbb\xbfignored\n";
	static const char good[] =
		"\xef\xbb\xbf"
		"name,params,fwd_us,bwd_us\r\n"
		"# comment\n"
		"\n"
		"  embed , 1000 , 12.5 , 25\r\n"
		"head,0,0,0.75\n"
		"last,1099511627776,1e3,2E3"; /* no newline */
	struct psd_profile *p = NULL;
	char err[256];
	double fwd;
	double bwd;

	/* a BOM is only skipped at the start of the file */
	CHECK_EQ(load_text(text, &p, err, sizeof(err)), -EINVAL);
	CHECK_EQ(load_text(good, &p, err, sizeof(err)), 0);
	CHECK_EQ(p->cost, PSD_PROFILE_COST_US);
	CHECK_EQ(p->nlayers, 3);
	CHECK_STR(p->layers[0].name, "embed");
	CHECK_U64(p->layers[0].params, ==, 1000);
	CHECK_U64(p->layers[2].params, ==, 1ULL << 40);
	CHECK_U64(psd_profile_total_params(p), ==, 1000 + (1ULL << 40));
	/* measured per-step times: speed and batch are ignored */
	psd_profile_layer_time_us(p, 0, 10.0, 32, &fwd, &bwd);
	CHECK_NEAR(fwd, 12.5, 0);
	CHECK_NEAR(bwd, 25, 0);
	psd_profile_layer_time_us(p, 0, 1.0, 1, &fwd, &bwd);
	CHECK_NEAR(fwd, 12.5, 0);
	psd_profile_layer_time_us(p, 2, 1.0, 1, &fwd, &bwd);
	CHECK_NEAR(fwd, 1000, 0);
	CHECK_NEAR(bwd, 2000, 0);
	CHECK_NEAR(p->layers[1].bwd_us, 0.75, 0);
	CHECK_NEAR(p->layers[1].fwd_flops, 0, 0);
	psd_profile_destroy(p);
}

static void test_profile_csv_name_from_file(void)
{
	struct psd_profile *p = NULL;
	char path[] = "/tmp/test_profile.XXXXXX";
	char csv[80];
	FILE *f;
	int fd;

	fd = mkstemp(path);
	CHECK_INT(fd, >=, 0);
	close(fd);
	unlink(path);
	snprintf(csv, sizeof(csv), "%s.model.csv", path);
	f = fopen(csv, "w");
	CHECK(f != NULL);
	fputs("name,params,fwd_flops,bwd_flops\nl0,1,2,4\n", f);
	CHECK_EQ(fclose(f), 0);
	CHECK_EQ(psd_profile_load_csv(csv, &p, NULL, 0), 0);
	unlink(csv);
	CHECK(!strncmp(p->name, "test_profile.", 13));
	CHECK(strstr(p->name, ".model") != NULL);
	CHECK(strstr(p->name, ".csv") == NULL);
	psd_profile_destroy(p);
}

struct bad_csv {
	const char *text;
	int code;
	const char *msg; /* expected in the message, with "<path>:<line>" */
	unsigned line;
};

static const struct bad_csv bad_csvs[] = {
	{ "", -EINVAL, "empty file", 0 },
	{ "\n# only a comment\n\n", -EINVAL, "empty file", 0 },
	{ "name,params,fwd_flops,bwd_flops\n", -EINVAL, "no layers", 0 },
	{ "name,params,fwd,bwd\na,1,2,3\n", -EINVAL, "bad header", 1 },
	{ "layer,params,fwd_us,bwd_us\n", -EINVAL, "bad header", 1 },
	{ "name,params,fwd_us,bwd_flops\n", -EINVAL, "bad header", 1 },
	{ "conv1,9408,1,2\n", -EINVAL, "bad header", 1 },
	{ "name,params,fwd_us\n", -EINVAL, "3 fields", 1 },
	{ "name,params,fwd_us,bwd_us\na,1,2\n", -EINVAL, "3 fields", 2 },
	{ "name,params,fwd_us,bwd_us\na\n", -EINVAL, "1 field,", 2 },
	{ "name,params,fwd_us,bwd_us\na,1,2,3,4\n", -EINVAL, "5 fields", 2 },
	{ "name,params,fwd_us,bwd_us\na,1,2,\n", -EINVAL, "bwd_us: missing",
	  2 },
	{ "name,params,fwd_us,bwd_us\na,,2,3\n", -EINVAL, "params: missing",
	  2 },
	{ "name,params,fwd_us,bwd_us\n,1,2,3\n", -EINVAL, "empty layer name",
	  2 },
	{ "name,params,fwd_us,bwd_us\na,1,2,3\nb,-1,2,3\n", -EINVAL,
	  "params: negative", 3 },
	{ "name,params,fwd_us,bwd_us\na,1,-2,3\n", -EINVAL, "fwd_us: negative",
	  2 },
	{ "name,params,fwd_flops,bwd_flops\na,1,2,-0.5\n", -EINVAL,
	  "bwd_flops: negative", 2 },
	{ "name,params,fwd_us,bwd_us\na,12x,2,3\n", -EINVAL,
	  "params: '12x' is not", 2 },
	{ "name,params,fwd_us,bwd_us\na,+1,2,3\n", -EINVAL, "params: '+1'", 2 },
	{ "name,params,fwd_us,bwd_us\na,1.5,2,3\n", -EINVAL, "params: '1.5'",
	  2 },
	{ "name,params,fwd_us,bwd_us\na,1,abc,3\n", -EINVAL,
	  "fwd_us: 'abc' is not a number", 2 },
	{ "name,params,fwd_us,bwd_us\na,1,2,3us\n", -EINVAL,
	  "bwd_us: '3us' is not a number", 2 },
	{ "name,params,fwd_us,bwd_us\na,1,nan,3\n", -EINVAL, "not finite", 2 },
	{ "name,params,fwd_us,bwd_us\na,1,2,inf\n", -EINVAL, "not finite", 2 },
	{ "name,params,fwd_us,bwd_us\na,1,1e999,3\n", -EINVAL, "not finite",
	  2 },
	{ "name,params,fwd_us,bwd_us\na,99999999999999999999999,2,3\n", -EINVAL,
	  "exceeds", 2 },
	{ "name,params,fwd_us,bwd_us\na,1099511627777,2,3\n", -EINVAL,
	  "exceeds", 2 },
	{ "name,params,fwd_us,bwd_us\n"
	  "a23456789012345678901234567890123456789012345678,1,2,3\n",
	  -EINVAL, "48 bytes, at most 47", 2 },
	{ "name,params,fwd_us,bwd_us\n\"a,b\",1,2,3\n", -EINVAL, "5 fields",
	  2 },
};

static void test_profile_csv_malformed(void)
{
	struct psd_profile *p = NULL;
	char want[64];
	char err[512];
	size_t i;
	int ret;

	for (i = 0; i < sizeof(bad_csvs) / sizeof(*bad_csvs); i++) {
		memset(err, 'x', sizeof(err));
		ret = load_text(bad_csvs[i].text, &p, err, sizeof(err));
		if (ret != bad_csvs[i].code || !strstr(err, bad_csvs[i].msg))
			test_fail_at(__FILE__, __LINE__,
				     "case %zu: ret %d, message \"%s\", want "
				     "%d \"%s\"",
				     i, ret, err, bad_csvs[i].code,
				     bad_csvs[i].msg);
		CHECK(p == NULL);
		CHECK(!strncmp(err, "/tmp/test_profile.", 18));
		if (bad_csvs[i].line) {
			snprintf(want, sizeof(want), ":%u: ", bad_csvs[i].line);
			if (!strstr(err, want))
				test_fail_at(__FILE__, __LINE__,
					     "case %zu: \"%s\" lacks line %u",
					     i, err, bad_csvs[i].line);
		}
	}
}

/* A 47-byte name is the longest accepted. */
static void test_profile_csv_name_limit(void)
{
	static const char text[] =
		"name,params,fwd_us,bwd_us\n"
		"a2345678901234567890123456789012345678901234567,1,2,3\n";
	struct psd_profile *p = NULL;

	CHECK_EQ(load_text(text, &p, NULL, 0), 0);
	CHECK_EQ(strlen(p->layers[0].name), 47);
	psd_profile_destroy(p);
}

static void test_profile_csv_nul_byte(void)
{
	static const char text[] = "name,params,fwd_us,bwd_us\na\0b,1,2,3\n";
	struct psd_profile *p = NULL;
	char err[256];

	CHECK_EQ(load_text_len(text, sizeof(text) - 1, &p, err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, ":2: NUL byte") != NULL);
	CHECK(p == NULL);
}

static void test_profile_csv_long_line(void)
{
	struct psd_profile *p = NULL;
	char err[256];
	char *text;
	size_t len = 8192;

	text = malloc(len + 1);
	CHECK(text != NULL);
	memset(text, 'a', len);
	text[len] = '\0';
	memcpy(text, "name,params,fwd_us,bwd_us\n", 26);
	CHECK_EQ(load_text(text, &p, err, sizeof(err)), -EINVAL);
	free(text);
	CHECK(strstr(err, ":2: line longer than") != NULL);
}

/* Write a header and @n rows. */
static void write_rows(char *path, size_t size, unsigned n)
{
	FILE *f;
	unsigned i;
	int fd;

	snprintf(path, size, "/tmp/test_profile.XXXXXX");
	fd = mkstemp(path);
	CHECK_INT(fd, >=, 0);
	f = fdopen(fd, "w");
	CHECK(f != NULL);
	fputs("name,params,fwd_flops,bwd_flops\n", f);
	for (i = 0; i < n; i++)
		fprintf(f, "l%u,%u,%u,%u\n", i, i + 1, 2 * i, 4 * i);
	CHECK_EQ(fclose(f), 0);
}

static void test_profile_csv_layer_limit(void)
{
	struct psd_profile *p = NULL;
	char path[64];
	char err[256];
	int ret;

	write_rows(path, sizeof(path), PSD_PROFILE_MAX_LAYERS);
	ret = psd_profile_load_csv(path, &p, err, sizeof(err));
	unlink(path);
	CHECK_EQ(ret, 0);
	CHECK_EQ(p->nlayers, PSD_PROFILE_MAX_LAYERS);
	CHECK_STR(p->layers[PSD_PROFILE_MAX_LAYERS - 1].name, "l99999");
	CHECK_U64(psd_profile_total_params(p), ==, 100000ULL * 100001 / 2);
	psd_profile_destroy(p);
	p = NULL;

	write_rows(path, sizeof(path), PSD_PROFILE_MAX_LAYERS + 1);
	ret = psd_profile_load_csv(path, &p, err, sizeof(err));
	unlink(path);
	CHECK_EQ(ret, -EINVAL);
	CHECK(p == NULL);
	CHECK(strstr(err, ":100002: more than 100000 layers") != NULL);
}

static void test_profile_csv_file_errors(void)
{
	struct psd_profile *p = NULL;
	char err[256];
	char small[12];

	CHECK_EQ(psd_profile_load_csv("/nonexistent/x.csv", &p, err,
				      sizeof(err)),
		 -ENOENT);
	CHECK(strstr(err, "/nonexistent/x.csv: ") == err);
	CHECK_EQ(psd_profile_load_csv("/tmp", &p, err, sizeof(err)), -EISDIR);
	CHECK(p == NULL);
	/* a short buffer is truncated, still terminated */
	CHECK_EQ(load_text("", &p, small, sizeof(small)), -EINVAL);
	CHECK_EQ(strlen(small), sizeof(small) - 1);
	/* no buffer at all */
	CHECK_EQ(load_text("", &p, NULL, 0), -EINVAL);
	CHECK_EQ(psd_profile_load_csv(NULL, &p, err, sizeof(err)), -EINVAL);
	psd_profile_destroy(NULL);
}

const struct test_case test_list[] = {
	{ "profile_resnet50", test_profile_resnet50 },
	{ "profile_vgg16", test_profile_vgg16 },
	{ "profile_alexnet", test_profile_alexnet },
	{ "profile_bert_base", test_profile_bert_base },
	{ "profile_bwd_is_twice_fwd", test_profile_bwd_is_twice_fwd },
	{ "profile_unknown_builtin", test_profile_unknown_builtin },
	{ "profile_names_all_load", test_profile_names_all_load },
	{ "profile_layer_time_flops", test_profile_layer_time_flops },
	{ "profile_csv_roundtrip_flops", test_profile_csv_roundtrip_flops },
	{ "profile_csv_us", test_profile_csv_us },
	{ "profile_csv_name_from_file", test_profile_csv_name_from_file },
	{ "profile_csv_malformed", test_profile_csv_malformed },
	{ "profile_csv_name_limit", test_profile_csv_name_limit },
	{ "profile_csv_nul_byte", test_profile_csv_nul_byte },
	{ "profile_csv_long_line", test_profile_csv_long_line },
	{ "profile_csv_layer_limit", test_profile_csv_layer_limit },
	{ "profile_csv_file_errors", test_profile_csv_file_errors },
	{ NULL, NULL },
};
