// SPDX-License-Identifier: Apache-2.0
/*
 * guest_agent.c - see guest_agent.h.  Each call is one request on the
 * connection, answered before the next: the request ids only tell this
 * call's frames from stray ones.
 */
#include "tests/integration/guest_agent.h"

#include <criterion/criterion.h>
#include <string.h>

#include "guest/protocol.h"

#define EXEC_ID 1
#define READ_ID 8

/* The next frame of request @id, parsed into @m. */
static void next_frame(struct agent_conn *agent, uint32_t id,
		       struct thaw_frame *f, struct thaw_msg *m)
{
	char why[256];

	do
		cr_assert_eq(agent_next_frame(agent, f), 0, "lost the agent");
	while (f->h.request_id != id);
	cr_assert_eq(thaw_parse_type(m, f->h.type, f->payload, f->payload_len,
				     why, sizeof(why)),
		     0, "%s", why);
}

int guest_sh(struct agent_conn *agent, const char *script, int timeout_s,
	     char *out, size_t size)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	struct agent_exec_request r = { .argv = argv,
					.timeout_ms = timeout_s * 1000u };
	size_t len = 0;
	struct thaw_frame f;
	struct thaw_msg m;
	char why[256];

	out[0] = '\0';
	cr_assert_eq(agent_exec(agent, EXEC_ID, &r), 0);
	for (;;) {
		next_frame(agent, EXEC_ID, &f, &m);
		if (f.h.type == THAW_STDOUT || f.h.type == THAW_STDERR) {
			const struct thaw_field *d = thaw_get(&m, THAW_T_DATA);
			size_t n = d->len < size - 1 - len ? d->len
							   : size - 1 - len;

			memcpy(out + len, d->data, n);
			len += n;
			out[len] = '\0';
		} else if (f.h.type == THAW_EXIT) {
			return (int)thaw_get_u32(&m, THAW_T_EXIT_CODE, 255);
		} else if (f.h.type == THAW_ERROR) {
			thaw_get_str(&m, THAW_T_MESSAGE, why, sizeof(why));
			cr_assert_fail("exec: %s", why);
		}
	}
}

long guest_read(struct agent_conn *agent, const char *path,
		void (*chunk)(void *arg, const void *data, size_t len),
		void *arg)
{
	struct thaw_frame f;
	struct thaw_msg m;
	long got = 0;

	cr_assert_eq(agent_read_file(agent, READ_ID, path), 0);
	for (;;) {
		next_frame(agent, READ_ID, &f, &m);
		if (f.h.type == THAW_ERROR)
			return -1;
		if (f.h.type != THAW_DATA) {
			cr_assert_eq(f.h.type, THAW_END, "%s: frame %u", path,
				     f.h.type);
			return got;
		}
		const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);

		chunk(arg, data->data, data->len);
		got += (long)data->len;
	}
}
