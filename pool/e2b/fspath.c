// SPDX-License-Identifier: Apache-2.0
/*
 * fspath.c - paths and users as envd takes them (filesystem.h): a user's
 * name checked, a path resolved against the user's home and cleaned, and
 * where a multipart body's parts begin.
 *
 * envd resolves a relative path (and "~") against the user's home with
 * Go's filepath.Join, which also cleans it; an absolute path it passes on
 * as given.  Here every path is cleaned, absolute ones too, so that the
 * EntryInfo's path and name an answer carries are the file's ("/a/b/.."
 * is "/a", named "a") and no ".." reaches the agent: the guest is the
 * client's own, root and all, so this is for sane answers, not a fence.
 * A path is resolved in place, segment by segment, into a buffer of
 * E2B_PATH_MAX + 1 bytes: nothing is allocated and nothing longer is
 * made.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pool/e2b/filesystem.h"

#define USER_CHARS                                                       \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_.-"

bool e2b_user_valid(const char *user)
{
	size_t n = strlen(user);

	/* "." and ".." would make a home outside /home. */
	return n && n <= E2B_USER_MAX && strspn(user, USER_CHARS) == n &&
	       strcmp(user, ".") && strcmp(user, "..");
}

/* Appends @seg (@n bytes) to cleaned path @out (@len bytes so far);
 * false when the result would pass E2B_PATH_MAX. */
static bool push_segment(char *out, size_t *len, const char *seg, size_t n)
{
	if (n == 0 || (n == 1 && seg[0] == '.'))
		return true;
	if (n == 2 && seg[0] == '.' && seg[1] == '.') {
		while (*len > 0 && out[*len - 1] != '/')
			(*len)--;
		if (*len > 1)
			(*len)--; /* the slash, unless it is the root's */
		out[*len] = '\0';
		return true;
	}
	size_t slash = *len > 1 ? 1 : 0;
	if (*len + slash + n > E2B_PATH_MAX)
		return false;
	if (slash)
		out[(*len)++] = '/';
	memcpy(out + *len, seg, n);
	*len += n;
	out[*len] = '\0';
	return true;
}

/* Appends every segment of @path to @out; false past E2B_PATH_MAX. */
static bool push_path(char *out, size_t *len, const char *path)
{
	while (*path) {
		size_t n = strcspn(path, "/");

		if (!push_segment(out, len, path, n))
			return false;
		path += n;
		path += strspn(path, "/");
	}
	return true;
}

int e2b_resolve_path(const char *path, const char *user,
		     char out[E2B_PATH_MAX + 1], char *err, size_t errlen)
{
	size_t len = 1;

	out[0] = '/';
	out[1] = '\0';
	if (path[0] == '~' && path[1] && path[1] != '/') {
		snprintf(err, errlen,
			 "failed to expand path '%.256s' for user '%s': cannot "
			 "expand user-specific home dir",
			 path, user);
		return -EINVAL;
	}
	bool ok = true;
	if (path[0] != '/') {
		ok = strcmp(user, "root")
			     ? push_segment(out, &len, "home", 4) &&
				       push_path(out, &len, user)
			     : push_segment(out, &len, "root", 4);
		if (path[0] == '~')
			path++;
	}
	if (!ok || !push_path(out, &len, path)) {
		snprintf(err, errlen,
			 "the path '%.256s...' is longer than %d bytes once "
			 "resolved",
			 path, E2B_PATH_MAX);
		return -EINVAL;
	}
	return 0;
}

const char *e2b_base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : slash ? "/" : path;
}

bool e2b_part_begins(struct e2b_part_cursor *pc, const char *key,
		     const char *filename, uint64_t off, size_t size)
{
	key = key ? key : "";
	filename = filename ? filename : "";
	bool same = pc->started && !strncmp(pc->key, key, sizeof(pc->key)) &&
		    !strncmp(pc->filename, filename, sizeof(pc->filename));
	bool begins = off == 0 && (!same || pc->bytes > 0);

	if (begins) {
		pc->started = true;
		pc->bytes = 0;
		snprintf(pc->key, sizeof(pc->key), "%s", key);
		snprintf(pc->filename, sizeof(pc->filename), "%s", filename);
	}
	pc->bytes += size;
	return begins;
}
