// SPDX-License-Identifier: Apache-2.0
/*
 * entry.c - envd's EntryInfo and FilesystemEvent in the Connect protocol's
 * JSON (protobuf's JSON mapping of filesystem.proto), from what the agent's
 * STAT, LIST and WATCH answer (filesystem.h).
 *
 * The mapping's rules, as envd's Go encoder applies them: fields by their
 * lowerCamelCase names, enums by their names (FILE_TYPE_DIRECTORY), int64
 * (size) as a decimal string, Timestamp as RFC 3339 in UTC with 0, 3, 6 or
 * 9 digits of fraction, and an optional field (symlinkTarget) only when
 * set.  "permissions" is Go's os.FileMode.String(), which envd sends as
 * is: a letter per type bit ('d', 'L' for a symlink, 'D' and 'c' for a
 * character device...) or '-', then rwx three times.
 *
 * Where thaw differs from envd: a symlink is FILE_TYPE_SYMLINK, its mode
 * its own, its symlinkTarget its link made absolute against its directory
 * (envd follows the whole chain and reports the target's type and mode).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pool/e2b/filesystem.h"

#define NS_PER_S 1000000000ll

void e2b_permissions(uint8_t type, uint32_t mode, char out[16])
{
	size_t n = 0;

	/* Go's letters, in its order: "dalTLDpSugct?". */
	if (type == THAW_FT_DIR)
		out[n++] = 'd';
	if (type == THAW_FT_SYMLINK)
		out[n++] = 'L';
	if (type == THAW_FT_BLOCK || type == THAW_FT_CHAR)
		out[n++] = 'D';
	if (type == THAW_FT_FIFO)
		out[n++] = 'p';
	if (type == THAW_FT_SOCKET)
		out[n++] = 'S';
	if (mode & 04000)
		out[n++] = 'u';
	if (mode & 02000)
		out[n++] = 'g';
	if (type == THAW_FT_CHAR)
		out[n++] = 'c';
	if (mode & 01000)
		out[n++] = 't';
	if (type == THAW_FT_OTHER)
		out[n++] = '?';
	if (n == 0)
		out[n++] = '-';
	for (int bit = 8; bit >= 0; bit--)
		out[n++] = mode & (1u << bit) ? "xwr"[bit % 3] : '-';
	out[n] = '\0';
}

void e2b_timestamp(int64_t ns, char *out, size_t len)
{
	int64_t s = ns / NS_PER_S, frac = ns % NS_PER_S;

	if (frac < 0) { /* before 1970: the fraction counts forward */
		frac += NS_PER_S;
		s--;
	}
	time_t t = (time_t)s;
	struct tm tm;
	char date[32];

	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac == 0)
		snprintf(out, len, "%sZ", date);
	else if (frac % 1000000 == 0)
		snprintf(out, len, "%s.%03" PRId64 "Z", date, frac / 1000000);
	else if (frac % 1000 == 0)
		snprintf(out, len, "%s.%06" PRId64 "Z", date, frac / 1000);
	else
		snprintf(out, len, "%s.%09" PRId64 "Z", date, frac);
}

/*
 * @s as a JSON string: a guest's names are bytes, JSON's (and protobuf's)
 * strings UTF-8, so a name that is not has its bytes past ASCII shown as
 * '?' (envd's encoder refuses such a name: the whole answer fails).
 */
static json_t *text_json(const char *s)
{
	json_t *j = json_string(s);

	if (j)
		return j;
	char copy[E2B_PATH_MAX + 1];
	size_t n = 0;
	for (; s[n] && n < E2B_PATH_MAX; n++)
		copy[n] = (unsigned char)s[n] < 0x80 ? s[n] : '?';
	copy[n] = '\0';
	return json_string(copy);
}

static const char *file_type_name(uint8_t type)
{
	switch (type) {
	case THAW_FT_REGULAR:
		return "FILE_TYPE_FILE";
	case THAW_FT_DIR:
		return "FILE_TYPE_DIRECTORY";
	case THAW_FT_SYMLINK:
		return "FILE_TYPE_SYMLINK";
	default:
		return "FILE_TYPE_UNSPECIFIED";
	}
}

/* A symlink's @target made absolute against the directory of @path. */
static void symlink_target(const char *path, const char *target,
			   char out[E2B_PATH_MAX + 1])
{
	char joined[2 * (E2B_PATH_MAX + 1)], err[8];
	const char *base = e2b_base_name(path);

	if (target[0] == '/')
		snprintf(joined, sizeof(joined), "%s", target);
	else
		snprintf(joined, sizeof(joined), "%.*s/%s", (int)(base - path),
			 path, target);
	/* Too long to clean: the link's own text, as envd gives it when it
	 * cannot follow one. */
	if (e2b_resolve_path(joined, "root", out, err, sizeof(err)) < 0)
		snprintf(out, E2B_PATH_MAX + 1, "%s", target);
}

json_t *e2b_entry_json(const struct agent_file_info *info, const char *path)
{
	char permissions[16], size[24], mtime[48];

	e2b_permissions(info->type, info->mode, permissions);
	snprintf(size, sizeof(size), "%" PRIu64, info->size);
	json_t *e = json_pack("{s:o,s:s,s:o,s:s,s:i,s:s,s:o,s:o}", "name",
			      text_json(e2b_base_name(path)), "type",
			      file_type_name(info->type), "path",
			      text_json(path), "size", size, "mode",
			      (json_int_t)(info->mode & 0777), "permissions",
			      permissions, "owner", text_json(info->owner),
			      "group", text_json(info->group));

	if (e && info->mtime_ns) {
		e2b_timestamp(info->mtime_ns, mtime, sizeof(mtime));
		json_object_set_new(e, "modifiedTime", json_string(mtime));
	}
	if (e && info->type == THAW_FT_SYMLINK) {
		char target[E2B_PATH_MAX + 1];

		symlink_target(path, info->symlink_target, target);
		json_object_set_new(e, "symlinkTarget", text_json(target));
	}
	return e;
}

static const char *event_type_name(uint8_t type)
{
	switch (type) {
	case THAW_EV_CREATE:
		return "EVENT_TYPE_CREATE";
	case THAW_EV_WRITE:
		return "EVENT_TYPE_WRITE";
	case THAW_EV_REMOVE:
		return "EVENT_TYPE_REMOVE";
	case THAW_EV_RENAME:
		return "EVENT_TYPE_RENAME";
	case THAW_EV_CHMOD:
		return "EVENT_TYPE_CHMOD";
	default:
		return NULL;
	}
}

json_t *e2b_event_json(const struct agent_fs_event *ev)
{
	const char *type = event_type_name(ev->type);

	return type ? json_pack("{s:o,s:s}", "name", text_json(ev->name),
				"type", type)
		    : NULL;
}
