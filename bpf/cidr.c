// SPDX-License-Identifier: Apache-2.0
/*
 * cidr.c - net_cidr_parse (policy.h): the one place a CIDR a client or a
 * config file wrote becomes a struct net_cidr, so the API, the config and
 * the CLI reject the same things with the same words; and
 * net_cidr_contains, the one place its mask is computed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/policy.h"

int net_cidr_parse(const char *text, struct net_cidr *out, char *err,
		   size_t errlen)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(text, '/');
	size_t len = slash ? (size_t)(slash - text) : strlen(text);
	struct in_addr in;
	unsigned long prefix = 32;

	if (len == 0 || len >= sizeof(addr)) {
		snprintf(err, errlen, "'%.64s' is not a CIDR (A.B.C.D/N)",
			 text);
		return -EINVAL;
	}
	memcpy(addr, text, len);
	addr[len] = '\0';
	if (inet_pton(AF_INET, addr, &in) != 1) {
		snprintf(err, errlen,
			 "'%.64s' is not a CIDR: '%s' is not an IPv4 address",
			 text, addr);
		return -EINVAL;
	}
	if (slash) {
		char *end;

		errno = 0;
		prefix = strtoul(slash + 1, &end, 10);
		if (slash[1] < '0' || slash[1] > '9' || *end || errno ||
		    prefix > 32) {
			snprintf(err, errlen,
				 "'%.64s' is not a CIDR: the prefix length "
				 "must be 0 to 32",
				 text);
			return -EINVAL;
		}
	}
	uint32_t a = ntohl(in.s_addr);
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;

	if (a & ~mask) {
		snprintf(
			err, errlen,
			"'%.64s' is not a CIDR: address bits past /%lu are set",
			text, prefix);
		return -EINVAL;
	}
	out->addr = a;
	out->prefix = (uint8_t)prefix;
	return 0;
}

bool net_cidr_contains(struct net_cidr net, uint32_t a)
{
	uint32_t mask = net.prefix ? ~0u << (32 - net.prefix) : 0;

	return !((a ^ net.addr) & mask);
}
