// SPDX-License-Identifier: Apache-2.0
/*
 * test_e2b_fs.c - envd's filesystem pieces that need no server
 * (pool/e2b/filesystem.h): paths resolved and cleaned as envd's, hostile
 * ones included; users; /files' query; an upload's Content-Type; where a
 * multipart body's parts begin in MHD_PostProcessor's calls; EntryInfo
 * and FilesystemEvent in protobuf's JSON (Go's permission strings,
 * Timestamps).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pool/e2b/filesystem.h"

static const char *resolved(const char *path, const char *user)
{
	static char out[E2B_PATH_MAX + 1];
	char err[256];

	cr_assert_eq(e2b_resolve_path(path, user, out, err, sizeof(err)), 0,
		     "%s: %s", path, err);
	return out;
}

Test(paths, relative_ones_start_in_the_users_home)
{
	cr_assert_str_eq(resolved("", "user"), "/home/user");
	cr_assert_str_eq(resolved("a.txt", "user"), "/home/user/a.txt");
	cr_assert_str_eq(resolved("~", "user"), "/home/user");
	cr_assert_str_eq(resolved("~/x/y", "user"), "/home/user/x/y");
	cr_assert_str_eq(resolved("x", "root"), "/root/x");
	cr_assert_str_eq(resolved("/etc/passwd", "user"), "/etc/passwd");
}

Test(paths, are_cleaned_and_never_climb_above_the_root)
{
	cr_assert_str_eq(resolved("/", "user"), "/");
	cr_assert_str_eq(resolved("//a//b/./c/", "user"), "/a/b/c");
	cr_assert_str_eq(resolved("/a/b/..", "user"), "/a");
	cr_assert_str_eq(resolved("/..", "user"), "/");
	cr_assert_str_eq(resolved("/../../../etc/x", "user"), "/etc/x");
	cr_assert_str_eq(resolved("../../../etc", "user"), "/etc");
	cr_assert_str_eq(resolved("a/../../..", "user"), "/");
	cr_assert_str_eq(resolved("/a/...", "user"), "/a/...");
}

Test(paths, another_users_home_and_overlong_ones_are_refused)
{
	char out[E2B_PATH_MAX + 1], err[512];
	static char longer[3 * E2B_PATH_MAX];

	cr_assert_eq(e2b_resolve_path("~root/x", "user", out, err, sizeof(err)),
		     -EINVAL);
	cr_assert(strstr(err, "user-specific home dir"), "%s", err);
	memset(longer, 'a', sizeof(longer) - 1);
	longer[0] = '/';
	cr_assert_eq(e2b_resolve_path(longer, "user", out, err, sizeof(err)),
		     -EINVAL);
	/* Long on the way, short once cleaned: taken. */
	for (size_t i = 1; i + 3 < sizeof(longer) - 1; i += 3)
		memcpy(longer + i, "../", 3);
	cr_assert_eq(e2b_resolve_path(longer, "user", out, err, sizeof(err)), 0,
		     "%s", err);
	/* Exactly E2B_PATH_MAX bytes fit, one more does not. */
	memset(longer, 'b', E2B_PATH_MAX);
	longer[0] = '/';
	longer[E2B_PATH_MAX] = '\0';
	cr_assert_eq(e2b_resolve_path(longer, "user", out, err, sizeof(err)),
		     0);
	cr_assert_eq(strlen(out), E2B_PATH_MAX);
	longer[E2B_PATH_MAX] = 'b';
	longer[E2B_PATH_MAX + 1] = '\0';
	cr_assert_eq(e2b_resolve_path(longer, "user", out, err, sizeof(err)),
		     -EINVAL);
}

Test(paths, base_names)
{
	cr_assert_str_eq(e2b_base_name("/"), "/");
	cr_assert_str_eq(e2b_base_name("/a"), "a");
	cr_assert_str_eq(e2b_base_name("/a/b.txt"), "b.txt");
}

Test(users, names_as_useradd_takes_them)
{
	cr_assert(e2b_user_valid("user"));
	cr_assert(e2b_user_valid("root"));
	cr_assert(e2b_user_valid("a.b-c_1"));
	cr_assert_not(e2b_user_valid(""));
	cr_assert_not(e2b_user_valid("."));
	cr_assert_not(e2b_user_valid(".."));
	cr_assert_not(e2b_user_valid("a/b"));
	cr_assert_not(e2b_user_valid("a b"));
	cr_assert_not(e2b_user_valid("0123456789012345678901234567890123"));
}

Test(files_query, defaults_and_errors)
{
	char user[E2B_USER_MAX + 1], path[E2B_PATH_MAX + 1], err[512];

	cr_assert_eq(e2b_files_args(NULL, NULL, user, path, err, sizeof(err)),
		     0);
	cr_assert_str_eq(user, "user");
	cr_assert_str_eq(path, "/home/user");
	cr_assert_eq(e2b_files_args("f", "", user, path, err, sizeof(err)), 0);
	cr_assert_str_eq(path, "/home/user/f");
	cr_assert_eq(e2b_files_args("f", "root", user, path, err, sizeof(err)),
		     0);
	cr_assert_str_eq(path, "/root/f");
	cr_assert_eq(
		e2b_files_args("f", "../etc", user, path, err, sizeof(err)),
		401);
	cr_assert(strstr(err, "error looking up user"), "%s", err);
	cr_assert_eq(
		e2b_files_args("~x/f", "user", user, path, err, sizeof(err)),
		400);
}

Test(files_query, upload_kinds)
{
	cr_assert_eq(e2b_upload_kind(NULL), E2B_UPLOAD_UNSUPPORTED);
	cr_assert_eq(e2b_upload_kind("multipart/form-data; boundary=x"),
		     E2B_UPLOAD_MULTIPART);
	cr_assert_eq(e2b_upload_kind("Multipart/Form-Data;boundary=x"),
		     E2B_UPLOAD_MULTIPART);
	cr_assert_eq(e2b_upload_kind("application/octet-stream"),
		     E2B_UPLOAD_RAW);
	cr_assert_eq(e2b_upload_kind(" application/octet-stream ; x=y"),
		     E2B_UPLOAD_RAW);
	cr_assert_eq(e2b_upload_kind("multipart/form-datax"),
		     E2B_UPLOAD_UNSUPPORTED);
	cr_assert_eq(e2b_upload_kind("application/json"),
		     E2B_UPLOAD_UNSUPPORTED);
	cr_assert_eq(e2b_upload_kind(""), E2B_UPLOAD_UNSUPPORTED);
}

/* The calls MHD_PostProcessor makes: an empty first call of a part, its
 * data from offset 0 on, the next part from offset 0 again. */
Test(multipart, parts_begin_at_offset_zero_after_data_or_a_new_name)
{
	struct e2b_part_cursor pc = { 0 };

	cr_assert(e2b_part_begins(&pc, "file", "/a", 0, 0));
	cr_assert_not(e2b_part_begins(&pc, "file", "/a", 0, 10));
	cr_assert_not(e2b_part_begins(&pc, "file", "/a", 10, 5));
	/* Same name and filename, offset 0 after data: a second part. */
	cr_assert(e2b_part_begins(&pc, "file", "/a", 0, 3));
	/* An empty part, then another file. */
	cr_assert(e2b_part_begins(&pc, "file", "/b", 0, 0));
	cr_assert(e2b_part_begins(&pc, "file", "/c", 0, 0));
	cr_assert_not(e2b_part_begins(&pc, "file", "/c", 0, 7));
	/* A field with no filename, then one with no name at all. */
	cr_assert(e2b_part_begins(&pc, "note", NULL, 0, 2));
	cr_assert(e2b_part_begins(&pc, NULL, NULL, 0, 0));
	cr_assert_not(e2b_part_begins(&pc, NULL, NULL, 0, 4));
}

Test(multipart, overlong_names_still_split_parts)
{
	struct e2b_part_cursor pc = { 0 };
	static char name[2 * E2B_PATH_MAX];

	memset(name, 'x', sizeof(name) - 1);
	cr_assert(e2b_part_begins(&pc, "file", name, 0, 1));
	cr_assert_not(e2b_part_begins(&pc, "file", name, 1, 1));
	cr_assert(e2b_part_begins(&pc, "file", "/short", 0, 1));
}

Test(entries, permissions_as_go_prints_them)
{
	char p[16];

	e2b_permissions(THAW_FT_REGULAR, 0644, p);
	cr_assert_str_eq(p, "-rw-r--r--");
	e2b_permissions(THAW_FT_DIR, 0755, p);
	cr_assert_str_eq(p, "drwxr-xr-x");
	e2b_permissions(THAW_FT_SYMLINK, 0777, p);
	cr_assert_str_eq(p, "Lrwxrwxrwx");
	e2b_permissions(THAW_FT_DIR, 01777, p);
	cr_assert_str_eq(p, "dtrwxrwxrwx");
	e2b_permissions(THAW_FT_REGULAR, 04755, p);
	cr_assert_str_eq(p, "urwxr-xr-x");
	e2b_permissions(THAW_FT_CHAR, 0666, p);
	cr_assert_str_eq(p, "Dcrw-rw-rw-");
	e2b_permissions(THAW_FT_FIFO, 0600, p);
	cr_assert_str_eq(p, "prw-------");
	e2b_permissions(THAW_FT_SOCKET, 07777, p);
	cr_assert_str_eq(p, "Sugtrwxrwxrwx");
}

Test(entries, timestamps_as_protobuf_json)
{
	char t[48];

	e2b_timestamp(0, t, sizeof(t));
	cr_assert_str_eq(t, "1970-01-01T00:00:00Z");
	e2b_timestamp(1700000000000000000ll, t, sizeof(t));
	cr_assert_str_eq(t, "2023-11-14T22:13:20Z");
	e2b_timestamp(1700000000120000000ll, t, sizeof(t));
	cr_assert_str_eq(t, "2023-11-14T22:13:20.120Z");
	e2b_timestamp(1700000000000123000ll, t, sizeof(t));
	cr_assert_str_eq(t, "2023-11-14T22:13:20.000123Z");
	e2b_timestamp(1700000000000000001ll, t, sizeof(t));
	cr_assert_str_eq(t, "2023-11-14T22:13:20.000000001Z");
	e2b_timestamp(-1, t, sizeof(t));
	cr_assert_str_eq(t, "1969-12-31T23:59:59.999999999Z");
}

static json_t *entry_of(uint8_t type, const char *path, const char *target)
{
	static struct agent_file_info info;

	memset(&info, 0, sizeof(info));
	info.type = type;
	info.mode = 0640;
	info.size = 12345678901ull;
	info.mtime_ns = 1700000000500000000ll;
	strcpy(info.owner, "user");
	strcpy(info.group, "users");
	strcpy(info.symlink_target, target);
	return e2b_entry_json(&info, path);
}

Test(entries, entry_info_fields)
{
	json_t *e = entry_of(THAW_FT_REGULAR, "/home/user/a.txt", "");

	cr_assert_not_null(e);
	cr_assert_str_eq(json_string_value(json_object_get(e, "name")),
			 "a.txt");
	cr_assert_str_eq(json_string_value(json_object_get(e, "type")),
			 "FILE_TYPE_FILE");
	cr_assert_str_eq(json_string_value(json_object_get(e, "path")),
			 "/home/user/a.txt");
	cr_assert_str_eq(json_string_value(json_object_get(e, "size")),
			 "12345678901");
	cr_assert_eq(json_integer_value(json_object_get(e, "mode")), 0640);
	cr_assert_str_eq(json_string_value(json_object_get(e, "permissions")),
			 "-rw-r-----");
	cr_assert_str_eq(json_string_value(json_object_get(e, "owner")),
			 "user");
	cr_assert_str_eq(json_string_value(json_object_get(e, "group")),
			 "users");
	cr_assert_str_eq(json_string_value(json_object_get(e, "modifiedTime")),
			 "2023-11-14T22:13:20.500Z");
	cr_assert_null(json_object_get(e, "symlinkTarget"));
	json_decref(e);
}

Test(entries, symlink_targets_are_absolute)
{
	json_t *e = entry_of(THAW_FT_SYMLINK, "/a/b/link", "../c/d");

	cr_assert_str_eq(json_string_value(json_object_get(e, "type")),
			 "FILE_TYPE_SYMLINK");
	cr_assert_str_eq(json_string_value(json_object_get(e, "symlinkTarget")),
			 "/a/c/d");
	json_decref(e);
	e = entry_of(THAW_FT_SYMLINK, "/a/link", "/etc/hosts");
	cr_assert_str_eq(json_string_value(json_object_get(e, "symlinkTarget")),
			 "/etc/hosts");
	json_decref(e);
}

Test(entries, names_that_are_not_utf8_still_make_json)
{
	json_t *e = entry_of(THAW_FT_REGULAR, "/tmp/\xff\xfe.bin", "");

	cr_assert_not_null(e);
	cr_assert_str_eq(json_string_value(json_object_get(e, "name")),
			 "??.bin");
	json_decref(e);
}

Test(entries, events)
{
	struct agent_fs_event ev = { .type = THAW_EV_CREATE };
	json_t *j;

	strcpy(ev.name, "sub/new.txt");
	j = e2b_event_json(&ev);
	cr_assert_str_eq(json_string_value(json_object_get(j, "name")),
			 "sub/new.txt");
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
			 "EVENT_TYPE_CREATE");
	json_decref(j);
	ev.type = THAW_EV_CHMOD;
	j = e2b_event_json(&ev);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")),
			 "EVENT_TYPE_CHMOD");
	json_decref(j);
	ev.type = THAW_EV_OVERFLOW;
	cr_assert_null(e2b_event_json(&ev));
}
