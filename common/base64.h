/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base64.h - RFC 4648 base64 with padding, the way the thawd API carries
 * binary data (exec stdin, stdout, stderr) inside JSON strings (API.md).
 * Thin wrappers over nettle's codec, so that the daemon and its client
 * encode and decode alike and neither carries a hand-written table.
 */
#ifndef THAW_POOL_BASE64_H
#define THAW_POOL_BASE64_H

#include <stddef.h>

/*
 * @len bytes of @data as a NUL-terminated base64 string, padded.  Returns
 * a malloc'd string, or NULL (errno ENOMEM).
 */
char *base64_encode(const void *data, size_t len);

/*
 * The bytes @len characters of base64 @text stand for, padding required,
 * into a malloc'd buffer of *@out_len bytes (never NULL on success, even
 * for empty @text).  Returns NULL with errno EINVAL when @text is not
 * base64, ENOMEM when out of memory.
 */
void *base64_decode(const char *text, size_t len, size_t *out_len);

#endif
