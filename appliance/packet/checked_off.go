//go:build !lrcheck

package packet

const checked = false
