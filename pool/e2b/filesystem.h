/* SPDX-License-Identifier: Apache-2.0 */
/*
 * filesystem.h - envd's filesystem for E2B's SDK: the Connect service
 * filesystem.Filesystem (filesystem.c), its watchers kept between calls
 * (watchers.c), GET and POST /files (files.c), and what they share: paths
 * as envd resolves them (fspath.c) and EntryInfo as envd encodes it
 * (entry.c).  The routes' table (server.c) and the server's start and stop
 * are all that use it from outside.
 *
 * Every operation runs in the guest through thaw's agent (STAT, LIST,
 * MKDIR, REMOVE, RENAME, WATCH, READ_FILE, WRITE_FILE, PROTOCOL.md), each
 * request on a connection of its own; the agent does it as root, as envd
 * does, a request's user deciding only where a relative path starts (its
 * home) and who owns what it creates.
 */
#ifndef THAW_POOL_E2B_FILESYSTEM_H
#define THAW_POOL_E2B_FILESYSTEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "pool/host/agent_client.h"
#include "pool/e2b/e2b_internal.h"

/* A guest path, resolved: what the agent's PATH fields take. */
#define E2B_PATH_MAX 4095
/* A user name: 1 to 32 of [A-Za-z0-9_.-], as useradd takes them. */
#define E2B_USER_MAX 32

/* ---- fspath.c (pure) ---------------------------------------------------- */

/* Whether @user is a user name of that shape. */
bool e2b_user_valid(const char *user);

/*
 * @path as envd resolves it for @user (a valid name): "" is the user's
 * home, "~" and "~/x" are in it, a relative path starts there; then,
 * like envd's relative paths (Go's filepath.Join), every path is cleaned
 * lexically: "." and empty segments dropped, ".." taking the one before
 * it ("/.." is "/").  The home of root is /root, of any other user
 * /home/USER (the guest's useradd default).  0, or -EINVAL for "~other"
 * or a result past E2B_PATH_MAX with a message in @err.
 */
int e2b_resolve_path(const char *path, const char *user,
		     char out[E2B_PATH_MAX + 1], char *err, size_t errlen);

/* The last segment of resolved @path ("/" for the root), as Go's
 * filepath.Base: a pointer into @path, or to "/". */
const char *e2b_base_name(const char *path);

/*
 * Whether an MHD_PostProcessor's call for (@key, @filename, @off, @size)
 * begins a new part of a multipart body.  libmicrohttpd says no part's
 * end: a part is its calls from offset 0 on, and the first call of a part
 * may carry no bytes (every part gets one call, an empty one too), so a
 * call at offset 0 begins a part when its name or filename changed or the
 * current part already had bytes.  Blind to one case only: an empty part
 * followed by one of the same name and filename reads as one part (envd
 * refuses two files to one path anyway).  Pure.
 */
struct e2b_part_cursor {
	bool started;
	uint64_t bytes; /* of the current part */
	char key[64];
	char filename[E2B_PATH_MAX + 2]; /* one more: a longer one differs */
};
bool e2b_part_begins(struct e2b_part_cursor *pc, const char *key,
		     const char *filename, uint64_t off, size_t size);

/* ---- entry.c (pure) ----------------------------------------------------- */

/* Go's os.FileMode.String() of a file of @type (enum thaw_file_type) and
 * permission bits @mode, envd's "permissions": "-rw-r--r--",
 * "drwxr-xr-x", "Lrwxrwxrwx", "ugtrwx..." with setuid/setgid/sticky. */
void e2b_permissions(uint8_t type, uint32_t mode, char out[16]);

/* @ns since the epoch as protobuf's JSON Timestamp (RFC 3339 in UTC, 0,
 * 3, 6 or 9 digits of fraction). */
void e2b_timestamp(int64_t ns, char *out, size_t len);

/*
 * envd's EntryInfo (filesystem.proto, JSON names) of @info at resolved
 * @path: name, type, path, size, mode, permissions, owner, group,
 * modifiedTime, symlinkTarget (a symlink's target, made absolute against
 * its directory).  NULL when out of memory.
 */
json_t *e2b_entry_json(const struct agent_file_info *info, const char *path);

/* envd's FilesystemEvent of @ev: {name, type}; NULL for an OVERFLOW
 * (events were lost: envd's watcher error) or out of memory. */
json_t *e2b_event_json(const struct agent_fs_event *ev);

/* ---- filesystem.c: the Connect service ---------------------------------- */

e2b_handler e2b_fs_stat, e2b_fs_list_dir, e2b_fs_make_dir, e2b_fs_move,
	e2b_fs_remove, e2b_fs_watch_dir, e2b_fs_create_watcher,
	e2b_fs_get_watcher_events, e2b_fs_remove_watcher;

/* ---- files.c: GET and POST /files --------------------------------------- */

/*
 * The ?path= (NULL: absent, the user's home) and ?username= (NULL or "":
 * E2B_DEFAULT_USER) of a /files request into @user and @resolved; 0, or
 * envd's status with a message in @err: 401 for a user name that cannot
 * be one, 400 for a path that cannot be resolved.  Pure.
 */
int e2b_files_args(const char *path, const char *username,
		   char user[E2B_USER_MAX + 1], char resolved[E2B_PATH_MAX + 1],
		   char *err, size_t errlen);

/* What a POST /files body is, by its Content-Type (NULL: none).  Pure. */
enum e2b_upload_kind {
	E2B_UPLOAD_UNSUPPORTED,
	E2B_UPLOAD_MULTIPART, /* multipart/form-data */
	E2B_UPLOAD_RAW,	      /* application/octet-stream: the file */
};
enum e2b_upload_kind e2b_upload_kind(const char *content_type);

e2b_handler e2b_files_get, e2b_files_upload_begin, e2b_files_upload_end;
void e2b_files_upload_piece(struct MHD_Connection *conn, struct e2b_request *r,
			    const char *data, size_t len);

/* ---- watchers.c: CreateWatcher's watches, kept between calls ------------ */

/* At most this many of one sandbox, and of all, at once. */
#define E2B_MAX_WATCHERS 16
#define E2B_MAX_WATCHERS_ALL 256
/* "w" and 16 hex digits. */
#define E2B_WATCHER_ID_LEN 17

struct e2b_watchers;

struct e2b_watchers *watchers_new(struct daemon *d);
/* Ends every watch and frees the table; NULL is a no-op. */
void watchers_free(struct e2b_watchers *ws);

/*
 * Watches resolved @path of held sandbox @c (recursively or not) on an
 * agent connection of its own, kept until watchers_remove(), the daemon's
 * stop, or a later create finding its sandbox gone.  0 with its id in
 * @id, or a Connect code with a message in @err.
 */
enum e2b_code watchers_create(struct e2b_watchers *ws, struct sandbox *c,
			      const char *path, bool recursive,
			      char id[E2B_WATCHER_ID_LEN + 1], char *err,
			      size_t errlen);
/*
 * The events watcher @id of @c has seen since the last call, as
 * GetWatcherEventsResponse {events: [...]} (at most E2B_WATCHER_BATCH of
 * them: the rest come with the next call); or a Connect code with a
 * message in @err: not_found, or the watch's failure (it stays failed).
 */
#define E2B_WATCHER_BATCH 4096
enum e2b_code watchers_events(struct e2b_watchers *ws, struct sandbox *c,
			      const char *id, json_t **answer, char *err,
			      size_t errlen);
enum e2b_code watchers_remove(struct e2b_watchers *ws, struct sandbox *c,
			      const char *id, char *err, size_t errlen);

#endif
