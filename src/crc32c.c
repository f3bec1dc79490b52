/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crc32c: slice-by-8.  tab[0] is the classic byte-at-a-time table; tab[k][n]
 * is the CRC of byte n followed by k zero bytes, so eight table loads fold
 * eight input bytes at once.  The tables (8 KiB) are built on first use
 * rather than written out: they follow from the polynomial alone.
 */
#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY	0x82F63B78u	/* reflected 0x1EDC6F41 */

static uint32_t crc32c_tab[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	uint32_t n, c;
	int k;

	for (n = 0; n < 256; n++) {
		c = n;
		for (k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_tab[0][n] = c;
	}
	for (n = 0; n < 256; n++) {
		c = crc32c_tab[0][n];
		for (k = 1; k < 8; k++) {
			c = (c >> 8) ^ crc32c_tab[0][c & 0xff];
			crc32c_tab[k][n] = c;
		}
	}
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* The 8-byte step reads the word little-endian: the first byte is lowest. */
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		v ^= crc;
		crc = crc32c_tab[7][v & 0xff] ^ crc32c_tab[6][(v >> 8) & 0xff] ^
		      crc32c_tab[5][(v >> 16) & 0xff] ^ crc32c_tab[4][(v >> 24) & 0xff] ^
		      crc32c_tab[3][(v >> 32) & 0xff] ^ crc32c_tab[2][(v >> 40) & 0xff] ^
		      crc32c_tab[1][(v >> 48) & 0xff] ^ crc32c_tab[0][v >> 56];
		p += 8;
		len -= 8;
	}
#endif
	while (len--)
		crc = (crc >> 8) ^ crc32c_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}
