package clock

// ntpEpochOffset is the seconds from 1900-01-01 (NTP era 0) to 1970-01-01.
const ntpEpochOffset = 2208988800

// NTP converts Unix nanoseconds to a 64-bit NTP timestamp (RFC 5905 §6):
// 32 bits of seconds since 1900, 32 bits of fraction.
func NTP(unixNs int64) uint64 {
	sec := uint64(unixNs/1e9) + ntpEpochOffset
	ns := uint64(unixNs % 1e9)
	return sec<<32 | (ns<<32)/1e9
}

// FromNTP converts a 64-bit NTP timestamp (era 0) to Unix nanoseconds.
func FromNTP(ts uint64) int64 {
	sec := int64(ts>>32) - ntpEpochOffset
	frac := ts & 0xFFFFFFFF
	return sec*1e9 + int64((frac*1e9+(1<<31))>>32)
}

// PTP converts TAI nanoseconds to the truncated PTPv2 timestamp STAMP and IOAM
// carry (RFC 8877 §4.3): 32 bits of seconds and 32 bits of nanoseconds.
func PTP(taiNs int64) uint64 {
	return uint64(taiNs/1e9)<<32 | uint64(taiNs%1e9)
}

// FromPTP converts a truncated PTPv2 timestamp to TAI nanoseconds.
func FromPTP(ts uint64) int64 {
	return int64(ts>>32)*1e9 + int64(ts&0xFFFFFFFF)
}
