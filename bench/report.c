// SPDX-License-Identifier: Apache-2.0
/*
 * report.c - see report.h.
 *
 * A report is a growing array of figures, each owning copies of its
 * strings and of its samples (in the order they were measured: results.json
 * keeps that order, so a drift over a run stays visible); the summary is
 * computed when the figure is added, so printing allocates nothing.
 *
 * The machine the run was taken on is described by machine.c and the
 * plots are drawn by plots.c; report_internal.h is what the three share.
 */
#include "bench/report.h"
#include "bench/report_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

/* @src into @dst of @size, cut to fit. */
void copy_text(char *dst, size_t size, const char *src)
{
	size_t len = strnlen(src, size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

struct report *report_new(void)
{
	struct report *r = calloc(1, sizeof(*r));

	if (r)
		r->date = time(NULL);
	return r;
}

static void figure_free(struct figure *f)
{
	free(f->group);
	free(f->name);
	free(f->unit);
	free(f->note);
	free(f->why);
	free(f->values);
}

void report_free(struct report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		figure_free(&r->figures[i]);
	free(r->figures);
	free(r);
}

void report_set_machine(struct report *r, const struct machine *m)
{
	r->machine = *m;
	r->has_machine = true;
}

/* *@out = a copy of @s, or NULL for NULL; false on ENOMEM. */
static bool copy_string(char **out, const char *s)
{
	*out = s ? strdup(s) : NULL;
	return !s || *out;
}

static int figure_init(struct figure *f, enum figure_kind kind,
		       const char *group, const char *name, const char *unit,
		       const char *note, const char *why)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	if (copy_string(&f->group, group) && copy_string(&f->name, name) &&
	    copy_string(&f->unit, unit) && copy_string(&f->note, note) &&
	    copy_string(&f->why, why))
		return 0;
	figure_free(f);
	return -ENOMEM;
}

/* Moves @f into @r; on -ENOMEM @f is the caller's to free. */
static int push_figure(struct report *r, const struct figure *f)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct figure *grown =
			realloc(r->figures, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		r->figures = grown;
		r->cap = cap;
	}
	r->figures[r->n++] = *f;
	return 0;
}

/* Adds a figure holding @values (@s->n of them) and their summary. */
static int add_measured(struct report *r, enum figure_kind kind,
			const char *group, const char *name, const char *unit,
			const struct samples *s, const char *note)
{
	struct figure f;
	int e = figure_init(&f, kind, group, name, unit, note, NULL);

	if (e)
		return e;
	e = samples_summarize(s, &f.summary);
	if (!e && s->n) {
		f.values = malloc(s->n * sizeof(*f.values));
		if (f.values)
			memcpy(f.values, s->v, s->n * sizeof(*f.values));
		else
			e = -ENOMEM;
	}
	if (!e)
		e = push_figure(r, &f);
	if (e)
		figure_free(&f);
	return e;
}

int report_add_samples(struct report *r, const char *group, const char *name,
		       const char *unit, const struct samples *s,
		       const char *note)
{
	return add_measured(r, FIGURE_SAMPLES, group, name, unit, s, note);
}

int report_add_value(struct report *r, const char *group, const char *name,
		     const char *unit, double value, const char *note)
{
	struct samples one = { .v = &value, .n = 1, .cap = 1 };

	if (!isfinite(value))
		return -EINVAL;
	return add_measured(r, FIGURE_VALUE, group, name, unit, &one, note);
}

int report_add_failure(struct report *r, const char *group, const char *name,
		       const char *why)
{
	struct figure f;
	int e = figure_init(&f, FIGURE_FAILED, group, name, NULL, NULL, why);

	if (e)
		return e;
	e = push_figure(r, &f);
	if (e)
		figure_free(&f);
	return e;
}

/* Whether figure @i is the first of its group. */
bool first_of_group(const struct report *r, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (strcmp(r->figures[k].group, r->figures[i].group) == 0)
			return false;
	return true;
}

/*
 * Three significant digits, without the exponent %g would give the values
 * benchmarks have (1234.5 ms is "1235", not "1.23e+03"); whole numbers
 * whole.  The thresholds are where rounding moves to the next decade, so
 * 9.996 is "10.0", not "10.00".
 */
static void format_number(double v, char *buf, size_t size)
{
	double a = fabs(v);

	if (v == rint(v) && a < 1e15)
		snprintf(buf, size, "%.0f", v);
	else if (a >= 99.95)
		snprintf(buf, size, "%.0f", v);
	else if (a >= 9.995)
		snprintf(buf, size, "%.1f", v);
	else if (a >= 0.9995)
		snprintf(buf, size, "%.2f", v);
	else
		snprintf(buf, size, "%.3g", v);
}

/* @s in a table cell: '|' escaped, line breaks and tabs as spaces. */
static void print_cell_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", out);
		else if (iscntrl((unsigned char)*s))
			putc(' ', out);
		else
			putc(*s, out);
	}
}

static void print_number_cell(FILE *out, double v)
{
	char buf[64];

	format_number(v, buf, sizeof(buf));
	fprintf(out, " %s |", buf);
}

static void print_row(FILE *out, const struct figure *f)
{
	const struct summary *s = &f->summary;

	fputs("| ", out);
	print_cell_text(out, f->name);
	fprintf(out, " | %zu |", s->n);
	if (f->kind == FIGURE_SAMPLES && s->n > 0) {
		print_number_cell(out, s->p50);
		print_number_cell(out, s->p95);
		print_number_cell(out, s->p99);
		print_number_cell(out, s->max);
	} else if (f->kind == FIGURE_VALUE) {
		print_number_cell(out, s->p50);
		fputs(" | | |", out);
	} else {
		fputs(" | | | |", out);
	}
	putc(' ', out);
	if (f->unit)
		print_cell_text(out, f->unit);
	fputs(" | ", out);
	if (f->kind == FIGURE_FAILED) {
		fputs("not measured: ", out);
		print_cell_text(out, f->why);
	} else if (f->kind == FIGURE_SAMPLES && s->n == 0) {
		fputs("no samples", out);
		if (f->note)
			fputs("; ", out);
	}
	if (f->note)
		print_cell_text(out, f->note);
	fputs(" |\n", out);
}

static void format_date(time_t t, char *buf, size_t size)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void report_print_markdown(const struct report *r, FILE *out)
{
	const struct machine *m = &r->machine;
	char date[32];

	format_date(r->date, date, sizeof(date));
	if (r->has_machine) {
		fputs("Measured on ", out);
		print_cell_text(out, m->hostname);
		fprintf(out, ": %d cores, %.1f GiB memory, ", m->cores,
			(double)m->mem_mib / 1024);
		print_cell_text(out, m->cpu_model);
		fputs(", kernel ", out);
		print_cell_text(out, m->kernel);
		fputs(", KVM: ", out);
		print_cell_text(out, m->kvm_kind);
		if (m->build[0]) {
			fputs(", build: ", out);
			print_cell_text(out, m->build);
		}
		fprintf(out, "; %s.\n", date);
	} else {
		fprintf(out, "Measured on a machine not described; %s.\n",
			date);
	}
	for (size_t i = 0; i < r->n; i++) {
		if (!first_of_group(r, i))
			continue;
		fputs("\n### ", out);
		print_cell_text(out, r->figures[i].group);
		fputs("\n\n| figure | N | P50 | P95 | P99 | max | unit | note |\n"
		      "|---|--:|--:|--:|--:|--:|---|---|\n",
		      out);
		for (size_t k = i; k < r->n; k++)
			if (strcmp(r->figures[k].group, r->figures[i].group) ==
			    0)
				print_row(out, &r->figures[k]);
	}
}

/* @dir/@name into @path (PATH_MAX); false when it does not fit. */
bool join_path(char *path, const char *dir, const char *name)
{
	int n = snprintf(path, PATH_MAX, "%s/%s", dir, name);

	return n >= 0 && n < PATH_MAX;
}

/* mkdir -p @dir. */
static int make_dirs(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(path)) {
		snprintf(err, errlen,
			 "report: directory \"%.80s\" is empty or too long",
			 dir);
		return -1;
	}
	memcpy(path, dir, len + 1);
	for (char *p = path + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST) {
			snprintf(err, errlen,
				 "report: cannot create directory %s%s%s%s: %s",
				 path, c ? " (for " : "", c ? dir : "",
				 c ? ")" : "", strerror(errno));
			return -1;
		}
		*p = c;
		if (!c)
			return 0;
	}
}

/* Opens @dir/@name for writing, its path in @path (PATH_MAX). */
FILE *create_file(const char *dir, const char *name, char *path, char *err,
		  size_t errlen)
{
	FILE *f;

	if (!join_path(path, dir, name)) {
		snprintf(err, errlen, "report: path %s/%s is too long", dir,
			 name);
		return NULL;
	}
	f = fopen(path, "we");
	if (!f)
		snprintf(err, errlen, "report: cannot create %s: %s", path,
			 strerror(errno));
	return f;
}

/* Closes @f, written as @path; -1 when any write to it failed. */
int close_file(FILE *f, const char *path, char *err, size_t errlen)
{
	bool failed = ferror(f);

	if (fclose(f) != 0 || failed) {
		snprintf(err, errlen, "report: cannot write %s: %s", path,
			 strerror(errno));
		return -1;
	}
	return 0;
}

static int write_markdown(const struct report *r, const char *dir,
			  const struct plots *plots, char *err, size_t errlen)
{
	char path[PATH_MAX], name[PLOT_NAME_MAX + 24];
	FILE *f = create_file(dir, "results.md", path, err, errlen);

	if (!f)
		return -1;
	report_print_markdown(r, f);
	if (plots->wanted && !plots->made)
		fprintf(f, "\nPlots were not made: %s.\n", plots->why_not);
	if (plots->made) {
		fputs("\n## Plots\n", f);
		for (size_t i = 0; i < r->n; i++) {
			if (!first_of_group(r, i) || !group_has_samples(r, i))
				continue;
			plot_name(r, i, name);
			fprintf(f, "\n![%s](%s.png)\n", name, name);
		}
	}
	return close_file(f, path, err, errlen);
}

static json_t *summary_json(const struct summary *s)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "n",
			 (json_int_t)s->n, "min", s->min, "mean", s->mean,
			 "p50", s->p50, "p95", s->p95, "p99", s->p99, "max",
			 s->max);
}

static json_t *samples_json(const struct figure *f)
{
	json_t *array = json_array();

	for (size_t i = 0; array && i < f->summary.n; i++)
		if (json_array_append_new(array, json_real(f->values[i]))) {
			json_decref(array);
			return NULL;
		}
	return array;
}

static json_t *figure_json(const struct figure *f)
{
	static const char *const kind_name[] = {
		[FIGURE_SAMPLES] = "samples",
		[FIGURE_VALUE] = "value",
		[FIGURE_FAILED] = "failed",
	};
	bool failed = f->kind == FIGURE_FAILED;

	return json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:b, s:s?, s:o?, s:o}",
			 "group", f->group, "name", f->name, "kind",
			 kind_name[f->kind], "unit", f->unit, "note", f->note,
			 "failed", failed, "why", f->why, "summary",
			 failed ? json_null() : summary_json(&f->summary),
			 "samples", samples_json(f));
}

static json_t *plots_json(const struct report *r, const struct plots *plots)
{
	char name[PLOT_NAME_MAX + 24], file[PLOT_NAME_MAX + 32];
	json_t *array = json_array();

	for (size_t i = 0; plots->made && array && i < r->n; i++) {
		if (!first_of_group(r, i) || !group_has_samples(r, i))
			continue;
		plot_name(r, i, name);
		snprintf(file, sizeof(file), "%s.png", name);
		if (json_array_append_new(array,
					  json_pack("{s:s, s:s}", "group",
						    r->figures[i].group, "file",
						    file))) {
			json_decref(array);
			return NULL;
		}
	}
	return array;
}

static json_t *report_json(const struct report *r, const struct plots *plots)
{
	const struct machine *m = &r->machine;
	json_t *figures = json_array(), *machine = NULL;
	char date[32];

	format_date(r->date, date, sizeof(date));
	for (size_t i = 0; figures && i < r->n; i++)
		if (json_array_append_new(figures,
					  figure_json(&r->figures[i]))) {
			json_decref(figures);
			return NULL;
		}
	if (r->has_machine)
		machine = json_pack("{s:i, s:I, s:s, s:s, s:s, s:s, s:s}",
				    "cores", m->cores, "mem_mib",
				    (json_int_t)m->mem_mib, "cpu_model",
				    m->cpu_model, "kernel", m->kernel,
				    "kvm_kind", m->kvm_kind, "hostname",
				    m->hostname, "build", m->build);
	return json_pack("{s:s, s:o?, s:o, s:s?, s:o}", "date", date, "machine",
			 machine, "plots", plots_json(r, plots),
			 "plots_not_made",
			 plots->wanted && !plots->made ? plots->why_not : NULL,
			 "figures", figures);
}

static int write_json(const struct report *r, const char *dir,
		      const struct plots *plots, char *err, size_t errlen)
{
	json_t *root = report_json(r, plots);
	char *text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
	char path[PATH_MAX];
	FILE *f;

	json_decref(root);
	if (!text) {
		snprintf(err, errlen, "report: %s/results.json: out of memory",
			 dir);
		return -1;
	}
	f = create_file(dir, "results.json", path, err, errlen);
	if (f) {
		fputs(text, f);
		putc('\n', f);
	}
	free(text);
	return f ? close_file(f, path, err, errlen) : -1;
}

int report_write(const struct report *r, const char *dir, char *err,
		 size_t errlen)
{
	struct plots plots;

	if (make_dirs(dir, err, errlen) ||
	    make_plots(r, dir, &plots, err, errlen) ||
	    write_markdown(r, dir, &plots, err, errlen) ||
	    write_json(r, dir, &plots, err, errlen))
		return -1;
	return 0;
}
