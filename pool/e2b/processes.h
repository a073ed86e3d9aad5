/* SPDX-License-Identifier: Apache-2.0 */
/*
 * processes.h - the processes started through envd (processes.c), for
 * process.c and the server's start and stop.
 */
#ifndef THAW_POOL_E2B_PROCESSES_H
#define THAW_POOL_E2B_PROCESSES_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "pool/host/agent_client.h"
#include "pool/e2b/e2b_internal.h"

struct e2b_processes;
struct e2b_process;

/* At most this many processes of one sandbox at once, and
 * cfg.e2b_max_processes of the daemon's (resource_exhausted past
 * either). */
#define E2B_MAX_PROCESSES 64

struct e2b_processes *processes_new(struct daemon *d);
/* Waits for every process's reader to let go of its sandbox (the daemon's
 * stop flag ends their waits), then frees them all.  NULL is a no-op. */
void processes_free(struct e2b_processes *ps);

/*
 * Starts @req in held sandbox @c as a process of its table, remembered
 * with @config (a ProcessConfig, for List; a reference is taken) and @tag
 * (NULL: none), once the agent said it runs (a hang-up of @client_fd, -1
 * for none, gives up before that).  Returns 0 with *@events, a stream
 * source of its ProcessEvents from the start event on (e2b_stream_ops:
 * process_stream_ops); or a Connect code with a message in @err.
 */
enum e2b_code processes_start(struct e2b_processes *ps, struct sandbox *c,
			      const struct agent_exec_request *req,
			      json_t *config, const char *tag, int client_fd,
			      void **events, char *err, size_t errlen);

/*
 * A running process of sandbox @c, by @pid, or by @tag when @tag is not
 * NULL; held (processes_put) until the caller is done with it.  NULL when
 * there is none, or it ended.
 */
struct e2b_process *processes_find(struct e2b_processes *ps,
				   const struct sandbox *c, uint32_t pid,
				   const char *tag);
void processes_put(struct e2b_processes *ps, struct e2b_process *p);

/* A stream source of @p's events from now on, its start event first (a
 * Connect); NULL when out of memory. */
void *processes_attach(struct e2b_processes *ps, struct e2b_process *p);

/* The stream of a process's events, a source of processes_start() or
 * processes_attach(). */
extern const struct e2b_stream_ops process_stream_ops;

/* The ProcessInfo of each running process of @c: {config, pid, tag}. */
json_t *processes_list(struct e2b_processes *ps, const struct sandbox *c);

/* Sends @signal to @p's process group; 0 or a Connect code with a
 * message in @err (not_found once it ended). */
enum e2b_code processes_signal(struct e2b_process *p, uint32_t signal,
			       char *err, size_t errlen);

/* Writes @len bytes to @p's stdin (it was started with stdin kept open),
 * then closes it if @close; returns once the guest took them: 0 or a
 * Connect code with a message in @err. */
enum e2b_code processes_stdin(struct e2b_process *p, const void *data,
			      size_t len, bool close, char *err, size_t errlen);

#endif
