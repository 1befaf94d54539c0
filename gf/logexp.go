package gf

// What the fields built on log and exp tables (GF(2^4), GF(2^8), GF(2^16))
// share: exp holds the powers of the generator 2 for at least one period of
// the multiplicative group, whose order is order.

// expAt returns 2^n for any integer n.
func expAt[E byte | uint16](exp []E, order, n int) E {
	n %= order
	if n < 0 {
		n += order
	}
	return exp[n]
}

// powLog returns a^n given log a, or for a = 0 (zero): 0^0 = 1, 0^n = 0.
func powLog[E byte | uint16](exp []E, order, loga int, zero bool, n int) E {
	if zero {
		if n == 0 {
			return 1
		}
		return 0
	}
	return expAt(exp, order, loga*(n%order))
}
