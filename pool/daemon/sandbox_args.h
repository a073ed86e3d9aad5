/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox_args.h - the request fields both front ends read alike, as the
 * service core (sandbox_ops.h) takes them: known fields, bounded whole
 * numbers, a sandbox's env and network policy, a command, times.  Pure:
 * no daemon state, for the fuzz harnesses too.
 *
 * A bad field is the request's fault whichever front end got it, so these
 * answer with the HTTP status that fault takes (400; 413 for an env past
 * a sandbox's limits; 500 out of memory), the same on both APIs, and a
 * message naming the field and value in @err.
 */
#ifndef THAW_POOL_DAEMON_SANDBOX_ARGS_H
#define THAW_POOL_DAEMON_SANDBOX_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "bpf/policy.h"
#include "pool/host/agent_client.h"

/* Checks @body's fields against @allowed (NULL-terminated). */
bool args_known_fields(json_t *body, const char *const allowed[], char *err,
		       size_t errlen);
/* @field as a whole number in [min, max]; absent: @def. */
bool args_get_uint(json_t *body, const char *field, uint32_t min, uint32_t max,
		   uint32_t def, uint32_t *out, char *err, size_t errlen);
/* Frees a NULL-terminated list of strings (a sandbox's env, an argv);
 * NULL is a no-op. */
void env_free(char **env);
/* Appends KEY=VALUE entries of object @env to @v (grown); false on error. */
bool args_add_env(char ***v, size_t *n, json_t *env, char *err, size_t errlen);
/* Whether @env's entries fit a sandbox's limits (a 413 when not, with a
 * message in @err). */
bool args_env_fits(char *const *env, size_t n, char *err, size_t errlen);

/*
 * A "network" object (thaw's POST /sandboxes' field, POST
 * /sandboxes/ID/network's body; what E2B's fields translate to) into
 * @out, what it leaves out from @defaults (the template's); 0, or 400
 * with a message in @err naming the field and, for a bad CIDR, its text
 * (net_cidr_parse).
 */
int args_parse_network(json_t *net, const struct net_policy *defaults,
		       struct net_policy *out, char *err, size_t errlen);

/*
 * Builds EXEC from @body (thaw's exec object: argv or cmd, env, cwd,
 * stdin, timeout_s, stream) for a sandbox of env @sandbox_env (its
 * create's, NULL for none: it comes first); 0, or an HTTP status and a
 * message in @err.  *@argv_out, *@env_out and *@stdin_out are set as they
 * are allocated, also on error: the caller frees them (env_free, free).
 */
int args_parse_exec(json_t *body, char *const *sandbox_env,
		    struct agent_exec_request *req, char ***argv_out,
		    char ***env_out, void **stdin_out, bool *stream, char *err,
		    size_t errlen);

/* @ms (CLOCK_REALTIME) as RFC 3339 UTC into @out. */
void args_format_time(int64_t ms, char *out, size_t len);

#endif
