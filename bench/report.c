// SPDX-License-Identifier: Apache-2.0
/*
 * report.c - see report.h.
 *
 * A report is a growing array of figures, each owning copies of its
 * strings and of its samples (in the order they were measured: results.json
 * keeps that order, so a drift over a run stays visible); the summary is
 * computed when the figure is added, so printing allocates nothing.
 *
 * Plots are cumulative distributions, one line per figure of a group: a
 * CDF shows the whole distribution, its tail and any second mode, which
 * bars of p50/p95/p99 hide, and figures of one group (a warm pool at
 * several concurrencies, thaw and its peers) compare at a glance.  When a
 * group's values span more than a hundredfold the x axis is logarithmic,
 * or the fast figures would be a vertical line at zero.
 *
 * gnuplot runs once per report on a script, plots.gp, written next to the
 * data files and run from inside the directory: the script names its files
 * by relative name only, so no path ever needs quoting, and someone can
 * edit it and redraw.  The script picks pngcairo when gnuplot has it
 * (GPVAL_TERMINALS) and falls back to the libgd png terminal, which asks
 * nothing of us beforehand.  Names reach gnuplot only as single-quoted
 * strings (no escapes inside them but '') with enhanced text off, so no
 * name can be taken for markup or end its string.  A missing or failing
 * gnuplot only costs the plots: the numbers are already measured.
 */
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define GNUPLOT_SCRIPT "plots.gp"
#define GNUPLOT_LOG "gnuplot.log"
#define PLOT_NAME_MAX 64 /* of a group's file name, without extension */
/* A group whose values span more than this gets a logarithmic x axis. */
#define LOG_SCALE_SPAN 100.0
#define EMULATED_HOST_KIND "SVM, nested in a QEMU-TCG-emulated host"

enum figure_kind { FIGURE_SAMPLES, FIGURE_VALUE, FIGURE_FAILED };

struct figure {
	enum figure_kind kind;
	char *group, *name;
	char *unit;	/* NULL for a failure */
	char *note;	/* NULL when none */
	char *why;	/* a failure's reason, else NULL */
	double *values; /* summary.n of them, as measured */
	struct summary summary;
};

struct report {
	bool has_machine;
	struct machine machine;
	time_t date;
	struct figure *figures;
	size_t n, cap;
};

/* What became of the plots, for results.md and results.json. */
struct plots {
	bool wanted; /* some group has samples */
	bool made;
	char why_not[512];
};

/* @src into @dst of @size, cut to fit. */
static void copy_text(char *dst, size_t size, const char *src)
{
	size_t len = strnlen(src, size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* The value of "@key<blanks>: value" line @line, newline cut; else NULL. */
static char *cpuinfo_value(char *line, const char *key)
{
	size_t klen = strlen(key);
	char *p = line + klen;

	if (strncmp(line, key, klen) != 0)
		return NULL;
	p += strspn(p, " \t");
	if (*p != ':')
		return NULL;
	p += strspn(p + 1, " \t") + 1;
	p[strcspn(p, "\n")] = '\0';
	return p;
}

/* Whether space-separated @list has @word. */
static bool has_word(const char *list, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += len)
		if ((p == list || p[-1] == ' ') &&
		    (p[len] == '\0' || p[len] == ' '))
			return true;
	return false;
}

/* The first CPU's model name and whether it has the vmx or svm flag. */
static void read_cpuinfo(struct machine *m, bool *vmx, bool *svm)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	bool have_model = false, have_flags = false;
	char *line = NULL, *value;
	size_t size = 0;

	*vmx = *svm = false;
	if (!f)
		return;
	while ((!have_model || !have_flags) && getline(&line, &size, f) > 0) {
		if (!have_model &&
		    (value = cpuinfo_value(line, "model name"))) {
			copy_text(m->cpu_model, sizeof(m->cpu_model), value);
			have_model = true;
		} else if (!have_flags &&
			   (value = cpuinfo_value(line, "flags"))) {
			*vmx = has_word(value, "vmx");
			*svm = has_word(value, "svm");
			have_flags = true;
		}
	}
	free(line);
	fclose(f);
}

static unsigned long long read_mem_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kib = 0;
	char line[256];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return kib / 1024;
}

static void describe_kvm(struct machine *m, bool vmx, bool svm)
{
	int fd;

	if (getenv("THAW_EMULATED_HOST")) {
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), EMULATED_HOST_KIND);
		return;
	}
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			copy_text(m->kvm_kind, sizeof(m->kvm_kind),
				  "none (no /dev/kvm)");
		else
			snprintf(m->kvm_kind, sizeof(m->kvm_kind),
				 "none (/dev/kvm: %s)", strerror(errno));
		return;
	}
	close(fd);
	if (access("/sys/module/kvm_pvm", F_OK) == 0)
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "PVM");
	else if (vmx)
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "VMX");
	else if (svm)
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "SVM");
	else
		copy_text(m->kvm_kind, sizeof(m->kvm_kind), "KVM");
}

void machine_describe(struct machine *m)
{
	struct utsname uts;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	bool vmx, svm;

	memset(m, 0, sizeof(*m));
	m->cores = cores > 0 ? (int)cores : 0;
	m->mem_mib = read_mem_mib();
	copy_text(m->cpu_model, sizeof(m->cpu_model), "unknown");
	read_cpuinfo(m, &vmx, &svm);
	copy_text(m->kernel, sizeof(m->kernel),
		  uname(&uts) == 0 ? uts.release : "unknown");
	describe_kvm(m, vmx, svm);
	if (gethostname(m->hostname, sizeof(m->hostname)) != 0)
		copy_text(m->hostname, sizeof(m->hostname), "unknown");
	m->hostname[sizeof(m->hostname) - 1] = '\0';
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
static bool first_of_group(const struct report *r, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (strcmp(r->figures[k].group, r->figures[i].group) == 0)
			return false;
	return true;
}

static bool plotted(const struct figure *f)
{
	return f->kind == FIGURE_SAMPLES && f->summary.n > 0;
}

/* Whether the group of figure @i has a figure to plot. */
static bool group_has_samples(const struct report *r, size_t i)
{
	for (size_t k = i; k < r->n; k++)
		if (plotted(&r->figures[k]) &&
		    strcmp(r->figures[k].group, r->figures[i].group) == 0)
			return true;
	return false;
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
static bool join_path(char *path, const char *dir, const char *name)
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
static FILE *create_file(const char *dir, const char *name, char *path,
			 char *err, size_t errlen)
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
static int close_file(FILE *f, const char *path, char *err, size_t errlen)
{
	bool failed = ferror(f);

	if (fclose(f) != 0 || failed) {
		snprintf(err, errlen, "report: cannot write %s: %s", path,
			 strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The file name, without extension, of the plot of the group of figure
 * @i: the group with other characters than [A-Za-z0-9_-] as '_', and the
 * index of @i appended should an earlier group come out the same.
 */
static void plot_name(const struct report *r, size_t i, char *out)
{
	char earlier[PLOT_NAME_MAX + 24];
	size_t len = 0;

	for (const char *g = r->figures[i].group; *g && len < PLOT_NAME_MAX - 1;
	     g++, len++)
		out[len] = isalnum((unsigned char)*g) || *g == '_' || *g == '-'
				   ? *g
				   : '_';
	if (len == 0)
		copy_text(out, PLOT_NAME_MAX, "group");
	else
		out[len] = '\0';
	for (size_t k = 0; k < i; k++) {
		if (!first_of_group(r, k))
			continue;
		plot_name(r, k, earlier);
		if (strcmp(earlier, out) == 0) {
			snprintf(out + strlen(out), 24, "-%zu", i);
			return;
		}
	}
}

/* @s as a gnuplot single-quoted string. */
static void print_gnuplot_string(FILE *out, const char *s)
{
	putc('\'', out);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("''", out);
		else if (iscntrl((unsigned char)*s))
			putc(' ', out);
		else
			putc(*s, out);
	}
	putc('\'', out);
}

/* Figure @f's CDF as one data block of @out: value, fraction <= value. */
static int write_cdf_block(FILE *out, const struct figure *f)
{
	size_t n = f->summary.n;
	double *sorted = sorted_copy(f->values, n);

	if (!sorted)
		return -ENOMEM;
	fputs("# ", out);
	for (const char *c = f->name; *c; c++)
		putc(iscntrl((unsigned char)*c) ? ' ' : *c, out);
	fprintf(out,
		" (%zu samples, %s): value, fraction of samples <= value\n", n,
		f->unit);
	/* From 0, so a single sample still draws a step. */
	fprintf(out, "%.9g 0\n", sorted[0]);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%.9g %.9g\n", sorted[i],
			(double)(i + 1) / (double)n);
	fputs("\n\n", out);
	free(sorted);
	return 0;
}

static const char plot_preamble[] =
	"# thaw-bench plots: one CDF per figure, one PNG per group.\n"
	"# Run from this directory: gnuplot " GNUPLOT_SCRIPT "\n"
	"if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
	"\tset terminal pngcairo size 1000,600 noenhanced\n"
	"} else {\n"
	"\tset terminal png size 1000,600 noenhanced\n"
	"}\n"
	"set ylabel 'fraction of samples <= x'\n"
	"set yrange [0:1.05]\n"
	"set ytics 0,0.1,1\n"
	"set grid\n"
	"set key below\n"
	"set arrow from graph 0, first 0.5 to graph 1, first 0.5 nohead dt 3\n"
	"set arrow from graph 0, first 0.95 to graph 1, first 0.95 nohead dt 3\n"
	"set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 3\n";

/*
 * Writes @name.dat for the group of figure @i and the commands that plot
 * it into @script.
 */
static int write_group_plot(const struct report *r, size_t i, const char *dir,
			    const char *name, FILE *script, char *err,
			    size_t errlen)
{
	const char *group = r->figures[i].group, *unit = NULL;
	double min = INFINITY, max = -INFINITY;
	bool mixed_units = false;
	char file[PLOT_NAME_MAX + 32], path[PATH_MAX];
	size_t block = 0;
	FILE *data;

	snprintf(file, sizeof(file), "%s.dat", name);
	data = create_file(dir, file, path, err, errlen);
	if (!data)
		return -1;
	for (size_t k = i; k < r->n; k++) {
		const struct figure *f = &r->figures[k];

		if (!plotted(f) || strcmp(f->group, group) != 0)
			continue;
		if (write_cdf_block(data, f)) {
			fclose(data);
			snprintf(err, errlen, "report: %s: out of memory",
				 path);
			return -1;
		}
		if (unit && strcmp(unit, f->unit) != 0)
			mixed_units = true;
		unit = f->unit;
		min = fmin(min, f->summary.min);
		max = fmax(max, f->summary.max);
	}
	if (close_file(data, path, err, errlen))
		return -1;

	fprintf(script, "\nset output '%s.png'\nset title ", name);
	print_gnuplot_string(script, group);
	fputs("\nset xlabel ", script);
	print_gnuplot_string(script,
			     mixed_units ? "value (unit in the key)" : unit);
	if (min > 0 && max / min > LOG_SCALE_SPAN)
		fputs("\nset logscale x\n", script);
	else
		fputs("\nunset logscale x\n", script);
	for (size_t k = i; k < r->n; k++) {
		const struct figure *f = &r->figures[k];

		if (!plotted(f) || strcmp(f->group, group) != 0)
			continue;
		fprintf(script, "%s '%s' index %zu with steps lw 2 title ",
			block ? ", \\\n\t" : "plot", file, block);
		print_gnuplot_string(script, f->name);
		if (mixed_units) {
			fputs(".' (' . ", script);
			print_gnuplot_string(script, f->unit);
			fputs(" . ')'", script);
		}
		block++;
	}
	fputs("\n", script);
	return 0;
}

/* The last non-empty line of @path, for a message; "" when none. */
static void last_line(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "re");
	char line[512];

	out[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[strspn(line, " \t")])
			copy_text(out, size, line);
	}
	fclose(f);
}

/*
 * Runs gnuplot on the script in @dir, its output going to gnuplot.log
 * there, removed when it succeeds.  Fills @plots.
 */
static void run_gnuplot(const char *dir, struct plots *plots)
{
	char *const argv[] = { "gnuplot", GNUPLOT_SCRIPT, NULL };
	char log[PATH_MAX], message[256];
	posix_spawn_file_actions_t actions;
	pid_t pid;
	int e, status;

	if (!join_path(log, dir, GNUPLOT_LOG)) {
		snprintf(plots->why_not, sizeof(plots->why_not),
			 "path %s/%s is too long", dir, GNUPLOT_LOG);
		return;
	}
	e = posix_spawn_file_actions_init(&actions);
	if (!e)
		e = posix_spawn_file_actions_addchdir_np(&actions, dir);
	if (!e)
		e = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO,
						     "/dev/null", O_RDONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_addopen(
			&actions, STDOUT_FILENO, GNUPLOT_LOG,
			O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!e)
		e = posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO,
						     STDERR_FILENO);
	if (!e)
		e = posix_spawnp(&pid, "gnuplot", &actions, NULL, argv,
				 environ);
	posix_spawn_file_actions_destroy(&actions);
	if (e == ENOENT) {
		copy_text(plots->why_not, sizeof(plots->why_not),
			  "gnuplot is not installed (not in PATH)");
		return;
	}
	if (e) {
		snprintf(plots->why_not, sizeof(plots->why_not),
			 "cannot run gnuplot: %s", strerror(e));
		return;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			snprintf(plots->why_not, sizeof(plots->why_not),
				 "cannot wait for gnuplot: %s",
				 strerror(errno));
			return;
		}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		unlink(log);
		plots->made = true;
		return;
	}
	last_line(log, message, sizeof(message));
	if (WIFEXITED(status))
		snprintf(
			plots->why_not, sizeof(plots->why_not),
			"gnuplot failed (exit status %d): %s; see " GNUPLOT_LOG,
			WEXITSTATUS(status), message);
	else
		snprintf(plots->why_not, sizeof(plots->why_not),
			 "gnuplot was killed by signal %d; see " GNUPLOT_LOG,
			 WTERMSIG(status));
}

/* The data files and script of every group with samples, then gnuplot. */
static int make_plots(const struct report *r, const char *dir,
		      struct plots *plots, char *err, size_t errlen)
{
	char name[PLOT_NAME_MAX + 24], path[PATH_MAX];
	FILE *script;

	memset(plots, 0, sizeof(*plots));
	for (size_t i = 0; i < r->n; i++)
		if (plotted(&r->figures[i]))
			plots->wanted = true;
	if (!plots->wanted)
		return 0;
	script = create_file(dir, GNUPLOT_SCRIPT, path, err, errlen);
	if (!script)
		return -1;
	fputs(plot_preamble, script);
	for (size_t i = 0; i < r->n; i++) {
		if (!first_of_group(r, i) || !group_has_samples(r, i))
			continue;
		plot_name(r, i, name);
		if (write_group_plot(r, i, dir, name, script, err, errlen)) {
			fclose(script);
			return -1;
		}
	}
	if (close_file(script, path, err, errlen))
		return -1;
	run_gnuplot(dir, plots);
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
