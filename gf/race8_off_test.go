//go:build !race

package gf

const race8 = false
