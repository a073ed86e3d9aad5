// SPDX-License-Identifier: Apache-2.0
/*
 * test_bench_report.c - bench/stats.c and bench/report.c: nearest-rank
 * percentiles on data whose answer is known by hand, and a report written
 * into a scratch directory and read back the way its users read it:
 * results.json parsed by jansson, results.md searched for its rows, the
 * PNGs checked by their magic bytes.
 *
 * gnuplot's absence and failure are staged with a PATH that has no
 * gnuplot, or a fake one that fails; each criterion test runs in its own
 * process, so changing PATH there touches no other test.  The real plots
 * are checked only where gnuplot is installed (skipped otherwise).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/report.h"
#include "tests/unit/state_file.h"
#include "bench/stats.h"

#define EMULATED_HOST_KIND "SVM, nested in a QEMU-TCG-emulated host"

static char scratch[64];
static char err[2 * PATH_MAX];
static struct report *report;

static void setup(void)
{
	scratch_dir_make(scratch, sizeof(scratch), "bench-report");
	report = report_new();
	cr_assert_not_null(report);
}

static void teardown(void)
{
	report_free(report);
	scratch_dir_remove(scratch);
}

TestSuite(report, .init = setup, .fini = teardown);

/* @dir/@name into a static buffer. */
static const char *in(const char *dir, const char *name)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

/* The whole of @path, to free(); fails the test when unreadable. */
static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	long size;

	cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	size = ftell(f);
	rewind(f);
	text = calloc(1, size + 1);
	cr_assert_not_null(text);
	cr_assert_eq(fread(text, 1, size, f), (size_t)size);
	fclose(f);
	return text;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static bool gnuplot_installed(void)
{
	return access("/usr/bin/gnuplot", X_OK) == 0;
}

/* Samples @from, @from + @step, ... up to @to inclusive, added downwards. */
static void fill(struct samples *s, double from, double to, double step)
{
	for (double v = to; v >= from; v -= step)
		cr_assert_eq(samples_add(s, v), 0);
}

static const struct machine test_machine = {
	.cores = 8,
	.mem_mib = 16384,
	.cpu_model = "Test CPU | 3 GHz",
	.kernel = "6.1.0-test",
	.kvm_kind = "VMX",
	.hostname = "bench-host",
};

/*
 * The report most tests write: a samples figure (1..100 added downwards),
 * a value, and a failure whose reason has a '|' and a line break.
 */
static void fill_report(void)
{
	struct samples s = { 0 };

	fill(&s, 1, 100, 1);
	report_set_machine(report, &test_machine);
	cr_assert_eq(report_add_samples(report, "restore",
					"warm pool, concurrency 10", "ms", &s,
					"clone's first run"),
		     0);
	cr_assert_eq(report_add_value(report, "density", "clones in 16 GiB",
				      "clones", 42, NULL),
		     0);
	cr_assert_eq(report_add_failure(report, "peers", "firecracker restore",
					"firecracker: not installed | PATH\n"
					"searched"),
		     0);
	samples_free(&s);
}

static json_t *load_json(const char *dir)
{
	json_error_t error;
	json_t *root = json_load_file(in(dir, "results.json"), 0, &error);

	cr_assert_not_null(root, "results.json: line %d: %s", error.line,
			   error.text);
	return root;
}

/* The figure called @name in results.json's figures. */
static json_t *figure_named(json_t *root, const char *name)
{
	json_t *figure;
	size_t i;

	json_array_foreach(json_object_get(root, "figures"), i, figure)
	{
		if (strcmp(json_string_value(json_object_get(figure, "name")),
			   name) == 0)
			return figure;
	}
	cr_assert_fail("results.json has no figure \"%s\"", name);
	return NULL;
}

static double number(json_t *object, const char *key)
{
	json_t *v = json_object_get(object, key);

	cr_assert(json_is_number(v), "\"%s\" is not a number", key);
	return json_number_value(v);
}

static const char *string(json_t *object, const char *key)
{
	json_t *v = json_object_get(object, key);

	cr_assert(json_is_string(v), "\"%s\" is not a string", key);
	return json_string_value(v);
}

Test(stats, one_to_hundred)
{
	struct samples s = { 0 };
	struct summary sum;

	fill(&s, 1, 100, 1);
	cr_assert_eq(samples_summarize(&s, &sum), 0);
	cr_expect_eq(sum.n, 100);
	cr_expect_eq(sum.min, 1);
	cr_expect_eq(sum.p50, 50);
	cr_expect_eq(sum.p95, 95);
	cr_expect_eq(sum.p99, 99);
	cr_expect_eq(sum.max, 100);
	cr_expect_float_eq(sum.mean, 50.5, 1e-12);
	/* The samples keep their order: the summary sorted a copy. */
	cr_expect_eq(s.v[0], 100);
	cr_expect_eq(s.v[99], 1);
	samples_free(&s);
}

/* Nearest-rank, not interpolated: every percentile is a sample. */
Test(stats, nearest_rank)
{
	struct samples s = { 0 };
	struct summary sum;

	fill(&s, 1, 4, 1);
	cr_assert_eq(samples_summarize(&s, &sum), 0);
	cr_expect_eq(sum.p50, 2);
	cr_expect_eq(sum.p95, 4);
	cr_expect_eq(sum.p99, 4);
	samples_free(&s);
}

Test(stats, single_value)
{
	struct samples s = { 0 };
	struct summary sum;

	cr_assert_eq(samples_add(&s, 7.5), 0);
	cr_assert_eq(samples_summarize(&s, &sum), 0);
	cr_expect_eq(sum.n, 1);
	cr_expect_eq(sum.min, 7.5);
	cr_expect_eq(sum.mean, 7.5);
	cr_expect_eq(sum.p50, 7.5);
	cr_expect_eq(sum.p95, 7.5);
	cr_expect_eq(sum.p99, 7.5);
	cr_expect_eq(sum.max, 7.5);
	samples_free(&s);
}

Test(stats, empty)
{
	struct samples s = { 0 };
	struct summary sum;

	memset(&sum, 0xff, sizeof(sum));
	cr_assert_eq(samples_summarize(&s, &sum), 0);
	cr_expect_eq(sum.n, 0);
	cr_expect_eq(sum.min, 0);
	cr_expect_eq(sum.mean, 0);
	cr_expect_eq(sum.p50, 0);
	cr_expect_eq(sum.p95, 0);
	cr_expect_eq(sum.p99, 0);
	cr_expect_eq(sum.max, 0);
}

Test(stats, growth)
{
	struct samples s = { 0 };

	for (int i = 0; i < 10000; i++)
		cr_assert_eq(samples_add(&s, i), 0);
	cr_expect_eq(s.n, 10000);
	cr_expect_geq(s.cap, s.n);
	for (int i = 0; i < 10000; i++)
		cr_assert_eq(s.v[i], i, "v[%d] = %g", i, s.v[i]);
	samples_free(&s);
	cr_expect_null(s.v);
	cr_expect_eq(s.n, 0);
	cr_expect_eq(samples_add(&s, 1), 0, "a freed samples is reusable");
	samples_free(&s);
}

Test(stats, not_finite)
{
	struct samples s = { 0 };

	cr_expect_eq(samples_add(&s, NAN), -EINVAL);
	cr_expect_eq(samples_add(&s, INFINITY), -EINVAL);
	cr_expect_eq(s.n, 0);
	cr_expect_eq(report_add_value(report, "g", "n", "ms", NAN, NULL),
		     -EINVAL);
}

Test(report, machine_describe)
{
	struct machine m;

	unsetenv("THAW_EMULATED_HOST");
	machine_describe(&m);
	cr_expect_gt(m.cores, 0);
	cr_expect_gt(m.mem_mib, 0);
	cr_expect_neq(m.kernel[0], '\0');
	cr_expect_neq(m.cpu_model[0], '\0');
	cr_expect_neq(m.hostname[0], '\0');
	cr_expect(strcmp(m.kvm_kind, "PVM") == 0 ||
			  strcmp(m.kvm_kind, "VMX") == 0 ||
			  strcmp(m.kvm_kind, "SVM") == 0 ||
			  strcmp(m.kvm_kind, "KVM") == 0 ||
			  strncmp(m.kvm_kind, "none (", 6) == 0,
		  "kvm_kind \"%s\"", m.kvm_kind);

	setenv("THAW_EMULATED_HOST", "1", 1);
	machine_describe(&m);
	cr_expect_str_eq(m.kvm_kind, EMULATED_HOST_KIND);
}

Test(report, markdown)
{
	char *text = NULL;
	size_t size;
	FILE *out = open_memstream(&text, &size);

	cr_assert_not_null(out);
	fill_report();
	report_print_markdown(report, out);
	cr_assert_eq(fclose(out), 0);

	cr_expect_not_null(
		strstr(text,
		       "Measured on bench-host: 8 cores, 16.0 GiB memory, Test CPU \\| 3 GHz, kernel 6.1.0-test, KVM: VMX; "),
		"%s", text);
	cr_expect_not_null(strstr(text, "### restore\n"), "%s", text);
	cr_expect_not_null(
		strstr(text,
		       "| figure | N | P50 | P95 | P99 | max | unit | note |\n"),
		"%s", text);
	cr_expect_not_null(
		strstr(text,
		       "| warm pool, concurrency 10 | 100 | 50 | 95 | 99 | 100 | ms | clone's first run |\n"),
		"%s", text);
	cr_expect_not_null(
		strstr(text,
		       "| clones in 16 GiB | 1 | 42 | | | | clones |  |\n"),
		"%s", text);
	cr_expect_not_null(
		strstr(text,
		       "| firecracker restore | 0 | | | | |  | not measured: firecracker: not installed \\| PATH searched |\n"),
		"%s", text);
	free(text);
}

Test(report, json)
{
	char dir[128];
	json_t *root, *figure, *summary, *samples, *machine;

	/* Two levels that do not exist yet: mkdir -p. */
	snprintf(dir, sizeof(dir), "%s/run/1", scratch);
	fill_report();
	cr_assert_eq(report_write(report, dir, err, sizeof(err)), 0, "%s", err);
	root = load_json(dir);

	cr_expect_eq(strlen(string(root, "date")),
		     strlen("2024-01-01T00:00:00Z"));
	cr_expect_eq(string(root, "date")[19], 'Z');
	machine = json_object_get(root, "machine");
	cr_expect_eq(number(machine, "cores"), 8);
	cr_expect_eq(number(machine, "mem_mib"), 16384);
	cr_expect_str_eq(string(machine, "kvm_kind"), "VMX");
	cr_expect_str_eq(string(machine, "cpu_model"), "Test CPU | 3 GHz");
	cr_expect_eq(json_array_size(json_object_get(root, "figures")), 3);

	figure = figure_named(root, "warm pool, concurrency 10");
	cr_expect_str_eq(string(figure, "group"), "restore");
	cr_expect_str_eq(string(figure, "unit"), "ms");
	cr_expect_str_eq(string(figure, "note"), "clone's first run");
	cr_expect(json_is_false(json_object_get(figure, "failed")));
	summary = json_object_get(figure, "summary");
	cr_expect_eq(number(summary, "n"), 100);
	cr_expect_eq(number(summary, "min"), 1);
	cr_expect_float_eq(number(summary, "mean"), 50.5, 1e-12);
	cr_expect_eq(number(summary, "p50"), 50);
	cr_expect_eq(number(summary, "p95"), 95);
	cr_expect_eq(number(summary, "p99"), 99);
	cr_expect_eq(number(summary, "max"), 100);
	samples = json_object_get(figure, "samples");
	cr_assert_eq(json_array_size(samples), 100);
	/* As measured, not sorted. */
	cr_expect_eq(json_number_value(json_array_get(samples, 0)), 100);
	cr_expect_eq(json_number_value(json_array_get(samples, 99)), 1);

	figure = figure_named(root, "clones in 16 GiB");
	cr_expect_str_eq(string(figure, "kind"), "value");
	cr_expect(json_is_null(json_object_get(figure, "note")));
	cr_expect_eq(number(json_object_get(figure, "summary"), "p50"), 42);
	cr_expect_eq(json_array_size(json_object_get(figure, "samples")), 1);

	figure = figure_named(root, "firecracker restore");
	cr_expect_str_eq(string(figure, "group"), "peers");
	cr_expect(json_is_true(json_object_get(figure, "failed")));
	cr_expect_str_eq(string(figure, "why"),
			 "firecracker: not installed | PATH\nsearched");
	cr_expect(json_is_null(json_object_get(figure, "summary")));
	cr_expect_eq(json_array_size(json_object_get(figure, "samples")), 0);
	json_decref(root);
}

Test(report, markdown_file)
{
	char *text;

	fill_report();
	cr_assert_eq(report_write(report, scratch, err, sizeof(err)), 0, "%s",
		     err);
	text = read_all(in(scratch, "results.md"));
	cr_expect_not_null(strstr(text, "| figure | N | P50 |"), "%s", text);
	cr_expect_not_null(strstr(text, "| warm pool, concurrency 10 | 100 |"),
			   "%s", text);
	cr_expect_not_null(strstr(text, "| clones in 16 GiB |"), "%s", text);
	cr_expect_not_null(
		strstr(text,
		       "not measured: firecracker: not installed \\| PATH searched"),
		"%s", text);
	free(text);
}

Test(report, plots)
{
	static const unsigned char png_magic[8] = { 0x89, 'P',	'N',  'G',
						    '\r', '\n', 0x1a, '\n' };
	struct samples fast = { 0 }, slow = { 0 };
	unsigned char magic[8];
	char *md, *script;
	json_t *root, *plots;
	FILE *png;

	if (!gnuplot_installed())
		cr_skip_test("gnuplot is not installed");
	/* 0.1 ms to 50 ms: more than a hundredfold, so a log x axis. */
	fill(&fast, 0.1, 1, 0.1);
	fill(&slow, 5, 50, 5);
	cr_assert_eq(report_add_samples(report, "first exec/it's", "fast", "ms",
					&fast, NULL),
		     0);
	cr_assert_eq(report_add_samples(report, "first exec/it's",
					"slow 'quoted' \"name\" {x}_y^z", "ms",
					&slow, NULL),
		     0);
	/* One unit is MiB: the unit goes into the key. */
	cr_assert_eq(
		report_add_samples(report, "memory", "pss", "MiB", &slow, NULL),
		0);
	cr_assert_eq(
		report_add_samples(report, "memory", "rss", "KiB", &fast, NULL),
		0);
	cr_assert_eq(report_write(report, scratch, err, sizeof(err)), 0, "%s",
		     err);

	md = read_all(in(scratch, "results.md"));
	cr_expect_null(strstr(md, "not made"), "%s", md);
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "memory.png" : "first_exec_it_s.png";

		png = fopen(in(scratch, name), "rb");
		cr_assert_not_null(png, "%s: %s", name, strerror(errno));
		cr_assert_eq(fread(magic, 1, sizeof(magic), png), 8);
		fclose(png);
		cr_expect_arr_eq(magic, png_magic, sizeof(magic),
				 "%s is not a PNG", name);
		cr_expect_not_null(strstr(md, name), "%s", md);
	}
	cr_expect(exists(in(scratch, "first_exec_it_s.dat")));
	cr_expect(exists(in(scratch, "plots.gp")));
	cr_expect_not(exists(in(scratch, "gnuplot.log")));
	script = read_all(in(scratch, "plots.gp"));
	cr_expect_not_null(strstr(script, "set logscale x"), "%s", script);
	cr_expect_not_null(strstr(script, "'slow ''quoted'' \"name\" {x}_y^z'"),
			   "%s", script);
	cr_expect_not_null(strstr(script, "' (' . 'KiB' . ')'"), "%s", script);

	root = load_json(scratch);
	plots = json_object_get(root, "plots");
	cr_expect_eq(json_array_size(plots), 2);
	cr_expect_str_eq(string(json_array_get(plots, 0), "file"),
			 "first_exec_it_s.png");
	cr_expect(json_is_null(json_object_get(root, "plots_not_made")));
	json_decref(root);
	free(script);
	free(md);
	samples_free(&fast);
	samples_free(&slow);
}

/* Two groups that make the same file name keep apart. */
Test(report, plot_name_clash)
{
	struct samples s = { 0 };

	fill(&s, 1, 3, 1);
	setenv("PATH", "/nonexistent", 1);
	cr_assert_eq(report_add_samples(report, "a b", "x", "ms", &s, NULL), 0);
	cr_assert_eq(report_add_samples(report, "a_b", "y", "ms", &s, NULL), 0);
	cr_assert_eq(report_write(report, scratch, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect(exists(in(scratch, "a_b.dat")));
	cr_expect(exists(in(scratch, "a_b-1.dat")));
	samples_free(&s);
}

Test(report, without_gnuplot)
{
	char *md;
	json_t *root;

	setenv("PATH", "/nonexistent", 1);
	fill_report();
	cr_assert_eq(report_write(report, scratch, err, sizeof(err)), 0, "%s",
		     err);
	md = read_all(in(scratch, "results.md"));
	cr_expect_not_null(
		strstr(md,
		       "Plots were not made: gnuplot is not installed (not in PATH)."),
		"%s", md);
	cr_expect_not_null(strstr(md, "| warm pool, concurrency 10 | 100 |"),
			   "%s", md);
	cr_expect(exists(in(scratch, "restore.dat")));
	root = load_json(scratch);
	cr_expect_str_eq(string(root, "plots_not_made"),
			 "gnuplot is not installed (not in PATH)");
	cr_expect_eq(json_array_size(json_object_get(root, "plots")), 0);
	json_decref(root);
	free(md);
}

Test(report, gnuplot_fails)
{
	char bin[128], *md;
	FILE *fake;

	snprintf(bin, sizeof(bin), "%s/bin", scratch);
	cr_assert_eq(mkdir(bin, 0755), 0);
	fake = fopen(in(bin, "gnuplot"), "w");
	cr_assert_not_null(fake);
	fputs("#!/bin/sh\necho 'line 1: no such terminal' >&2\nexit 3\n", fake);
	cr_assert_eq(fclose(fake), 0);
	cr_assert_eq(chmod(in(bin, "gnuplot"), 0755), 0);
	setenv("PATH", bin, 1);

	fill_report();
	cr_assert_eq(report_write(report, scratch, err, sizeof(err)), 0, "%s",
		     err);
	md = read_all(in(scratch, "results.md"));
	cr_expect_not_null(
		strstr(md,
		       "Plots were not made: gnuplot failed (exit status 3): line 1: no such terminal; see gnuplot.log."),
		"%s", md);
	cr_expect(exists(in(scratch, "gnuplot.log")));
	free(md);
}

/* No samples anywhere: no plots, and no word about them. */
Test(report, nothing_to_plot)
{
	char *md;

	cr_assert_eq(report_add_value(report, "density", "clones", "clones", 3,
				      NULL),
		     0);
	cr_assert_eq(report_write(report, scratch, err, sizeof(err)), 0, "%s",
		     err);
	md = read_all(in(scratch, "results.md"));
	cr_expect_null(strstr(md, "Plots"), "%s", md);
	cr_expect_not(exists(in(scratch, "plots.gp")));
	free(md);
}

Test(report, unwritable)
{
	char file[128], dir[160];
	FILE *f;

	snprintf(file, sizeof(file), "%s/regular", scratch);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	snprintf(dir, sizeof(dir), "%s/sub/deeper", file);
	fill_report();
	cr_expect_eq(report_write(report, dir, err, sizeof(err)), -1);
	cr_expect_not_null(strstr(err, dir), "%s", err);
	cr_expect_not_null(strstr(err, "Not a directory"), "%s", err);
	cr_expect_not(exists(in(scratch, "results.json")));
}
