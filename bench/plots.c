// SPDX-License-Identifier: Apache-2.0
/*
 * plots.c - the PNG plots of a report: a data file per group, the gnuplot
 * script plots.gp, and gnuplot run on it (see report_write() in report.h).
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
#include "bench/report.h"
#include "bench/report_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GNUPLOT_SCRIPT "plots.gp"
#define GNUPLOT_LOG "gnuplot.log"
/* A group whose values span more than this gets a logarithmic x axis. */
#define LOG_SCALE_SPAN 100.0

static bool plotted(const struct figure *f)
{
	return f->kind == FIGURE_SAMPLES && f->summary.n > 0;
}

/* Whether the group of figure @i has a figure to plot. */
bool group_has_samples(const struct report *r, size_t i)
{
	for (size_t k = i; k < r->n; k++)
		if (plotted(&r->figures[k]) &&
		    strcmp(r->figures[k].group, r->figures[i].group) == 0)
			return true;
	return false;
}

/*
 * The file name, without extension, of the plot of the group of figure
 * @i: the group with other characters than [A-Za-z0-9_-] as '_', and the
 * index of @i appended should an earlier group come out the same.
 */
void plot_name(const struct report *r, size_t i, char *out)
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
int make_plots(const struct report *r, const char *dir, struct plots *plots,
	       char *err, size_t errlen)
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
