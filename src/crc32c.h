/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * crc32c: CRC-32C (Castagnoli), the checksum of iSCSI, ext4 and btrfs
 * metadata.  Chosen over CRC-32 (zlib) for its better error detection on
 * the short blocks we checksum, and because it is the one CPUs accelerate if
 * we ever want that; this version is portable slice-by-8 (about 1 byte per
 * cycle, a few hundred ns for a compressed page).
 *
 * Reflected polynomial 0x82F63B78, initial value and final xor ~0, as every
 * other implementation, so crc32c(0, "123456789", 9) == 0xE3069283.
 */
#ifndef ZSWAPFS_CRC32C_H
#define ZSWAPFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC of len bytes at buf, continuing from crc (the result of an earlier
 * call, or 0 to start): crc32c(crc32c(0, a, n), b, m) is the CRC of a then b.
 * Thread safe.
 */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
