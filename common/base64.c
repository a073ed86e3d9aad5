// SPDX-License-Identifier: Apache-2.0
/*
 * base64.c - see base64.h.  Whole buffers in, whole buffers out: the API
 * carries each piece of data as one JSON string, so nettle's streaming
 * contexts never need to outlive a call.
 */
#include <errno.h>
#include <nettle/base64.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/base64.h"

char *base64_encode(const void *data, size_t len)
{
	char *text = malloc(BASE64_ENCODE_RAW_LENGTH(len) + 1);

	if (!text)
		return NULL;
	base64_encode_raw(text, len, data);
	text[BASE64_ENCODE_RAW_LENGTH(len)] = '\0';
	return text;
}

void *base64_decode(const char *text, size_t len, size_t *out_len)
{
	struct base64_decode_ctx ctx;
	/* +1: malloc(0) may answer NULL, which means failure here. */
	uint8_t *out = malloc(BASE64_DECODE_LENGTH(len) + 1);

	if (!out)
		return NULL;
	base64_decode_init(&ctx);
	/* final() fails on a group left unfinished: missing padding. */
	if (!base64_decode_update(&ctx, out_len, out, len, text) ||
	    !base64_decode_final(&ctx)) {
		free(out);
		errno = EINVAL;
		return NULL;
	}
	return out;
}
