package config

import (
	"reflect"
	"slices"
	"strings"
)

// FirstDiff is the toml key of the first field that differs between a and b,
// two values of one struct type, leaving out the keys in except; "" when they
// agree. A stage's Reload uses it to name what it cannot take while running.
func FirstDiff(a, b any, except ...string) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Struct {
		panic("config.FirstDiff: two values of one struct type")
	}
	for i := range va.NumField() {
		f := va.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || key == "-" || slices.Contains(except, key) {
			continue
		}
		if key == "" {
			key = f.Name
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return key
		}
	}
	return ""
}
