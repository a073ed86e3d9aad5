/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jail_ids.h - the supervisor's half of a VMM's jail (the VMM's own half,
 * entering it, is vmm/jail.h): whom each VMM runs as.
 *
 * Every live VMM gets a uid and gid (the same number) of its own from a
 * range no one else uses, JAIL_IDS_DEFAULT unless the daemon's config or
 * THAW_JAIL_IDS says otherwise.  `thaw run`, `thaw snapshot create` and
 * any number of daemons share a range without a registry that could go
 * stale: an id is taken by holding a write lock (an open file description
 * lock) on its byte of JAIL_IDS_LOCK_FILE.  The kernel drops the lock when
 * its holder closes it or dies, so a crash frees its ids by itself.  The
 * lock's descriptor is close-on-exec: the VMM never holds its own claim.
 */
#ifndef THAW_POOL_HOST_JAIL_H
#define THAW_POOL_HOST_JAIL_H

#include <stddef.h>
#include <stdint.h>

/*
 * 65536 ids far above any login's, and where systemd allocates none: past
 * its containers' range (524288-1879048191), below 2^31 (some tools take
 * ids as signed).
 */
#define JAIL_IDS_DEFAULT "1879048192-1879113727"
#define JAIL_IDS_ENV "THAW_JAIL_IDS"
#define JAIL_IDS_LOCK_FILE "/run/thaw/jail-ids.lock"
#define JAIL_NETNS_FILE "/run/thaw/empty-netns"

struct jail_ids {
	uint32_t first, last;
};

/*
 * "FIRST-LAST" into @ids: decimal, 1 <= FIRST <= LAST < 2^32 - 1.  0, or
 * -EINVAL with @err quoting @text.
 */
int jail_ids_parse(const char *text, struct jail_ids *ids, char *err,
		   size_t errlen);

/* THAW_JAIL_IDS's range if it is set, else JAIL_IDS_DEFAULT's. */
int jail_ids_from_env(struct jail_ids *ids, char *err, size_t errlen);

/* One id held: the VMM's uid and gid.  lock_fd -1: none. */
struct jail_id {
	uint32_t id;
	int lock_fd;
};

/*
 * Takes a free id of @ids (NULL: jail_ids_from_env()'s).  0, or a
 * negative errno: -EAGAIN when every id is held, with @err saying so.
 */
int jail_id_claim(const struct jail_ids *ids, struct jail_id *out, char *err,
		  size_t errlen);

/* Frees the id for another VMM; its VMM must have exited. */
void jail_id_release(struct jail_id *id);

/*
 * The network namespace every jail joins until sandboxes get networks of
 * their own: empty (a loopback device, down), made once and kept, as
 * `ip netns add` keeps one, on JAIL_NETNS_FILE.  One shared namespace
 * costs a jail a setns(), where a new one per VMM costs ~1 ms to make and
 * more to tear down; sharing it lets no jail reach another, for none may
 * bind or listen (their seccomp filters).  0, or a negative errno with @err.
 */
int jail_empty_netns(char *err, size_t errlen);

/*
 * Takes @dir back from the jailed VMM that wrote into it, which must have
 * ended: @dir becomes ours, mode 0700, and so does each regular file in it
 * with one link, mode 0600 (a snapshot's: guest memory is secret); anything
 * else it may have planted (links, FIFOs, directories, hard links) is
 * removed.  Its uid is someone else's
 * soon, and what it leaves is read by root.  0, or a negative errno with
 * @err naming the entry.
 */
int jail_reclaim(const char *dir, char *err, size_t errlen);

#endif
