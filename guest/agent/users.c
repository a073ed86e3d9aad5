// SPDX-License-Identifier: Apache-2.0
/*
 * users.c - the guest's users and groups: who an EXEC runs as, who owns a
 * written file, and the names STAT and LIST report for owners.
 *
 * The agent is linked statically, so getpwnam() and friends would go
 * through NSS modules a static binary cannot load; the files themselves,
 * /etc/passwd and /etc/group, are the guest's user database (the
 * initramfs has root and `user`, E2B's default), read with fgetpwent and
 * fgetgrent, which parse a stream and need no NSS.  A user is named by
 * name or by uid in decimal; a uid the files do not know still works (its
 * gid is then the uid, its home "/"), as with `docker run --user 1234`.
 *
 * Names for ids are asked once per entry of a LIST that may have
 * thousands, nearly all with the same owner: a small table remembers the
 * last few answers, and users_forget() empties it at the start of every
 * request, so an edit of /etc/passwd shows in the next answer.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest/agent/agent.h"

#define PASSWD_FILE "/etc/passwd"
#define GROUP_FILE "/etc/group"
#define NAME_CACHE 8

struct id_name {
	bool used;
	unsigned id;
	char name[USER_NAME_MAX + 1];
};

static struct id_name user_cache[NAME_CACHE], group_cache[NAME_CACHE];
static unsigned user_next, group_next;

void users_forget(void)
{
	memset(user_cache, 0, sizeof(user_cache));
	memset(group_cache, 0, sizeof(group_cache));
}

/* A decimal id of at most 10 digits, below 2^32 - 1 ((uid_t)-1 means
 * "no change" to the kernel). */
static bool parse_id(const char *s, unsigned *id)
{
	unsigned long long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
		return false;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	if (v >= 0xffffffffull)
		return false;
	*id = (unsigned)v;
	return true;
}

/* The passwd entry of name @name, or of uid @uid when @name is NULL;
 * copied into @u.  Returns 0 or -ENOENT. */
static int find_passwd(const char *name, uid_t uid, struct user_id *u)
{
	FILE *f = fopen(PASSWD_FILE, "re");
	struct passwd *pw;
	int ret = -ENOENT;

	while (f && (pw = fgetpwent(f))) {
		if (name ? strcmp(pw->pw_name, name) != 0 : pw->pw_uid != uid)
			continue;
		if (strlen(pw->pw_name) > USER_NAME_MAX ||
		    strlen(pw->pw_dir) >= sizeof(u->home))
			break;
		u->uid = pw->pw_uid;
		u->gid = pw->pw_gid;
		strcpy(u->name, pw->pw_name);
		strcpy(u->home, pw->pw_dir);
		ret = 0;
		break;
	}
	if (f)
		fclose(f);
	return ret;
}

/* The primary group, then every group of /etc/group listing @u->name. */
static void find_groups(struct user_id *u)
{
	FILE *f = fopen(GROUP_FILE, "re");
	struct group *gr;

	u->groups[0] = u->gid;
	u->ngroups = 1;
	while (f && (gr = fgetgrent(f)) && u->ngroups < USER_MAX_GROUPS) {
		if (gr->gr_gid == u->gid)
			continue;
		for (char **m = gr->gr_mem; m && *m; m++) {
			if (strcmp(*m, u->name) == 0) {
				u->groups[u->ngroups++] = gr->gr_gid;
				break;
			}
		}
	}
	if (f)
		fclose(f);
}

int user_resolve(const char *spec, struct user_id *u, char *err, size_t errlen)
{
	unsigned id;

	memset(u, 0, sizeof(*u));
	if (parse_id(spec, &id)) {
		if (find_passwd(NULL, (uid_t)id, u) < 0) {
			u->uid = (uid_t)id;
			u->gid = (gid_t)id;
			snprintf(u->name, sizeof(u->name), "%u", id);
			strcpy(u->home, "/");
		}
	} else if (find_passwd(spec, 0, u) < 0) {
		snprintf(err, errlen, "USER \"%s\": no such user in %s", spec,
			 PASSWD_FILE);
		return -EINVAL;
	}
	find_groups(u);
	return 0;
}

/* @id's name through @cache, else from @lookup, else @id in decimal. */
static const char *cached_name(struct id_name *cache, unsigned *next,
			       unsigned id,
			       bool (*lookup)(unsigned id, char *out))
{
	struct id_name *slot;

	for (int i = 0; i < NAME_CACHE; i++) {
		if (cache[i].used && cache[i].id == id)
			return cache[i].name;
	}
	slot = &cache[*next];
	*next = (*next + 1) % NAME_CACHE;
	slot->used = true;
	slot->id = id;
	if (!lookup(id, slot->name))
		snprintf(slot->name, sizeof(slot->name), "%u", id);
	return slot->name;
}

static bool lookup_user(unsigned id, char *out)
{
	struct user_id u;

	if (find_passwd(NULL, (uid_t)id, &u) < 0)
		return false;
	strcpy(out, u.name);
	return true;
}

static bool lookup_group(unsigned id, char *out)
{
	FILE *f = fopen(GROUP_FILE, "re");
	struct group *gr;
	bool found = false;

	while (f && !found && (gr = fgetgrent(f))) {
		if (gr->gr_gid == (gid_t)id &&
		    strlen(gr->gr_name) <= USER_NAME_MAX) {
			strcpy(out, gr->gr_name);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

const char *user_name(uid_t uid)
{
	return cached_name(user_cache, &user_next, (unsigned)uid, lookup_user);
}

const char *group_name(gid_t gid)
{
	return cached_name(group_cache, &group_next, (unsigned)gid,
			   lookup_group);
}

static bool has_key(char *const *env, const char *key)
{
	size_t n = strlen(key);

	for (; env && *env; env++) {
		if (strncmp(*env, key, n) == 0 && (*env)[n] == '=')
			return true;
	}
	return false;
}

char **user_environ(char *const *env, bool replace, const struct user_id *u)
{
	const char *keys[] = { "HOME", "USER", "LOGNAME" };
	const char *vals[] = { u->home, u->name, u->name };
	size_t n = 0, k = 0;
	char **out;

	while (env && env[n])
		n++;
	/* The vector and the three added strings, in one allocation. */
	out = malloc((n + 4) * sizeof(char *) + 3 * (sizeof(u->home) + 16));
	if (!out)
		return NULL;
	char *s = (char *)(out + n + 4);

	for (size_t i = 0; i < n; i++) {
		bool ours = false;

		for (int j = 0; replace && j < 3; j++) {
			size_t len = strlen(keys[j]);

			ours |= strncmp(env[i], keys[j], len) == 0 &&
				env[i][len] == '=';
		}
		if (!ours)
			out[k++] = env[i];
	}
	for (int j = 0; j < 3; j++) {
		if (!replace && has_key(env, keys[j]))
			continue;
		out[k++] = s;
		s += sprintf(s, "%s=%s", keys[j], vals[j]) + 1;
	}
	out[k] = NULL;
	return out;
}
