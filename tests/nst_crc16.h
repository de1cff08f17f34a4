/*
 * nst_crc16.h - CRC16-XMODEM a bit at a time, straight from the
 * polynomial (0x1021, initial 0, no reflection): the reference that
 * ns_crc16's table-driven steps are checked against (test_schema, the
 * key fuzz target).
 */
#ifndef NST_CRC16_H
#define NST_CRC16_H

#include <stddef.h>
#include <stdint.h>

static inline uint16_t nst_crc16_bitwise(const uint8_t *p, size_t len)
{
	uint16_t crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (uint16_t)(crc << 1) ^ 0x1021
					   : (uint16_t)(crc << 1);
	}
	return crc;
}

#endif
